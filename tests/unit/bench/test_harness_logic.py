"""The benchmark harness's logic: workloads, load loops, summaries, the autotune rule."""

from __future__ import annotations

import asyncio
import http.server
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.autotune import pick
from bench.journey import _ratios, engine_for, journey_ratios
from bench.journey import write as write_journey
from bench.loadgen import closed_loop, open_loop, percentile, run, summarize, timeline
from bench.process import Process
from bench.report import markdown_table, write_run
from bench.systems import (
    RAY_GAVE_UP,
    RAY_SERVE_LLM_READY,
    BenchContext,
    bench_app_config,
    describe,
    probe,
    vllm_serve_args,
    wait_ready,
)
from bench.targets import OpenAITarget, Sample
from bench.workloads import WORDS, Item, make_workload, word_count_estimate
from serve_app.core.config import PromptConfig
from tests.conftest import ROOT


def test_variable_workload_spans_the_range_and_is_reproducible() -> None:
    items = make_workload("variable", 200, seed=4)
    lengths = [i.input_tokens for i in items]
    assert min(lengths) >= 10
    assert max(lengths) <= 200 + 3  # the last word may overshoot a little
    assert min(lengths) < 40  # short and long mixed
    assert max(lengths) > 160
    assert items == make_workload("variable", 200, seed=4)
    assert items != make_workload("variable", 200, seed=5)
    assert {i.source_lang for i in items} == set(WORDS)  # multilingual
    assert all(i.source_lang != i.target_lang for i in items)
    assert all(i.output_tokens == i.input_tokens for i in items)


def test_uniform_workload_has_one_length() -> None:
    lengths = {i.input_tokens for i in make_workload("uniform", 50, uniform_tokens=60)}
    assert min(lengths) >= 60
    assert max(lengths) <= 63


def test_token_counter_is_used_when_given() -> None:
    items = make_workload("variable", 20, count_tokens=len, low=30, high=40)
    assert all(30 <= len(i.text) <= 50 and i.input_tokens == len(i.text) for i in items)
    assert word_count_estimate("今天天气") == 4


class EchoTarget:
    """Answers after ``delay`` seconds; fails items whose text starts with "x"."""

    name = "echo"

    def __init__(self, delay: float = 0.01) -> None:
        self.delay = delay
        self.open = 0
        self.peak = 0

    async def send(self, item: Item) -> Sample:
        self.open += 1
        self.peak = max(self.peak, self.open)
        await asyncio.sleep(self.delay)
        self.open -= 1
        status = 503 if item.text.startswith("x") else 200
        start = time.perf_counter() - self.delay
        return Sample(start, self.delay, status, item.input_tokens, item.output_tokens)

    async def aclose(self) -> None:
        pass


def items(n: int, bad: int = 0) -> list[Item]:
    return [Item("x" if i < bad else "t", "en", "de", 5, 7) for i in range(n)]


async def test_closed_loop_keeps_the_concurrency() -> None:
    target = EchoTarget()
    samples, wall = await closed_loop(target, items(40), concurrency=8)
    assert len(samples) == 40
    assert target.peak == 8
    assert wall >= 5 * 0.01


async def test_open_loop_sends_at_the_rate_whatever_the_latency() -> None:
    target = EchoTarget(delay=0.2)
    samples, wall = await open_loop(target, items(30), rate=200, seed=1)
    assert len(samples) == 30
    assert target.peak > 10  # arrivals did not wait for answers
    assert wall < 1.5


async def test_run_summarizes_errors_tokens_and_timeline() -> None:
    result = await run(EchoTarget(), items(20, bad=5), concurrency=4)
    assert (result["requests"], result["ok"]) == (20, 15)
    assert result["errors_by_status"] == {"503": 5}
    assert result["output_tokens"] == 15 * 7
    assert sum(r["ok"] + r["errors"] for r in result["timeline"]) == 20


