"""The benchmark harness on the CPU: every system of the journey, the tiny model, a short run.

A test that the harness works (structure and counts, not speed): each system starts, serves
every request, generates exactly the forced number of tokens, and stops; the head-to-head,
the autotune sweep and their reports come out. Speed is measured on the GPU (bench/README.md).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.loadgen import run
from bench.systems import ALL_SYSTEMS, BenchContext, bench_app_config, started
from bench.targets import OpenAITarget
from bench.workloads import make_workload, tokenizer_counter
from serve_app.core.config import AppConfig
from tests.conftest import ROOT

REQUESTS, SLOW_REQUESTS = 12, 6
ENV = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(ROOT)}
SMALL_ENGINE = json.dumps({"max_model_len": 2048, "max_num_seqs": 8})


def bench(module: str, *args: str, timeout: int = 1500) -> None:
    cmd = [sys.executable, "-m", module, *args]
    done = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]


@pytest.fixture(scope="module")
def journey(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("journey")
    bench(
        "bench.journey", "--model", str(tiny_model_dir),
        "--serve-config", str(ROOT / "serve_config.cpu.yaml"), "--engine", SMALL_ENGINE,
        "--requests", str(REQUESTS), "--slow-requests", str(SLOW_REQUESTS),
        "--warmup", "2", "--concurrency", "4",
        "--head-to-head", "ray_serve,vllm_serve", "--rounds", "2", "--out", str(out),
    )  # fmt: skip
    result = json.loads((out / "journey.json").read_text())
    result["_out"] = out
    return result


def test_every_system_serves_every_request(journey: dict) -> None:
    runs = {(r["system"], r["workload"]): r for r in journey["runs"]}
    assert {s for s, _ in runs} == set(ALL_SYSTEMS)
    for (system, _), r in runs.items():
        expected = (
            SLOW_REQUESTS if system in {"mp_queue_1", "mp_queue_2", "static_batch"} else REQUESTS
        )
        assert (r["requests"], r["ok"]) == (expected, expected), (system, r["errors_by_status"])
        assert r["rps"] > 0
        assert r["p50_s"] <= r["p95_s"] <= r["p99_s"]


def test_every_system_generates_exactly_the_forced_tokens(
    journey: dict, tiny_model_dir: Path
) -> None:
    count = tokenizer_counter(str(tiny_model_dir))
    for r in journey["runs"]:
        n = (
            SLOW_REQUESTS
            if r["system"] in {"mp_queue_1", "mp_queue_2", "static_batch"}
            else REQUESTS
        )
        items = make_workload(r["workload"], REQUESTS, seed=0, count_tokens=count)[:n]
        assert r["output_tokens"] == sum(i.output_tokens for i in items), r["system"]


def test_head_to_head_alternates_and_reports_ratios(journey: dict) -> None:
    h2h = journey["head_to_head"]
    assert len(h2h["rounds"]) == 2
    for round_ in h2h["rounds"]:
        assert {k: v["ok"] for k, v in round_.items()} == {
            "ray_serve": REQUESTS,
            "vllm_serve": REQUESTS,
        }
    ratio = h2h["ratios"]["ray_serve/vllm_serve"]
    assert ratio["rps_ratio_min"] <= ratio["rps_ratio_median"] <= ratio["rps_ratio_max"]


def test_journey_reports(journey: dict) -> None:
    out: Path = journey["_out"]
    table = (out / "journey.md").read_text()
    assert "4. this project (Ray Serve)" in table
    assert "ray_serve/vllm_serve" in table
    assert (out / "journey.png").stat().st_size > 10_000
    assert (out / "head_to_head.png").stat().st_size > 10_000
    assert journey["ratios"]["variable"]["ray_serve/raw_engine"] > 0


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


def test_workload_rounds_alternate_html_and_plain_on_one_system(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """``--workload-rounds``: the service up once, html and variable alternated on fresh texts,
    the html/variable ratio per round (the GPU figure of markup's cost comes from this)."""
    out = tmp_path_factory.mktemp("workload-rounds")
    bench(
        "bench.journey", "--model", str(tiny_model_dir),
        "--serve-config", str(ROOT / "serve_config.cpu.yaml"), "--engine", SMALL_ENGINE,
        "--systems", "ray_serve", "--workloads", "html,variable", "--workload-rounds", "2",
        "--requests", str(REQUESTS), "--warmup", "2", "--concurrency", "4", "--out", str(out),
    )  # fmt: skip
    result = json.loads((out / "journey.json").read_text())
    assert result["runs"] == []  # no sequential journey: only the alternated workloads
    w2w = result["workload_head_to_head"]
    assert w2w["system"] == "ray_serve"
    assert len(w2w["rounds"]) == 2
    for round_ in w2w["rounds"]:
        assert {k: v["ok"] for k, v in round_.items()} == {"html": REQUESTS, "variable": REQUESTS}
    ratio = w2w["ratios"]["html/variable"]
    assert 0 < ratio["rps_ratio_min"] <= ratio["rps_ratio_median"] <= ratio["rps_ratio_max"]
    assert "html/variable" in (out / "journey.md").read_text()
    assert (out / "workload_head_to_head.png").stat().st_size > 10_000


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
