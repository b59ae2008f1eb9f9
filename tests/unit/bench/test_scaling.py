"""The scaling bench's parts: its arguments, the namespace it hands journey's ``context``
(a missing field there stopped a GPU call), and a run in two parts (``--replicas 1``, then
``--replicas 2 --append``) giving one report with the ratio. The serving is faked here; the
GPU runs serve it for real (bench/README.md, "On the GPU")."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bench import scaling

ROOT = Path(__file__).resolve().parents[3]


def _fake_one(rps_per_replica: float):
    async def one(ctx: Any, replicas: int, ns: argparse.Namespace) -> dict[str, Any]:
        assert ctx.stream is False
        assert ctx.config.engine.model == "tiny-model"
        runs = [
            {"rps": rps_per_replica * replicas + k, "p95_s": 0.5, "latencies_s": [0.1, 0.2]}
            for k in (0, 1)
        ]
        for run in runs:
            run.update(workload=f"{replicas} replica(s)", system="ray_serve")
        return {
            "replicas": replicas,
            "users": 25 * replicas,
            "runs": runs,
            "gpu_memory_used_mib": [],
        }

    return one


def _part(out: Path, *flags: str) -> dict[str, Any]:
    ns = scaling.parser().parse_args(
        [
            "--model",
            "tiny-model",
            "--serve-config",
            str(ROOT / "serve_config.cpu.yaml"),
            "--out",
            str(out),
            *flags,
        ]
    )
    result = asyncio.run(scaling.main_async(ns))
    scaling.write(out, result)
    return json.loads((out / "scaling.json").read_text())


def test_replica_counts_are_ones_and_twos() -> None:
    p = scaling.parser()
    base = ["--model", "m", "--out", "o"]
    assert p.parse_args(base).replica_counts == [1, 2]
    assert p.parse_args([*base, "--replicas", "2"]).replica_counts == [2]
    assert p.parse_args([*base, "--replicas", "1,2,1,2"]).replica_counts == [1, 2, 1, 2]
    with pytest.raises(SystemExit):
        p.parse_args([*base, "--replicas", "3"])


def test_two_parts_make_one_report_with_the_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scaling, "one", _fake_one(40.0))
    first = _part(tmp_path, "--replicas", "1")
    assert first["scaling_ratio"] is None
    assert "not yet" in (tmp_path / "scaling.md").read_text()
    both = _part(tmp_path, "--replicas", "2", "--append")
    assert [r["replicas"] for r in both["results"]] == [1, 2]
    assert both["scaling_ratio"] == round(80.5 / 40.5, 3)
    assert f"**{both['scaling_ratio']}**" in (tmp_path / "scaling.md").read_text()
    assert (tmp_path / "scaling.png").exists()


def test_without_append_an_earlier_part_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scaling, "one", _fake_one(40.0))
    _part(tmp_path, "--replicas", "1")
    again = _part(tmp_path, "--replicas", "2")
    assert [r["replicas"] for r in again["results"]] == [2]
    assert again["scaling_ratio"] is None


def test_alternated_counts_pool_their_rounds_and_keep_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--replicas 1,2,1,2``: each count's rounds from both of its turns are pooled (the
    median over all four), and ``order`` says how they were measured, also across a later
    ``--append`` part."""
    rates = iter([40.0, 40.0, 50.0, 50.0])

    async def one(ctx: Any, replicas: int, ns: argparse.Namespace) -> dict[str, Any]:
        return await _fake_one(next(rates))(ctx, replicas, ns)

    monkeypatch.setattr(scaling, "one", one)
    result = _part(tmp_path, "--replicas", "1,2,1,2")
    assert result["order"] == [1, 2, 1, 2]
    by_count = {r["replicas"]: r for r in result["results"]}
    assert [x["rps"] for x in by_count[1]["runs"]] == [40.0, 41.0, 50.0, 51.0]
    assert [x["rps"] for x in by_count[2]["runs"]] == [80.0, 81.0, 100.0, 101.0]
    assert result["scaling_ratio"] == round(90.5 / 45.5, 3)

    monkeypatch.setattr(scaling, "one", _fake_one(60.0))
    more = _part(tmp_path, "--replicas", "1", "--append")
    assert more["order"] == [1, 2, 1, 2, 1]
    assert len({r["replicas"]: r for r in more["results"]}[1]["runs"]) == 6


def test_a_call_cut_after_some_counts_keeps_their_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A device call's time limit stops the bench while a count is starting (2026-11-29:
    ``1,2,2,1`` measured 1 and 2, then SIGTERM, which ``main`` turns into ``sys.exit``): the
    report of the counts already measured is on disk."""
    measured = _fake_one(40.0)
    twos = 0

    async def cut(ctx: Any, replicas: int, ns: argparse.Namespace) -> dict[str, Any]:
        nonlocal twos
        twos += replicas == 2
        if twos == 2:
            raise SystemExit(143)
        return await measured(ctx, replicas, ns)

    monkeypatch.setattr(scaling, "one", cut)
    flags = ["--model", "tiny-model", "--serve-config", str(ROOT / "serve_config.cpu.yaml")]
    ns = scaling.parser().parse_args([*flags, "--replicas", "1,2,2,1", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        asyncio.run(scaling.main_async(ns))
    kept = json.loads((tmp_path / "scaling.json").read_text())
    assert kept["order"] == [1, 2]
    assert kept["scaling_ratio"] == round(80.5 / 40.5, 3)
    assert (tmp_path / "scaling.md").exists()