def test_percentile_and_summary() -> None:
    assert percentile([], 50) is None
    assert percentile([1, 2, 3, 4], 50) == 2
    assert percentile(list(range(1, 101)), 95) == 95
    samples = [Sample(0.0, 1.0, 200, 3, 4), Sample(0.5, 2.0, None), Sample(1.0, 0.5, 429)]
    s = summarize(samples, wall_s=2.5)
    assert s["ok"] == 1
    assert s["errors_by_status"] == {"429": 1, "no_answer": 1}
    assert s["rps"] == 0.4
    rows = timeline(samples)
    assert [r["t"] for r in rows] == [0, 1, 2]
    assert rows[0]["in_flight"] == 2


def test_autotune_rule_picks_the_knee() -> None:
    points = [
        {"max_num_seqs": 1, "rps": 3.0, "p95_s": 0.5},
        {"max_num_seqs": 8, "rps": 19.5, "p95_s": 1.0},
        {"max_num_seqs": 16, "rps": 20.0, "p95_s": 1.2},
        {"max_num_seqs": 32, "rps": 20.3, "p95_s": 1.9},
    ]
    assert pick(points, None, 0.05)["max_num_seqs"] == 8  # 19.5 is within 5% of 20.3
    assert pick(points, None, 0.02)["max_num_seqs"] == 16
    assert pick(points, None, 0.0)["max_num_seqs"] == 32
    assert pick(points, 0.9, 0.05)["max_num_seqs"] == 1  # only 1 meets the p95 target
    assert pick(points, 0.1, 0.05)["max_num_seqs"] == 1  # none does: the fastest p95


def test_ratios() -> None:
    rounds = [{"a": {"rps": 10, "p95_s": 1.0}, "b": {"rps": 8, "p95_s": 2.0}}] * 2 + [
        {"a": {"rps": 9, "p95_s": 1.0}, "b": {"rps": 10, "p95_s": 1.0}}
    ]
    r = _ratios(rounds, ["a", "b"])["a/b"]
    assert (r["rps_ratio_median"], r["rps_ratio_min"], r["rps_ratio_max"]) == (1.25, 0.9, 1.25)
    runs = [
        {"system": "ray_serve", "workload": "variable", "rps": 20.0},
        {"system": "vllm_serve", "workload": "variable", "rps": 16.0},
    ]
    assert journey_ratios(runs) == {"variable": {"ray_serve/vllm_serve": 1.25}}


def test_ttft_ratios_only_where_both_sides_timed_the_first_token() -> None:
    """A server answering whole has no time to first token; the raw engine in-process
    times one anyway: a head-to-head of the two (``ray_serve,raw_engine``) has no TTFT
    ratio, either way round (it raised TypeError with the timed side second)."""
    whole = {"rps": 10, "p95_s": 1.0, "ttft_p50_s": None}
    timed = {"rps": 8, "p95_s": 1.0, "ttft_p50_s": 0.05}
    for first, other in ((whole, timed), (timed, whole)):
        r = _ratios([{"a": first, "b": other}], ["a", "b"])["a/b"]
        assert "ttft_p50_ratio_median" not in r
        assert r["rps_ratio_median"] in (1.25, 0.8)
    both = {"rps": 8, "p95_s": 1.0, "ttft_p50_s": 0.04}
    r = _ratios([{"a": both, "b": timed}], ["a", "b"])["a/b"]
    assert r["ttft_p50_ratio_median"] == 0.8


def test_bench_config_forces_output_lengths() -> None:
    config = bench_app_config(ROOT / "serve_config.yaml", "/m", {"load_format": "dummy"})
    assert config.engine.model == "/m"
    assert config.engine.load_format == "dummy"
    assert config.engine.max_num_seqs == 24  # the production setting is what is measured
    assert config.prompt.sampling.ignore_eos
    assert (config.limits.output_tokens_ratio, config.limits.output_tokens_margin) == (1.0, 0)


