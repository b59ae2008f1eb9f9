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
    assert (tmp_path / "results.png").exists()
    row = (tmp_path / "results.md").read_text().splitlines()[2]
    assert row.startswith("| native | variable | 20 | 20 |"), row
