"""The documents-vs-live-traffic harness on the CPU: this project started by the harness (serve
run, vLLM on the CPU, the tiny model), live users in alternating rounds without and with a
document translating through /documents. Checked: structure, counts, every live request
answered, every document finished; not speed (2 shared cores; the figure comes from the GPU).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.document_feed import make_document
from bench.document_load import _parser, app_config
from bench.workloads import tokenizer_counter
from tests.bench.test_harness import SMALL_ENGINE, bench
from tests.conftest import ROOT

ROUNDS, REQUESTS, PARAGRAPHS = 3, 12, 8


@pytest.fixture(scope="module")
def result(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("document_load")
    bench(
        "bench.document_load", "--model", str(tiny_model_dir),
        "--serve-config", str(ROOT / "serve_config.cpu.yaml"), "--engine", SMALL_ENGINE,
        "--users", "4", "--rounds", str(ROUNDS), "--requests", str(REQUESTS), "--warmup", "4",
        "--doc-paragraphs", str(PARAGRAPHS), "--doc-paragraph-tokens", "30",
        "--out", str(out),
    )  # fmt: skip
    loaded = json.loads((out / "document_load.json").read_text())
    print(json.dumps(loaded["summary"], indent=2))  # the CPU figures, for the record
    loaded["_out"] = out
    return loaded


def test_rounds_alternate_and_every_live_request_is_answered(result: dict) -> None:
    assert [r["order"] for r in result["rounds"]] == [
        ["without", "with"],
        ["with", "without"],
        ["without", "with"],
    ]
    for r in result["rounds"]:
        for phase in ("without", "with"):
            run = r[phase]
            assert (run["requests"], run["ok"]) == (REQUESTS, REQUESTS), run["errors_by_status"]
            assert run["errors_by_status"] == {}
            assert 0 < run["p50_s"] <= run["p95_s"]
    assert result["summary"]["live_requests_lost"] == 0


def test_the_document_alone_finishes_and_has_a_speed(result: dict) -> None:
    alone = result["document_alone"]
    assert alone["status"] == "done"
    assert alone["segments"] == f"{PARAGRAPHS}/{PARAGRAPHS}"
    assert alone["tokens_per_s_per_replica"] > 0


def test_a_document_translates_through_every_with_window_and_finishes(result: dict) -> None:
    assert result["document"]["paragraphs"] == PARAGRAPHS
    for r in result["rounds"]:
        window, jobs = r["with"]["document"], r["with"]["jobs"]
        assert window["documents_uploaded"] == len(jobs) >= 1
        assert window["tokens_done"] > 0
        assert window["tokens_per_s"] > 0
        # A share, not a count to rely on: on CI's two loaded cores a live window of 12
        # requests can end before the keeper's first status poll returns, and that poll can
        # see the document already done (CI at 78253a8 read 0.0). tokens_done above is what
        # shows that the document translated during the window.
        assert 0.0 <= window["open_share"] <= 1.0
        for job in jobs:
            assert job["status"] == "done", job
            assert job["segments"] == f"{PARAGRAPHS}/{PARAGRAPHS}"
            assert job["tokens_per_s"] > 0


def test_summary_settings_and_reports(result: dict) -> None:
    s = result["summary"]
    for key in ("p95_ratio_with_over_without", "rps_ratio_with_over_without"):
        assert 0 < s[key]["min"] <= s[key]["median"] <= s[key]["max"], key
    assert s["document_tokens_per_s_per_replica_during_live"]["median"] > 0
    assert result["settings"]["scheduling_policy"] == "priority"
    assert result["settings"]["documents"]["engine_priority"] == 1
    out: Path = result["_out"]
    table = (out / "document_load.md").read_text()
    assert "p95 with/without" in table
    assert "document alone" in table
    assert (out / "document_load.png").stat().st_size > 10_000


def test_fcfs_and_document_settings_reach_the_app_config(tmp_path: Path) -> None:
    ns = _parser().parse_args([
        "--model", "Qwen/Qwen2.5-0.5B-Instruct", "--scheduling", "fcfs", "--out", str(tmp_path),
        "--serve-config", str(ROOT / "serve_config.cpu.yaml"),
        "--documents", '{"idle_in_flight": 64, "engine_priority": 2}',
    ])  # fmt: skip
    config = app_config(ns, tmp_path / "store.db")
    assert config.engine.scheduling_policy == "fcfs"
    assert (config.documents.idle_in_flight, config.documents.engine_priority) == (64, 2)
    assert config.store is not None
    assert config.store.sqlite_path() == str(tmp_path / "store.db")
    assert config.limits.output_tokens_ratio == 1.0  # forced lengths: tokens = source tokens


def test_the_document_is_k_paragraphs_of_counted_tokens(tiny_model_dir: Path) -> None:
    count = tokenizer_counter(str(tiny_model_dir))
    doc = make_document(5, 20, count, seed=3)
    assert len(doc.paragraphs) == 5
    assert all(count(p) >= 20 for p in doc.paragraphs)
    assert doc.tokens == sum(count(p) for p in doc.paragraphs)
    assert doc.txt().decode().split("\n\n") == [*doc.paragraphs[:-1], doc.paragraphs[-1] + "\n"]