def test_vllm_serve_args_mirror_the_engine_settings() -> None:
    config = bench_app_config(ROOT / "serve_config.yaml", "/m", {"enforce_eager": True})
    args = vllm_serve_args(config.engine.engine_kwargs())
    assert args[0] == "/m"
    joined = " ".join(args)
    assert "--max-num-seqs 24" in joined
    assert "--max-num-batched-tokens 8192" in joined
    assert "--gpu-memory-utilization 0.3" in joined
    assert "--max-cudagraph-capture-size 512" in joined
    assert "--stream-interval 4" in joined  # the peer streams as this project's engine does
    flag = args.index("--compilation-config")  # the same CUDA graphs as this project's engine
    assert json.loads(args[flag + 1]) == {"cudagraph_mode": "FULL"}
    assert "--enforce-eager" in args
    assert "--trust-remote-code" not in args


def test_vllm_serve_args_give_nested_settings_as_json() -> None:
    extra = {"compilation_config": {"cudagraph_mode": "FULL"}}
    config = bench_app_config(ROOT / "serve_config.yaml", "/m", {"extra_engine_args": extra})
    args = vllm_serve_args(config.engine.engine_kwargs())
    flag = args.index("--compilation-config")
    assert json.loads(args[flag + 1]) == {"cudagraph_mode": "FULL"}


def test_engine_for_one_label_leaves_the_others_alone(tmp_path: Path) -> None:
    config = bench_app_config(ROOT / "serve_config.yaml", "/m")
    piecewise = {"cudagraph_mode": "FULL_AND_PIECEWISE", "max_num_seqs": 8}
    ctx = BenchContext(config, ROOT / "serve_config.yaml", tmp_path, engine_for={"b@2": piecewise})
    assert ctx.for_label("b") is ctx
    twin = ctx.for_label("b@2")
    assert (twin.config.engine.cudagraph_mode, twin.config.engine.max_num_seqs) == (
        "FULL_AND_PIECEWISE",
        8,
    )
    assert twin.config.engine.max_num_batched_tokens == config.engine.max_num_batched_tokens
    assert "--max-num-seqs 8" in " ".join(vllm_serve_args(twin.config.engine.engine_kwargs()))
    assert "--max-num-seqs 24" in " ".join(vllm_serve_args(config.engine.engine_kwargs()))
    assert describe(ctx)["engine_for"] == {"b@2": piecewise}


def test_engine_for_options_parse() -> None:
    assert engine_for(['x@2={"max_num_seqs": 8}']) == {"x@2": {"max_num_seqs": 8}}
    with pytest.raises(SystemExit):
        engine_for(['{"max_num_seqs": 8}'])


def test_openai_target_asks_what_our_service_asks() -> None:
    target = OpenAITarget("peer", "http://x", "bench", PromptConfig(family="chat"))
    body = target.body(Item("Hallo Welt", "de", "en", 3, 3))
    assert body["max_tokens"] == body["min_tokens"] == 3
    assert body["ignore_eos"] is True
    assert "German" in body["messages"][-1]["content"]
    assert body["messages"][-1]["content"].endswith("Hallo Welt")


def test_reports_are_written(tmp_path: Path) -> None:
    result = {"system": "s", "workload": "variable", "rps": 2.5, "p95_s": 0.4, "ok": 3}
    result |= {"requests": 3, "errors_by_status": {}, "timeline": timeline([Sample(0, 1, 200)])}
    write_run(tmp_path, result)
    assert json.loads((tmp_path / "results.json").read_text())["rps"] == 2.5
    assert (tmp_path / "results.png").stat().st_size > 1000
    table = markdown_table([result])
    assert table.splitlines()[2].startswith("| s | variable | 3 | 3 | 2.5 |")


