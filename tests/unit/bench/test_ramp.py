"""The autoscaling ramp's pure parts: the profile, the per-second timeline, the times to
scale, the probes' parsing, the users' loop (over a fake HTTP transport) and the reports."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.cpu_profile import ray_metrics_urls
from bench.ramp import RAMP_AUTOSCALING, assemble, autoscaling_config, parser, profile
from bench.ramp_load import Users, drive, fresh_bodies, loop_time
from bench.ramp_probe import (
    DEFAULT_DASHBOARD,
    IN_FLIGHT,
    RUNNING,
    RUNNING_MEAN,
    WAITING,
    WAITING_MEAN,
    dashboard_url,
    engine_queue,
    metric_sums,
)
from bench.ramp_profile import build_profile, duration, parse_holds, parse_ints, phases, users_at
from bench.ramp_report import write
from bench.ramp_timeline import (
    Answer,
    Probe,
    per_second,
    replica_path,
    replica_table,
    requests_summary,
    scale_down,
    scale_up,
)
from bench.systems import BenchContext, bench_app_config
from bench.workloads import make_workload
from serve_app.client import RetryPolicy, TranslationClient
from tests.conftest import ROOT

# --- the profile ---------------------------------------------------------------------------


def test_default_profile_climbs_holds_and_returns_in_320_s() -> None:
    ns = parser().parse_args(["--model", "m", "--out", "o"])
    stages = profile(ns)
    assert [s.users for s in stages] == [5, 20, 35, 50, 60, 45, 30, 15, 5]
    assert duration(stages) == 320
    names = ["start 5", "up 5->60", "hold 60", "down 60->5", "end 5"]
    assert [p[0] for p in phases(stages)] == names
    assert phases(stages)[2] == ("hold 60", 80.0, 200.0)
    assert users_at(stages, 0) == 5
    assert users_at(stages, 79.9) == 50
    assert users_at(stages, 80) == 60
    assert users_at(stages, 319.9) == 5
    assert users_at(stages, 320) == 0


def test_profile_with_several_peaks_and_exact_steps() -> None:
    stages = build_profile([2, 8, 4, 8], [1, 2, 3, 4], step_users=2, step_s=1)
    assert [(s.users, s.phase) for s in stages] == [
        (2, "start 2"), (4, "up 2->8"), (6, "up 2->8"), (8, "hold 8"), (6, "down 8->4"),
        (4, "hold 4"), (6, "up 4->8"), (8, "end 8"),
    ]  # fmt: skip
    assert duration(stages) == 1 + 2 + 2 + 1 + 3 + 1 + 4


def test_a_zero_hold_leaves_no_stage() -> None:
    stages = build_profile([5, 20], [0, 10], step_users=5, step_s=2)
    assert [s.users for s in stages] == [10, 15, 20]
    assert stages[0].start_s == 0


@pytest.mark.parametrize("text", ["", "5,x", "5,0,5", "-1"])
def test_bad_users_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--users"):
        parse_ints(text, "--users")


def test_holds_one_for_all_or_one_each() -> None:
    assert parse_holds("30", 3) == [30.0, 30.0, 30.0]
    assert parse_holds("1,2,3", 3) == [1.0, 2.0, 3.0]
    for bad in ("1,2", "a", "1,-2,3"):
        with pytest.raises(ValueError, match="--hold-s"):
            parse_holds(bad, 3)


def test_bad_steps_are_refused() -> None:
    with pytest.raises(ValueError, match="step"):
        build_profile([1, 5], [1, 1], step_users=0, step_s=1)


# --- the timeline --------------------------------------------------------------------------

STAGES = build_profile([2, 10, 2], [2, 4, 4], step_users=8, step_s=1)  # 2 users 0-2 s,
# 10 users 2-6 s, 2 users 6-10 s


def _answers() -> list[Answer]:
    out = [Answer(0.0, 0.5, 200, "a"), Answer(0.2, 0.9, 200, "a"), Answer(0.5, 1.5, 503)]
    out += [Answer(2.0, 3.0 + i / 10, 200, "a" if i % 2 else "b", 1 + i % 2) for i in range(6)]
    out += [Answer(3.5, 4.2, 200, "a"), Answer(3.6, 4.4, 200, "b")]  # both answer at 4 s
    out += [Answer(7.0, 7.5, 200, "a"), Answer(9.0, 12.0, None, attempts=10)]
    return out


def _probes() -> list[Probe]:
    replicas = [1, 1, 1, 1, 2, 2, 2, 2, 2, 1]
    return [
        Probe(t + 0.3, n, engine_waiting=float(t), engine_running=1.0, in_flight=2.0)
        for t, n in enumerate(replicas)
        if t != 6  # a second without a probe: the last one is carried
    ]


def test_per_second_rows() -> None:
    rows = per_second(_answers(), _probes(), STAGES, 10)
    assert len(rows) == 10
    assert [r["users"] for r in rows] == [2, 2, 10, 10, 10, 10, 2, 2, 2, 2]
    assert rows[0]["answers"] == 2
    assert rows[1]["failed"] == 1
    assert rows[3]["answers"] == 6
    assert rows[3]["replicas_answering"] == 2
    assert rows[3]["p95_s"] == pytest.approx(1.5)
    # The 5-s window: second 7 still sees second 3's answers; second 8 no longer does.
    assert rows[4]["p95_s"] == pytest.approx(1.5)
    assert rows[7]["p95_s"] == pytest.approx(1.5)
    assert rows[8]["p95_s"] == pytest.approx(0.8)
    assert rows[9]["p95_s"] == pytest.approx(0.5)
    assert rows[6]["replicas_running"] == 2  # carried from second 5
    assert rows[6]["engine_waiting"] == 5.0
    assert rows[9]["failed"] == 1  # answered after the end: counted in the last second
    assert [r["replicas_running"] for r in rows] == [1, 1, 1, 1, 2, 2, 2, 2, 2, 1]


def test_a_probe_is_not_carried_forever() -> None:
    rows = per_second([], [Probe(0.5, 1, 3.0)], STAGES, 10)
    assert [r["replicas_running"] for r in rows] == [1, 1, 1, 1, None, None, None, None, None, None]


def _row(t: int, users: int, running: int | None, answering: int) -> dict[str, Any]:
    return {"t_s": t, "users": users, "replicas_running": running, "replicas_answering": answering}


def test_scale_up_waits_for_running_and_answering() -> None:
    rows = [_row(0, 2, 1, 1), _row(1, 10, 1, 1), _row(2, 10, 2, 1), _row(3, 10, 2, 2)]
    assert scale_up(rows, target=4) == {"crossed_at_s": 1, "scaled_at_s": 3, "seconds": 2}
    assert scale_up(rows[:3], target=4)["seconds"] is None
    assert scale_up(rows, target=10) == {"crossed_at_s": None, "scaled_at_s": None, "seconds": None}


def test_scale_up_without_serve_counts_uses_the_answering_replicas() -> None:
    rows = [_row(0, 10, None, 1), _row(1, 10, None, 2)]
    assert scale_up(rows, target=4)["scaled_at_s"] == 1


def test_scale_down_from_the_last_fall_below_the_target() -> None:
    users = [2, 10, 10, 2, 10, 2, 2, 2, 2, 2]
    running = [1, 1, 2, 2, 2, 2, 2, 2, 1, 1]
    rows = [_row(t, u, n, n) for t, (u, n) in enumerate(zip(users, running, strict=True))]
    assert scale_down(rows, target=4, after_s=2) == {"fell_at_s": 5, "scaled_at_s": 8, "seconds": 3}
    assert scale_down(rows[:8], target=4, after_s=2)["seconds"] is None
    assert scale_down(rows, target=4, after_s=6)["fell_at_s"] is None
    assert replica_path(rows) == [1, 2, 1]


def test_replica_path_skips_unknown_seconds() -> None:
    rows = [_row(0, 1, 1, 1), _row(1, 1, None, 1), _row(2, 1, 2, 2), _row(3, 1, 2, 2)]
    assert replica_path(rows) == [1, 2]


def test_requests_summary_counts_the_lost() -> None:
    summary = requests_summary(_answers(), sent=14)
    assert summary["ok"] == 11
    assert summary["lost"] == 3  # a 503, a request never answered, one still out at the end
    assert summary["failed_by_status"] == {"503": 1, "no_answer": 1}
    assert summary["retried"] == 4
    assert summary["max_attempts"] == 10


def test_replica_table_splits_the_seconds_by_replica_count() -> None:
    rows = per_second(_answers(), _probes(), STAGES, 10)
    table = {r["replicas"]: r for r in replica_table(rows, _answers())}
    assert table[1]["seconds"] == 5
    assert table[2]["seconds"] == 5
    assert table[1]["answers"] == 8  # seconds 0-3 and 9
    assert table[2]["users"] == [2, 10]


def test_a_second_without_a_probe_or_an_answer_counts_no_replicas() -> None:
    """On CI's loaded cores a probe timed out in a second whose requests all ended in the
    next: the table had a row for 0 replicas (found 2026-12-07)."""
    rows = [_row(0, 2, 1, 1), _row(1, 2, None, 0), _row(2, 2, None, 1), _row(3, 2, 1, 1)]
    table = replica_table(rows, [Answer(0.0, 0.5, 200, "a"), Answer(1.5, 2.5, 200, "a")])
    assert [(r["replicas"], r["seconds"]) for r in table] == [(1, 3)]
    assert scale_down(rows, target=4, after_s=0)["fell_at_s"] is None


# --- the probes ----------------------------------------------------------------------------


def test_dashboard_url_from_the_serve_run_log() -> None:
    log = (
        "2026-11-24 INFO worker.py:2030 -- Started a local Ray instance. View the dashboard at "
        "\x1b[1m\x1b[32m127.0.0.1:8266 \x1b[39m\x1b[22m\n"
    )
    assert dashboard_url(log) == "http://127.0.0.1:8266"
    assert dashboard_url("View the dashboard at http://10.0.0.1:8265 ") == "http://10.0.0.1:8265"
    assert dashboard_url("no Ray here") == DEFAULT_DASHBOARD


def test_metric_sums_over_replicas() -> None:
    text = "\n".join(
        [
            "# HELP ray_vllm_num_requests_waiting Number of requests waiting.",
            "# TYPE ray_vllm_num_requests_waiting gauge",
            f'{WAITING}{{ReplicaId="a",model_name="bench"}} 3.0',
            f'{WAITING}{{ReplicaId="b",model_name="bench"}} 4.0',
            f"{RUNNING} 24",
            f'{IN_FLIGHT}{{ReplicaId="a"}} 1e1',
            'ray_vllm_num_requests_waiting_total{x="y"} 99',
        ]
    )
    assert metric_sums(text, (WAITING, RUNNING, IN_FLIGHT)) == {
        WAITING: 7.0,
        RUNNING: 24.0,
        IN_FLIGHT: 10.0,
    }
    assert metric_sums("", (WAITING,)) == {}


def test_engine_queue_prefers_the_step_means() -> None:
    vllm = {WAITING: 7.0, RUNNING: 18.0}
    assert engine_queue(vllm) == (7.0, 18.0)
    means = {**vllm, WAITING_MEAN: 1.5, RUNNING_MEAN: 23.5}
    assert engine_queue(means) == (1.5, 23.5)
    assert engine_queue({}) == (None, None)


def test_metrics_urls_from_the_ray_session(tmp_path: Path) -> None:
    (tmp_path / "metrics_export_port_abc").write_text("44839")
    (tmp_path / "metrics_export_port_def").write_text("\n")
    (tmp_path / "gcs_server_port_abc").write_text("1234")
    assert ray_metrics_urls(tmp_path) == ["http://127.0.0.1:44839/metrics"]


# --- the users -----------------------------------------------------------------------------


def test_fresh_bodies_never_repeat() -> None:
    items = make_workload("variable", 3, seed=1)
    bodies = fresh_bodies(items)
    texts = [next(bodies)["text"] for _ in range(9)]
    assert len(set(texts)) == 9
    assert texts[3] == f"1. {items[0].text}"


# On the loop's virtual clock (looptime): the profile's times are exact, not at the mercy of a
# busy machine (on the wall clock a CI run once ended this 0.7 s profile after 1.26 s).
@pytest.mark.looptime
async def test_users_follow_the_profile_and_retry_503s() -> None:
    seen: set[str] = set()
    busy = {"n": 0, "max": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        busy["n"] += 1
        busy["max"] = max(busy["max"], busy["n"])
        await asyncio.sleep(0.02)
        busy["n"] -= 1
        text = json.loads(request.content)["text"]
        if text not in seen and len(seen) % 5 == 0:  # every 5th text's first attempt: busy
            seen.add(text)
            return httpx.Response(503, headers={"retry-after": "0"})
        seen.add(text)
        return httpx.Response(200, json={"text": "x"}, headers={"x-replica": "r1"})

    stages = build_profile([1, 4, 1], [0.2, 0.3, 0.2], step_users=3, step_s=0.1)
    retry = RetryPolicy(max_attempts=3, backoff_s=0.01)
    transport = httpx.MockTransport(handler)
    async with TranslationClient("http://svc", retry=retry, transport=transport) as client:
        users = Users(client, fresh_bodies(make_workload("variable", 5)), loop_time())
        ended = await drive(users, stages, deadline=loop_time() + 10)
        await users.drain(5)
    assert ended == pytest.approx(duration(stages), abs=1e-6)
    assert busy["max"] == 4
    assert users.sent == len(users.answers) > 10
    assert all(a.ok and a.replica == "r1" for a in users.answers)
    assert any(a.attempts == 2 for a in users.answers)
    assert users.count == 0


@pytest.mark.looptime
async def test_drive_stops_at_the_deadline() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.01)
        return httpx.Response(200, json={})

    stages = build_profile([2], [30], step_users=1, step_s=1)
    transport = httpx.MockTransport(handler)
    async with TranslationClient("http://svc", transport=transport) as client:
        users = Users(client, fresh_bodies(make_workload("variable", 5)), loop_time())
        ended = await drive(users, stages, deadline=loop_time() + 0.2)
        await users.drain(5)
    assert ended == pytest.approx(0.2, abs=1e-6)


# --- the config and the report ------------------------------------------------------------


def test_autoscaling_is_production_s_with_the_ramp_s_bounds() -> None:
    config = autoscaling_config(ROOT / "serve_config.yaml", {"upscale_delay_s": 5})
    assert config["min_replicas"] == 1
    assert config["max_replicas"] == 2
    assert config["target_ongoing_requests"] == 20  # the production target, kept
    assert config["downscale_delay_s"] == RAMP_AUTOSCALING["downscale_delay_s"]
    assert config["upscale_delay_s"] == 5
    assert config["policy"]["policy_function"].endswith(":queue_depth_policy")


def test_report_files(tmp_path: Path) -> None:
    ns = parser().parse_args(
        ["--model", "m", "--out", str(tmp_path), "--users", "2,10,2", "--step-users", "8",
         "--step-s", "1", "--hold-s", "2,4,4"]
    )  # fmt: skip
    app = bench_app_config(ROOT / "serve_config.cpu.yaml", "m")
    auto = {"target_ongoing_requests": 4}
    ctx = BenchContext(app, ROOT / "serve_config.cpu.yaml", tmp_path, autoscaling=auto)
    result = assemble(ns, ctx, profile(ns), (_answers(), _probes(), 14, 10.0), 42.0)
    write(tmp_path, result)
    saved = json.loads((tmp_path / "ramp.json").read_text())
    assert saved["summary"]["scale_up"] == {"crossed_at_s": 2, "scaled_at_s": 4, "seconds": 2}
    assert saved["summary"]["requests"]["lost"] == 3
    assert len(saved["timeline"]) == 12  # the last answer came at 12 s
    md = (tmp_path / "ramp.md").read_text()
    assert "| **2 s** |" in md
    assert "1 -> 2 -> 1" in md
    assert "| hold 10 |" in md
    assert (tmp_path / "ramp.png").stat().st_size > 10_000
