"""The benchmark harness on the CPU, its systems that run on Ray: the tiny model, a short run.

A test that the harness works (structure and counts, not speed): each system starts, serves
every request, generates exactly the forced number of tokens, and stops; the head-to-head
and the reports come out. Speed is measured on the GPU (bench/README.md). The systems that
start no Ray (the journey's first stages, `vllm serve`, the autotune sweep, a server against
its twin) are in test_harness_plain.py, which ./test.sh runs beside the end-to-end tier: in
this module they took 13 of the tier's 50 minutes in CI. ``raw_engine`` stays here, in the
same journey as this project, for the report's ratio of the two.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.workloads import make_workload, tokenizer_counter
from tests.conftest import ROOT

REQUESTS, SLOW_REQUESTS = 12, 6
ENV = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(ROOT)}
SMALL_ENGINE = json.dumps({"max_model_len": 2048, "max_num_seqs": 8})
SLOW_SYSTEMS = {"mp_queue_1", "mp_queue_2", "static_batch"}  # sent SLOW_REQUESTS only
# This module's journey; test_harness_plain.py's has the rest of ALL_SYSTEMS.
RAY_JOURNEY = ["ray_serve", "ray_serve_llm", "raw_engine"]


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
        "--warmup", "2", "--concurrency", "4", "--systems", ",".join(RAY_JOURNEY),
        "--head-to-head", "ray_serve,vllm_serve", "--rounds", "2", "--out", str(out),
    )  # fmt: skip
    result = json.loads((out / "journey.json").read_text())
    result["_out"] = out
    return result


def check_every_system_serves_every_request(journey: dict, systems: list[str]) -> None:
    """Each of ``systems`` ran, answered every request it was sent, with ordered latencies."""
    runs = {(r["system"], r["workload"]): r for r in journey["runs"]}
    assert {s for s, _ in runs} == set(systems)
    for (system, _), r in runs.items():
        expected = SLOW_REQUESTS if system in SLOW_SYSTEMS else REQUESTS
        assert (r["requests"], r["ok"]) == (expected, expected), (system, r["errors_by_status"])
        assert r["rps"] > 0
        assert r["p50_s"] <= r["p95_s"] <= r["p99_s"]


def check_every_system_generates_exactly_the_forced_tokens(journey: dict, model: Path) -> None:
    count = tokenizer_counter(str(model))
    for r in journey["runs"]:
        n = SLOW_REQUESTS if r["system"] in SLOW_SYSTEMS else REQUESTS
        items = make_workload(r["workload"], REQUESTS, seed=0, count_tokens=count)[:n]
        assert r["output_tokens"] == sum(i.output_tokens for i in items), r["system"]


def test_every_system_serves_every_request(journey: dict) -> None:
    check_every_system_serves_every_request(journey, RAY_JOURNEY)


def test_every_system_generates_exactly_the_forced_tokens(
    journey: dict, tiny_model_dir: Path
) -> None:
    check_every_system_generates_exactly_the_forced_tokens(journey, tiny_model_dir)


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