def test_a_head_to_head_alone_is_reported_and_plotted(tmp_path: Path) -> None:
    def brief(rps: float) -> dict:
        return {"rps": rps, "p95_s": 1.0, "ok": 10, "requests": 10, "errors_by_status": {}}

    rounds = [{"a": brief(10.0), "b": brief(8.0)}, {"a": brief(9.0), "b": brief(10.0)}]
    h2h = {"systems": ["a", "b"], "concurrency": 25, "requests_per_run": 10, "rounds": rounds}
    h2h["ratios"] = _ratios(rounds, ["a", "b"])
    results = {"machine": "m", "date": "d", "concurrency": 25, "settings": {"engine": {}}}
    write_journey(tmp_path, results | {"runs": [], "ratios": {}, "head_to_head": h2h})
    assert (tmp_path / "head_to_head.png").stat().st_size > 10_000
    assert not (tmp_path / "journey.png").exists()
    assert (
        "a/b: RPS ratio median 1.075 (min 0.9, max 1.25)" in (tmp_path / "journey.md").read_text()
    )


@pytest.mark.parametrize("kind", ["uniform", "variable", "html"])
def test_workload_items_serialize(kind: str) -> None:
    item = make_workload(kind, 1)[0]  # type: ignore[arg-type]
    assert set(item.to_dict()) == {
        "text",
        "source_lang",
        "target_lang",
        "input_tokens",
        "output_tokens",
        "format",
    }


def test_html_workload_is_the_variable_one_as_posts() -> None:
    from serve_app.translation.markup import parse

    posts = make_workload("html", 30, seed=7)
    plain = make_workload("variable", 30, seed=7)
    for post, text in zip(posts, plain, strict=True):
        assert post.format == "html"
        assert (post.input_tokens, post.output_tokens) == (text.input_tokens, text.output_tokens)
        for part in ("mention", "hashtag", "<a href"):
            assert part in post.text
        # The words the model translates are the plain text's, in order, and the hashtag.
        words = " ".join(s.source() for s in parse("html", post.text).segments)
        hashtag = rf"<x(\d+)>#<x\d+>{post.source_lang}</x\d+></x\1>"
        assert len(re.findall(hashtag, words)) == 1
        stripped = " ".join(re.sub(rf"<x\d+/>|{hashtag}", " ", words).split())
        assert stripped == " ".join(text.text.split()) or text.source_lang in {"zh", "ja"}


async def test_streaming_openai_target_measures_ttft() -> None:
    import httpx

    from serve_app.client import TranslationClient

    events = [
        {"choices": [{"delta": {"role": "assistant"}}]},
        {"choices": [{"delta": {"content": "Hal"}}]},
        {"choices": [{"delta": {"content": "lo"}}]},
        {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 2}},
    ]
    sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})

    target = OpenAITarget("peer", "http://x", "bench", PromptConfig(family="chat"), stream=True)
    target.client = TranslationClient("http://x", transport=httpx.MockTransport(handler))
    sample = await target.send(Item("Hello", "en", "de", 2, 2))
    await target.aclose()
    assert seen[0]["stream"] is True
    assert (sample.status, sample.input_tokens, sample.output_tokens) == (200, 30, 2)
    assert sample.ttft_s is not None
    assert 0 <= sample.ttft_s <= sample.latency_s
    assert summarize([sample], 1.0)["ttft_p50_s"] == round(sample.ttft_s, 4)


def test_time_to_first_visible_text_skips_whitespace_deltas() -> None:
    """`vllm serve` streams a model's opening newlines; this project strips them. The first
    text is timed as it comes (``ttft``), the first text that shows apart (``visible``)."""
    from bench.targets import _EventReader, _native_text, _openai_text

    peer = _EventReader(_openai_text, ("prompt_tokens", "completion_tokens"))
    for t, content in enumerate([None, "\n", " \n", "Hal", "lo"]):
        delta = {"role": "assistant"} if content is None else {"content": content}
        peer.read("message", {"choices": [{"delta": delta}]}, float(t))
    assert (peer.first, peer.ttft, peer.visible) == (0.0, 1.0, 3.0)
    ours = _EventReader(_native_text, ("input_tokens", "output_tokens"))
    for t, (name, data) in enumerate([("start", {}), ("delta", {"text": "Hal"})]):
        ours.read(name, data, float(t))
    assert (ours.first, ours.ttft, ours.visible) == (0.0, 1.0, 1.0)
    samples = [Sample(0, 5.0, 200, ttft_s=1.0, ttft_visible_s=3.0)]
    assert summarize(samples, 5.0)["ttft_visible_p50_s"] == 3.0


