"""The load generator's CLI against the running service, through Ray's proxy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.mark.parametrize("mode", [["--rate", "6"], ["--concurrency", "5"]])
def test_loadgen_cli(served: str, tiny_model_dir: Path, tmp_path: Path, mode: list[str]) -> None:
    cmd = [
        sys.executable, "-m", "bench.loadgen", "--url", served, "--tokenizer", str(tiny_model_dir),
        "--requests", "20", "--retries", "3", "--no-progress", "--out", str(tmp_path), *mode,
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "results.json").read_text())
    assert (result["requests"], result["ok"]) == (20, 20), result["errors_by_status"]
    assert result["mode"] == ("open" if mode[0] == "--rate" else "closed")
    assert result["output_tokens"] > 0
    assert sum(row["ok"] for row in result["timeline"]) == 20
    # Every answer names its replica (X-Replica), as bench.scaling's split by replica needs.
    assert sum(v["ok"] for v in result["by_replica"].values()) == 20, result["by_replica"]
    assert (tmp_path / "results.png").exists()
    row = (tmp_path / "results.md").read_text().splitlines()[2]
    assert row.startswith("| native | variable | 20 | 20 |"), row


def test_loadgen_streams_from_the_native_api(
    served: str, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """`--stream` against this project: /translate/stream's events, time to first text."""
    cmd = [
        sys.executable, "-m", "bench.loadgen", "--url", served, "--tokenizer", str(tiny_model_dir),
        "--requests", "12", "--concurrency", "4", "--stream", "--no-progress",
        "--out", str(tmp_path),
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "results.json").read_text())
    assert (result["requests"], result["ok"]) == (12, 12), result["errors_by_status"]
    assert 0 < result["ttft_p50_s"] <= result["ttft_p95_s"] <= result["p95_s"]
    assert result["output_tokens"] > 0  # from the `done` event's usage
