"""The autoscaling ramp (bench/ramp.py) on the CPU, through the real `serve run` (~3 minutes).

The engine is the bench's instant engine (bench/pathcost/instant.py) paced like a step loop
(``PATHCOST_STEP_MS``: a request takes as many 20 ms steps as it has output tokens), so a
second replica starts in seconds instead of a vLLM engine's minutes; autoscaling with the real
engine is proven by tests/e2e/test_autoscaling.py. A small ramp (2 -> 12 -> 2 users, the
policy's target 4 per replica) must take the deployment 1 -> 2 -> 1 replicas, lose no
request, and write the timeline and the three result files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.pathcost.instant import write_config
from bench.ramp_profile import build_profile, parse_holds, parse_ints
from tests.conftest import ROOT

USERS, STEP_USERS, STEP_S, HOLD_S = "2,12,2", 5, 3, "4,40,30"
AUTOSCALING = {
    "target_ongoing_requests": 4,
    "upscale_delay_s": 2,
    "downscale_delay_s": 8,
    "look_back_period_s": 4,
}
# Proxies and replicas push their queues every second (Ray's default: 10 s), as in the e2e test.
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "1",
    "RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "1",
}
COLUMNS = {
    "t_s", "users", "answers", "failed", "p95_s", "replicas_running", "replicas_answering",
    "engine_waiting", "engine_running", "in_flight",
}  # fmt: skip


def _instant_config(folder: Path) -> Path:
    """The instant engine's serve config, its requests paced at 20 ms a token."""
    path = write_config(folder / "serve_config.instant.yaml")
    config = yaml.safe_load(path.read_text())
    env = config["applications"][0].setdefault("runtime_env", {}).setdefault("env_vars", {})
    env["PATHCOST_STEP_MS"] = "20"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def ramp(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("ramp")
    config, out = _instant_config(folder), folder / "out"
    cmd = [
        sys.executable, "-m", "bench.ramp", "--model", str(folder / "tiny-model"),
        "--serve-config", str(config), "--users", USERS, "--step-users", str(STEP_USERS),
        "--step-s", str(STEP_S), "--hold-s", HOLD_S, "--autoscaling", json.dumps(AUTOSCALING),
        "--warmup", "4", "--pool", "200", "--budget-s", "400", "--out", str(out),
    ]  # fmt: skip
    done = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    result: dict[str, Any] = json.loads((out / "ramp.json").read_text())
    result["_out"] = out
    return result


def test_writes_the_three_files(ramp: dict[str, Any]) -> None:
    out = ramp["_out"]
    for name in ("ramp.json", "ramp.md", "ramp.png"):
        assert (out / name).stat().st_size > 0, name
    md = (out / "ramp.md").read_text()
    assert "time to scale up" in md
    assert "| up 2->12 |" in md


def test_replicas_go_one_two_one_and_nothing_is_lost(ramp: dict[str, Any]) -> None:
    summary = ramp["summary"]
    assert summary["replica_path"] == [1, 2, 1], ramp["timeline"]
    assert summary["requests"]["sent"] > 50
    assert summary["requests"]["lost"] == 0, summary["requests"]
    up, down = summary["scale_up"], summary["scale_down"]
    assert up["crossed_at_s"] == 4  # the first step above the target (7 users > 4)
    assert 0 < up["seconds"] < 40, up
    # The policy asks for 1 replica once the users fall; Ray waits the downscale delay first.
    assert AUTOSCALING["downscale_delay_s"] - 1 <= down["seconds"] < 40, down
    assert not summary["cut_short"]


def test_timeline_has_its_columns_and_plausible_values(ramp: dict[str, Any]) -> None:
    rows = ramp["timeline"]
    waypoints = parse_ints(USERS, "users")
    stages = build_profile(waypoints, parse_holds(HOLD_S, 3), STEP_USERS, STEP_S)
    assert all(set(r) == COLUMNS for r in rows)
    assert [r["t_s"] for r in rows] == list(range(len(rows)))
    assert len(rows) >= stages[-1].end_s
    assert [r["users"] for r in rows[: int(stages[-1].end_s)]] == [
        s.users for s in stages for _ in range(int(s.end_s - s.start_s))
    ]
    assert sum(r["answers"] for r in rows) == ramp["summary"]["requests"]["ok"]
    assert all(r["p95_s"] > 0 for r in rows if r["answers"])
    running = [r["replicas_running"] for r in rows]
    assert sum(n is not None for n in running) >= 0.8 * len(rows)  # Serve's count, each second
    assert {n for n in running if n is not None} == {1, 2}
    assert all(r["replicas_answering"] <= 2 for r in rows)
    # The instant engine has no vLLM: no waiting requests to report, none made up; the
    # replicas' own gauge of admitted engine requests comes through Ray's Prometheus endpoint.
    assert all(r["engine_waiting"] is None for r in rows)
    assert max(r["in_flight"] or 0 for r in rows) > 0


def test_more_users_more_answers(ramp: dict[str, Any]) -> None:
    phases = {p["phase"]: p for p in ramp["summary"]["phases"]}
    assert list(phases) == ["start 2", "up 2->12", "hold 12", "down 12->2", "end 2"]
    assert phases["hold 12"]["rps"] > 2 * phases["start 2"]["rps"]
    by_replicas = {r["replicas"]: r for r in ramp["summary"]["by_replicas"]}
    assert set(by_replicas) == {1, 2}
