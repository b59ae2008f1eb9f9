"""``bench.stream_interval`` on the CPU: the real engine behind the service, both values,
every stream answered; with ``stream_interval`` 4 a stream carries fewer events (the engine
sends every 4th token), which is where the replica's CPU saving comes from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.no_ray  # ./test.sh runs it beside the e2e tier


def test_stream_interval_cuts_the_events_of_a_stream(tiny_model_dir: Path, tmp_path: Path) -> None:
    cmd = [
        sys.executable, "-m", "bench.stream_interval", "--model", str(tiny_model_dir),
        "--values", "1,4", "--rounds", "1", "--users", "4", "--requests", "8",
        "--out", str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "stream_interval.json").read_text())
    every, fourth = (result["values"][v]["runs"][0] for v in ("1", "4"))
    assert every["requests"] == fourth["requests"] == 8
    assert fourth["events_per_request"] < every["events_per_request"] / 2
    assert fourth["cpu_ms_per_request"] > 0
    assert "| 4 |" in (tmp_path / "stream_interval.md").read_text()
