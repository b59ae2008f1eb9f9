"""The method of each tagged segment chosen by the replica (``markup.method``), through the
translation service with the fake engine: a model that always loses tags is sent segments
structurally first once the window fills (one run set per segment instead of a wasted
placeholder generation and then the run set), with every Kth segment a probe; a model that
keeps tags always gets placeholders; failing then behaving switches back after probes; the
forced methods; every tag returned throughout, and the response and metrics saying how."""

from __future__ import annotations

import re
from collections import Counter

from serve_app.core.config import AppConfig
from serve_app.core.schemas import MarkupInfo, TranslateRequest
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine, RecordingMetrics
from tests.unit.translation.test_markup_translation import (
    Reply,
    dropping_tags,
    html_request,
    upper_keeping_tags,
)

# One tagged segment of three text runs: the structural method costs three engine requests.
DOC = "<p>Good <b>morning</b> dear friends</p>"
_TAG = re.compile(r"<[^>]+>")
KEPT, FELL_BACK, STRUCTURAL = "placeholders_kept", "placeholders_fell_back", "structural_first"


class Replica:
    """A service with a small window (8 attempts, judged from 4, a probe in every 4, then
    in every 8 once a probe lost tags)."""

    def __init__(self, reply: Reply, method: str = "auto", ignore_eos: bool = False) -> None:
        markup = {"method": method, "window": 8, "min_attempts": 4}
        markup |= {"probe_every": 4, "max_probe_every": 8}
        args = {"markup": markup, "cache": {"enabled": False}}
        if ignore_eos:
            args["prompt"] = {"sampling": {"ignore_eos": True}}
        self.engine = FakeEngine()
        self.engine.reply = reply
        self.metrics = RecordingMetrics()
        self.svc = TranslationService(AppConfig.model_validate(args), self.engine, self.metrics)

    async def methods(self, n: int, target: str = "de") -> list[str]:
        """``n`` requests one after the other: how each one's segment was translated; each
        answer checked to hold every tag of the source."""
        await self.svc.start()
        out = []
        for i in range(n):
            sent = len(self.engine.requests)
            request = TranslateRequest(
                text=DOC, source_lang="en", target_lang=target, format="html"
            )
            r = await self.svc.translate(request, f"r{i}")
            assert r.markup is not None
            assert Counter(_TAG.findall(r.translation)) == Counter(_TAG.findall(DOC))
            out.append(self._method(r.markup, self.engine.requests[sent:]))
        return out

    @staticmethod
    def _method(info: MarkupInfo, requests: list) -> str:
        prompts = ["".join(map(chr, q.prompt_token_ids)) for q in requests]
        tried = sum("<source>" in p for p in prompts)  # HY-MT's formatted-translation prompt
        assert info.segments == 1
        if info.structural_segments:
            assert (tried, len(requests), info.fallback_segments) == (0, 3, 0)
            return STRUCTURAL
        assert tried == 1
        if info.fallback_segments:
            assert len(requests) == 1 + 3
            return FELL_BACK
        assert len(requests) == 1
        return KEPT


async def test_a_model_losing_tags_gets_structural_first_but_for_probes() -> None:
    replica = Replica(dropping_tags)
    methods = await replica.methods(4 + 4 + 8 + 8)
    # 4 attempts fill what min_attempts asks; then 3 structural and a probe (which fails:
    # the probes' interval doubles to its most, 8).
    probe_in_4, probe_in_8 = [STRUCTURAL] * 3 + [FELL_BACK], [STRUCTURAL] * 7 + [FELL_BACK]
    assert methods == [FELL_BACK] * 4 + probe_in_4 + probe_in_8 * 2
    assert len(replica.engine.requests) == 7 * (1 + 3) + 17 * 3  # against 24 * 4 without
    assert replica.metrics.markup == Counter({FELL_BACK: 7, STRUCTURAL: 17})


async def test_a_model_keeping_tags_always_gets_placeholders() -> None:
    replica = Replica(upper_keeping_tags)
    assert await replica.methods(20) == [KEPT] * 20
    assert replica.metrics.markup == Counter({KEPT: 20})


async def test_a_model_that_behaves_again_gets_placeholders_back() -> None:
    replica = Replica(dropping_tags)
    assert await replica.methods(4) == [FELL_BACK] * 4
    replica.engine.reply = upper_keeping_tags  # a better model, say
    # Window [lost x4]: a kept probe makes 4/5 = 0.8, still failing; the second 4/6 < 0.8.
    assert await replica.methods(8) == [STRUCTURAL] * 3 + [KEPT] + [STRUCTURAL] * 3 + [KEPT]
    assert await replica.methods(8) == [KEPT] * 8


async def test_each_target_language_is_judged_on_its_own() -> None:
    replica = Replica(dropping_tags)
    assert await replica.methods(4, "de") == [FELL_BACK] * 4
    assert await replica.methods(2, "de") == [STRUCTURAL] * 2
    assert await replica.methods(2, "fr") == [FELL_BACK] * 2


async def test_method_placeholders_always_tries_them() -> None:
    replica = Replica(dropping_tags, method="placeholders")
    assert await replica.methods(12) == [FELL_BACK] * 12


async def test_method_structural_never_tries_them() -> None:
    replica = Replica(upper_keeping_tags, method="structural")
    assert await replica.methods(6) == [STRUCTURAL] * 6
    assert replica.metrics.markup == Counter({STRUCTURAL: 6})


async def test_segments_without_tags_are_not_counted() -> None:
    replica = Replica(dropping_tags, method="structural")
    await replica.svc.start()
    r = await replica.svc.translate(html_request("<p>Plain words</p><p>More <i>x</i></p>"), "r")
    assert r.markup is not None
    assert (r.markup.segments, r.markup.structural_segments) == (2, 1)
    assert r.translation == "<p>PLAIN WORDS</p><p>MORE <i>X</i></p>"
    assert replica.metrics.markup == Counter({STRUCTURAL: 1})


async def test_forced_lengths_keep_a_placeholder_answer_that_kept_the_tags() -> None:
    """Every answer ending at its token limit: a cut short answer is not trusted (the run
    set instead), but under ``ignore_eos`` (the benchmarks' forced lengths) that is every
    answer by request, and one that kept its tags is used."""
    for ignore_eos, method in ((False, FELL_BACK), (True, KEPT)):
        replica = Replica(upper_keeping_tags, method="placeholders", ignore_eos=ignore_eos)
        replica.engine.truncate_marker = "morning"  # in every prompt of the segment
        assert await replica.methods(2) == [method] * 2