def _sleeper(tmp_path: Path, log: str, ray: bool = False) -> Process:
    """A stand-in server process (it only sleeps) with the log it would have written."""
    path = tmp_path / "server.log"
    path.write_text(log)
    proc = subprocess.Popen(["sleep", "60"])
    return Process("server", proc, path, ray=ray)


@pytest.fixture
def ok_url() -> Iterator[str]:
    """An HTTP server answering 200 to every GET."""

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


async def test_ready_waits_for_the_marker_not_just_the_url(tmp_path: Path, ok_url: str) -> None:
    process = _sleeper(tmp_path, "ingress up\n")
    try:
        with pytest.raises(RuntimeError, match="not ready"):
            await wait_ready(process, ok_url, timeout_s=2, marker=RAY_SERVE_LLM_READY)
        process.log.write_text(f"ingress up\n{RAY_SERVE_LLM_READY}\n")
        assert await wait_ready(process, ok_url, timeout_s=5, marker=RAY_SERVE_LLM_READY) < 5
    finally:
        process.proc.kill()


async def test_ready_fails_fast_when_ray_serve_gave_up(tmp_path: Path) -> None:
    log = f"ModuleNotFoundError: No module named 'x'\n{RAY_GAVE_UP} ['Translator'].\n"
    process = _sleeper(tmp_path, log, ray=True)
    start = time.monotonic()
    try:
        with pytest.raises(RuntimeError, match="gave up"):
            await wait_ready(process, "http://127.0.0.1:9/", timeout_s=60)
    finally:
        process.proc.kill()
    assert time.monotonic() - start < 5


class _Silent:
    name = "silent"

    def __init__(self, status: int | None) -> None:
        self.status = status

    async def send(self, item: Item) -> Sample:
        if self.status is None:
            await asyncio.sleep(3600)
        return Sample(0.0, 0.1, self.status)

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize(("status", "message"), [(None, "unanswered"), (503, "got 503")])
async def test_probe_fails_a_system_that_does_not_answer(
    tmp_path: Path, status: int | None, message: str
) -> None:
    process = _sleeper(tmp_path, "ready\n")
    item = make_workload("variable", 1, seed=1)[0]
    try:
        with pytest.raises(RuntimeError, match=message):
            await probe(_Silent(status), process, item, timeout_s=0.2)
        await probe(_Silent(200), process, item, timeout_s=0.2)
    finally:
        process.proc.kill()


def test_markup_bench_reports_costs_and_exact_round_trips() -> None:
    from bench.markup import PARSERS, compare_parsers, markup_cost

    cost = markup_cost(5, 1)
    assert set(cost) == {
        "html_parse_us",
        "html_round_trip_us",
        "text_parse_us",
        "text_round_trip_us",
    }
    assert all(v > 0 for v in cost.values())
    rows = compare_parsers(5, 1)
    assert len(rows) == len(PARSERS)
    assert rows[0]["identical"] == rows[0]["posts"] == 10  # the one the service uses


def test_ray_serve_command_skips_a_dead_clusters_address_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The bench's `serve run`, like serve.sh's: a fresh local Ray past a stale file."""
    from bench.systems import BenchContext, _ray_serve_cmd

    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:1")
    config = bench_app_config(ROOT / "serve_config.cpu.yaml", "/m")
    ctx = BenchContext(config, ROOT / "serve_config.cpu.yaml", tmp_path, env={})
    cmd, env = _ray_serve_cmd(ctx, 8123)
    assert cmd[-4:] == ["run", "--address", "local", str(tmp_path / "serve_config.bench.yaml")]
    assert "RAY_ADDRESS" not in env
    ctx = BenchContext(config, ROOT / "serve_config.cpu.yaml", tmp_path, env={"RAY_ADDRESS": "x:1"})
    assert _ray_serve_cmd(ctx, 8123)[0][-2:] == ["run", str(tmp_path / "serve_config.bench.yaml")]
