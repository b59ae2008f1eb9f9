"""bench.h2h_ratios: this project over the peer in either start order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import h2h_ratios


def _side(rps: float, p95: float, ttft: float | None = None) -> dict[str, Any]:
    return {"rps": rps, "p95_s": p95, "ttft_p50_s": ttft, "ttft_p95_s": ttft and ttft * 3,
            "halves_rps": [rps - 1, rps + 1]}  # fmt: skip


def _journey(systems: list[str], rounds: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict:
    per_round = [dict(zip(systems, pair, strict=True)) for pair in rounds]
    return {"machine": "GPU", "head_to_head": {"systems": systems, "design": "abba",
            "requests_per_run": 100, "rounds": per_round}}  # fmt: skip


def _write(root: Path, name: str, journey: dict[str, Any]) -> Path:
    (root / name).mkdir()
    (root / name / "journey.json").write_text(json.dumps(journey))
    return root / name


def test_both_orders_read_as_this_project_over_the_peer(tmp_path: Path) -> None:
    ours_first = _write(tmp_path, "ours-first", _journey(
        ["ray_serve", "vllm_serve"],
        [(_side(55, 0.8), _side(50, 1.0)), (_side(44, 1.0), _side(55, 0.8))],
    ))  # fmt: skip
    peer_first = _write(tmp_path, "vllm-first", _journey(
        ["vllm_serve", "ray_serve"],
        [(_side(50, 1.0, 0.04), _side(51, 0.9, 0.02))],
    ))  # fmt: skip
    result = h2h_ratios.collect([ours_first, peer_first])
    first = result["runs"]["ours-first"]
    assert [r["rps_ratio"] for r in first["rounds"]] == [1.1, 0.8]
    assert [r["p95_ratio"] for r in first["rounds"]] == [0.8, 1.25]
    assert first["medians"]["rps_ratio"] == {"median": 0.95, "min": 0.8, "max": 1.1, "n": 2}
    (row,) = result["runs"]["vllm-first"]["rounds"]
    assert row["peer_rps"] == 50
    assert row["ours_rps"] == 51
    assert row["rps_ratio"] == 1.02
    assert row["ours_ttft_p50_ms"] == 20.0
    assert row["ttft_p50_ratio"] == 0.5
    assert row["ours_halves_rps"] == [50, 52]
    assert "ttft_p50_ratio" not in first["rounds"][0]  # no TTFT in a non-streaming run
    assert result["all_rounds"]["rps_ratio"]["n"] == 3
    assert result["all_rounds"]["rps_ratio"]["median"] == 1.02
    table = h2h_ratios.markdown(result)
    assert "| vllm-first | 1 | 51 | 50 | 1.02 | 0.9 | 20.0 / 40.0 |" in table
    assert "| all | 3 | 1.02 (0.8-1.1) |" in table
    # Each start order's rounds pooled over its calls.
    assert result["by_order"]["ours_first"]["rps_ratio"]["n"] == 2
    assert result["by_order"]["peer_first"]["ttft_p50_ratio"]["median"] == 0.5
    assert "| ours first | 2 | 0.95 (0.8-1.1) |" in table
    assert "| peer first | 1 | 1.02 (1.02-1.02) |" in table


def test_calls_of_two_days_with_one_folder_name_are_told_apart(tmp_path: Path) -> None:
    runs = []
    for day in ("day1", "day2"):
        (tmp_path / day).mkdir()
        runs.append(_write(tmp_path / day, "s-ours", _journey(
            ["ray_serve", "vllm_serve"], [(_side(55, 0.8), _side(50, 1.0))]
        )))  # fmt: skip
    result = h2h_ratios.collect(runs)
    assert set(result["runs"]) == {"day1/s-ours", "day2/s-ours"}
    assert result["by_order"]["ours_first"]["rps_ratio"]["n"] == 2
    assert "peer_first" not in result["by_order"]


def test_a_run_without_this_project_is_refused(tmp_path: Path) -> None:
    control = _write(tmp_path, "control", _journey(
        ["vllm_serve", "vllm_serve@2"], [(_side(50, 1.0), _side(50, 1.0))]
    ))  # fmt: skip
    with pytest.raises(ValueError, match="ray_serve"):
        h2h_ratios.collect([control])


def test_a_control_run_reads_the_first_server_over_its_twin(tmp_path: Path) -> None:
    control = _write(tmp_path, "control", _journey(
        ["vllm_serve", "vllm_serve@2"], [(_side(50, 1.0, 0.036), _side(40, 1.0, 0.040))]
    ))  # fmt: skip
    result = h2h_ratios.collect([control], ours="vllm_serve")
    run = result["runs"]["control"]
    assert (run["ours"], run["peer"]) == ("vllm_serve", "vllm_serve@2")
    assert run["rounds"][0]["rps_ratio"] == 1.25
    assert run["rounds"][0]["ttft_p50_ratio"] == 0.9


def test_the_command_writes_ratios_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    run = _write(tmp_path, "r", _journey(
        ["ray_serve", "vllm_serve"], [(_side(60, 0.5), _side(50, 0.5))]
    ))  # fmt: skip
    monkeypatch.setattr("sys.argv", ["h2h_ratios", str(tmp_path / "out"), str(run)])
    h2h_ratios.main()
    saved = json.loads((tmp_path / "out" / "ratios.json").read_text())
    assert saved["runs"]["r"]["rounds"][0]["rps_ratio"] == 1.2
    assert (tmp_path / "out" / "ratios.png").stat().st_size > 10_000
    assert "| r | 1 | 60 | 50 | 1.2 | 1.0 |" in capsys.readouterr().out
