"""The benchmark harness on the CPU, its systems that start no Ray: the journey's first stages
and `vllm serve`, the autotune sweep, streaming from `vllm serve`, a server against its twin.

The same checks as test_harness.py (structure and counts, not speed), split off so that
./test.sh runs them beside the end-to-end tier (marked ``no_ray``: they start no Ray cluster
and bind no fixed port), where one of CI's two cores waits while clusters start. Together
the two modules' journeys cover every system of ``bench.systems.ALL_SYSTEMS``.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from bench.loadgen import run
from bench.systems import ALL_SYSTEMS, LABELS, BenchContext, bench_app_config, started
from bench.targets import OpenAITarget
from bench.workloads import make_workload, tokenizer_counter
from serve_app.core.config import AppConfig
from tests.bench.test_harness import (
    ENV,
    RAY_JOURNEY,
    REQUESTS,
    SLOW_REQUESTS,
    SMALL_ENGINE,
    bench,
    check_every_system_generates_exactly_the_forced_tokens,
    check_every_system_serves_every_request,
)
from tests.conftest import ROOT

pytestmark = pytest.mark.no_ray  # ./test.sh runs it beside the e2e tier

PLAIN_JOURNEY = [s for s in ALL_SYSTEMS if s not in RAY_JOURNEY]


@pytest.fixture(scope="module")
def journey(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("journey-plain")
    bench(
        "bench.journey", "--model", str(tiny_model_dir),
        "--serve-config", str(ROOT / "serve_config.cpu.yaml"), "--engine", SMALL_ENGINE,
        "--requests", str(REQUESTS), "--slow-requests", str(SLOW_REQUESTS),
        "--warmup", "2", "--concurrency", "4", "--systems", ",".join(PLAIN_JOURNEY),
        "--out", str(out),
    )  # fmt: skip
    result = json.loads((out / "journey.json").read_text())
    result["_out"] = out
    return result


def test_the_two_journeys_cover_every_system() -> None:
    assert sorted(PLAIN_JOURNEY + RAY_JOURNEY) == sorted(ALL_SYSTEMS)
    assert not {"ray_serve", "ray_serve_llm"} & set(PLAIN_JOURNEY)


def test_every_plain_system_serves_every_request(journey: dict) -> None:
    check_every_system_serves_every_request(journey, PLAIN_JOURNEY)


def test_every_plain_system_generates_exactly_the_forced_tokens(
    journey: dict, tiny_model_dir: Path
) -> None:
    check_every_system_generates_exactly_the_forced_tokens(journey, tiny_model_dir)


def test_plain_journey_reports(journey: dict) -> None:
    out: Path = journey["_out"]
    table = (out / "journey.md").read_text()
    for system in PLAIN_JOURNEY:
        assert LABELS[system] in table, system
    assert (out / "journey.png").stat().st_size > 10_000


def test_autotune_writes_a_valid_config(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Two calls, as on the GPU where a sweep outlasts a device call: the second (--resume)
    measures only the value the first did not."""
    for values, more in (("4", []), ("1,4", ["--resume"])):
        bench(
            "bench.autotune", "--model", str(tiny_model_dir),
            "--serve-config", str(ROOT / "serve_config.cpu.yaml"), "--engine", SMALL_ENGINE,
            "--values", values, "--concurrency", "4", "--requests", "8", "--warmup", "4",
            "--out", str(tmp_path),
            *more,
        )  # fmt: skip
        if not more:
            first = json.loads((tmp_path / "autotune.json").read_text())["points"]
    result = json.loads((tmp_path / "autotune.json").read_text())
    assert [p["max_num_seqs"] for p in result["points"]] == [1, 4]
    assert result["points"][1] == first[0]  # kept, not measured again
    assert all(p["ok"] == 8 and p["decode_ms_per_token"] > 0 for p in result["points"])
    config = yaml.safe_load((tmp_path / "autotune.yaml").read_text())
    args = AppConfig.model_validate(config["applications"][0]["args"])
    assert args.engine.max_num_seqs == result["recommended"]["max_num_seqs"]
    assert args.engine.max_model_len == 2048  # the sweep's --engine settings are kept
    assert (tmp_path / "autotune.png").exists()


def test_streaming_from_vllm_serve_measures_ttft(tiny_model_dir: Path, tmp_path: Path) -> None:
    serve_config = ROOT / "serve_config.cpu.yaml"
    config = bench_app_config(serve_config, str(tiny_model_dir), json.loads(SMALL_ENGINE))
    ctx = BenchContext(config, serve_config, tmp_path, env=ENV)
    items = make_workload(
        "variable", 8, seed=2, count_tokens=tokenizer_counter(str(tiny_model_dir))
    )

    async def stream_all() -> dict:
        async with started(ctx, "vllm_serve", items) as plain:
            url = str(plain.client.http.base_url)  # type: ignore[attr-defined]
            target = OpenAITarget("vllm_serve", url, "bench", config.prompt, stream=True)
            try:
                return await run(target, items, concurrency=4)
            finally:
                await target.aclose()

    result = asyncio.run(stream_all())
    assert (result["requests"], result["ok"]) == (8, 8), result["errors_by_status"]
    assert 0 < result["ttft_p50_s"] <= result["ttft_p95_s"] <= result["p95_s"]
    assert result["ttft_p50_s"] <= result["ttft_visible_p50_s"] <= result["ttft_visible_p95_s"]
    assert result["output_tokens"] == sum(i.output_tokens for i in items)


def test_a_system_against_itself(tiny_model_dir: Path, tmp_path: Path) -> None:
    """The control run: two ``vllm_serve`` up at once (``vllm_serve@2``), alternated like a
    head-to-head, each with its own process and log; ``ray_serve@2`` is refused (one Ray
    cluster per machine)."""
    from bench.journey import head_to_head

    serve_config = ROOT / "serve_config.cpu.yaml"
    config = bench_app_config(serve_config, str(tiny_model_dir), json.loads(SMALL_ENGINE))
    ctx = BenchContext(config, serve_config, tmp_path, env=ENV)
    count = tokenizer_counter(str(tiny_model_dir))
    rounds = [make_workload("variable", 6, seed=10 + r, count_tokens=count) for r in range(2)]
    warmup = make_workload("variable", 2, seed=9, count_tokens=count)
    names = ["vllm_serve", "vllm_serve@2"]
    h2h = asyncio.run(head_to_head(ctx, names, rounds, 3, warmup))
    assert [sorted(r) for r in h2h["rounds"]] == [sorted(names)] * 2
    assert all(r[n]["ok"] == 6 for r in h2h["rounds"] for n in names), h2h["rounds"]
    assert list(h2h["ratios"]) == ["vllm_serve/vllm_serve@2"]
    assert (tmp_path / "vllm_serve.log").exists()
    assert (tmp_path / "vllm_serve@2.log").exists()
    with pytest.raises(ValueError, match="one Ray cluster"):
        asyncio.run(head_to_head(ctx, ["ray_serve@2"], rounds[:1], 3, []))
