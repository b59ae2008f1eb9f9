"""The flow of a document with markup: its segments translated, checked, fallen back, rebuilt.

``read_document`` (synchronous, proportional to the input: the service runs it in a thread)
parses an item's text by its ``format``; plain text with nothing to protect needs no
document and takes ``textflow``'s usual path. ``MarkupFlow.run`` translates every segment
concurrently (each segment's tokenizing and prompts in a worker thread: they are
proportional to it). A segment with tags is sent once with its placeholders, in the family's
formatted-translation prompt; if the answer does not hold every placeholder exactly once,
properly nested (or was cut short, or the segment is longer than one prompt takes), the
segment falls back: its text runs between tags are translated one by one as plain text and
put back between the original tags, which therefore cannot be lost. A segment without tags
is translated as plain text (split into pieces when long, like any text). Whether a tagged
segment tries placeholders at all is the replica's ``FidelityTracker``'s choice
(``markup.method``): while the model keeps losing tags for the target language, segments go
to the structural method first, but for a periodic probe. The response says how many
segments fell back and how many went structural first; the metrics count both.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from serve_app.core.errors import InvalidRequest
from serve_app.core.metrics import MarkupMethod
from serve_app.core.schemas import MarkupInfo, TextItem, TranslateResponse, Usage
from serve_app.translation.cache import CachedTranslation
from serve_app.translation.markup import Document, MarkupOptions, Segment, parse, protect
from serve_app.translation.piece import gather_all
from serve_app.translation.segment import Split, split_text

if TYPE_CHECKING:
    from serve_app.engine.protocol import GenerationRequest
    from serve_app.translation.textflow import Plan, TextTranslator

logger = logging.getLogger("ray.serve.translator")


def markup_options(item: TextItem) -> MarkupOptions:
    t = item.tag_options
    if t is None:
        return MarkupOptions()
    return MarkupOptions(
        frozenset(t.ignore_tags),
        frozenset(t.non_splitting_tags),
        frozenset(t.splitting_tags),
        t.outline_detection,
    )


def needs_reading(item: TextItem) -> bool:
    """Whether the item may be markup: not for plain text without the characters that
    variables and URLs start with (those take the plain path without a thread)."""
    text = item.text
    return item.format != "text" or any(c in text for c in ("{", "%", "://", "<"))


def read_document(item: TextItem, max_chars: int) -> Document | None:
    """The item's text as a document, or None for plain text with nothing protected (and
    for a text that ``plan`` refuses anyway: blank or over the length limit)."""
    if not item.text.strip() or len(item.text) > max_chars:
        return None
    if item.format == "text" and not protect.spans(item.text):
        return None
    try:
        return parse(item.format, item.text, markup_options(item))
    except (RecursionError, ValueError) as exc:  # the parsers are lenient: never expected
        raise InvalidRequest(f"The text could not be read as {item.format}.") from exc


@dataclass(frozen=True)
class SegmentOut:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    truncated: bool = False
    method: MarkupMethod | None = None  # how a segment with tags was translated


@dataclass(frozen=True)
class DocumentOut:
    text: str
    input_tokens: int
    output_tokens: int
    truncated: bool
    info: MarkupInfo


class MarkupFlow:
    """Translates a planned document's segments with the text translator's engine calls."""

    def __init__(self, flow: TextTranslator) -> None:
        self.flow = flow

    async def respond(self, plan: Plan, document: Document, request_id: str) -> TranslateResponse:
        """Translates the document, fills the cache and makes the response."""
        out = await self.run(plan, document, request_id)
        done = CachedTranslation(out.text, out.info.segments, out.truncated, out.info)
        self.flow._store(plan, done)
        usage = Usage(input_tokens=out.input_tokens, output_tokens=out.output_tokens)
        return self.flow._response(plan, out.text, usage, done, cached=False)

    async def run(self, plan: Plan, document: Document, request_id: str) -> DocumentOut:
        segments = document.segments
        outs = await gather_all(
            [self._segment(plan, s, f"{request_id}-s{i}") for i, s in enumerate(segments)]
        )
        methods = Counter(o.method for o in outs if o.method is not None)
        for method, count in methods.items():
            self.flow.metrics.markup_segments(method, count)
        fell_back = methods["placeholders_fell_back"]
        if fell_back:
            logger.info("request %s: %d segments fell back to tag-safe", request_id, fell_back)
        info = MarkupInfo(
            segments=len(segments),
            fallback_segments=fell_back,
            structural_segments=methods["structural_first"],
        )
        return DocumentOut(
            document.rebuild([o.text for o in outs]),
            sum(o.input_tokens for o in outs),
            sum(o.output_tokens for o in outs),
            any(o.truncated for o in outs),
            info,
        )

    async def _segment(self, plan: Plan, segment: Segment, request_id: str) -> SegmentOut:
        if not segment.tags:
            return await self._runs(plan, segment, request_id)
        choice = self.flow.fidelity.choose(plan.target.code)
        if choice == "structural":
            out = await self._runs(plan, segment, request_id)
            return replace(out, method="structural_first")
        return await self._tagged(plan, segment, request_id, probe=choice == "probe")

    async def _tagged(
        self, plan: Plan, segment: Segment, request_id: str, probe: bool
    ) -> SegmentOut:
        """The placeholder path, and the structural fallback when the answer loses a tag."""
        family, flow = self.flow.family, self.flow
        source = segment.source(family.placeholders)
        # Tokenizing is proportional to the segment: done off the event loop.
        job = await asyncio.to_thread(self._tagged_job, plan, source)
        if job is None:  # too long for one prompt: no attempt, nothing learned
            out = await self._runs(plan, segment, request_id)
            return replace(out, method="placeholders_fell_back")
        result = await flow.generate(job, request_id)
        timings = (result.queue_s, result.ttft_s)
        flow._record(plan, source, result.input_tokens, result.output_tokens, *timings)
        restored = None
        if not job.ran_out(result.finish_reason):
            answer = family.markup_answer(family.clean(result.text, source))
            restored = segment.restore(answer, family.placeholders)
        flow.fidelity.record(plan.target.code, restored is not None, probe)
        if restored is not None:
            return SegmentOut(
                restored, result.input_tokens, result.output_tokens, method="placeholders_kept"
            )
        fallback = await self._runs(plan, segment, f"{request_id}-f")
        return SegmentOut(
            fallback.text,
            result.input_tokens + fallback.input_tokens,
            result.output_tokens + fallback.output_tokens,
            fallback.truncated,
            "placeholders_fell_back",
        )

    def _tagged_job(self, plan: Plan, source: str) -> GenerationRequest | None:
        """The formatted-translation request of a segment, or None if it is over one
        prompt's tokens (its runs are then translated one by one)."""
        flow = self.flow
        count = functools.lru_cache(maxsize=64)(flow.engine.count_tokens)
        if count(source) > flow.limits.max_input_tokens:
            return None
        return flow._generation(plan, source, count, markup=True)

    def _plain_jobs(self, plan: Plan, text: str) -> tuple[Split, list[GenerationRequest]]:
        """A plain run's pieces and their requests (in a thread: proportional to the run)."""
        flow = self.flow
        count = functools.lru_cache(maxsize=64)(flow.engine.count_tokens)
        split = split_text(text, flow.limits.max_input_tokens, count)
        return split, [flow._generation(plan, p.text, count) for p in split.pieces]

    async def _runs(self, plan: Plan, segment: Segment, request_id: str) -> SegmentOut:
        """The structural method: each text run translated as plain text on its own."""
        runs = segment.runs()
        outs = await gather_all(
            [self._plain(plan, r.text, f"{request_id}-r{i}") for i, r in enumerate(runs)]
        )
        return SegmentOut(
            segment.join_runs([o.text for o in outs]),
            sum(o.input_tokens for o in outs),
            sum(o.output_tokens for o in outs),
            any(o.truncated for o in outs),
        )

    async def _plain(self, plan: Plan, text: str, request_id: str) -> SegmentOut:
        """Plain text, split into pieces when it is longer than one prompt takes."""
        flow = self.flow
        split, jobs = await asyncio.to_thread(self._plain_jobs, plan, text)
        outs = await gather_all(
            [
                flow._piece(plan, p.text, job, f"{request_id}-p{i}")
                for i, (p, job) in enumerate(zip(split.pieces, jobs, strict=True))
            ]
        )
        return SegmentOut(
            split.join([o.text for o in outs]),
            sum(o.input_tokens for o in outs),
            sum(o.output_tokens for o in outs),
            any(o.truncated for o in outs),
        )
