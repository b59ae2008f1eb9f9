"""Autoscaling under a ramp of users: does queue depth take 1 replica to 2 and back, in time,
losing nothing?

    python -m bench.ramp --model MODEL_DIR --load-format dummy --out DIR \\
        [--users 5,60,5] [--step-users 15] [--step-s 20] [--hold-s 20,120,60] \\
        [--autoscaling '{"downscale_delay_s": 30}'] [--budget-s 560]

Why: the other benchmarks hold the replica count fixed; users meet the autoscaler. This one
starts this project with ``serve run`` (the bench's ``started``: the serve config's
production engine settings and deployment) autoscaled by the queue-depth policy
(serve_app/serving/autoscaling.py) between 1 and 2 replicas (one per GPU), and offers
closed-loop users of the ``variable`` workload stepped up from the first waypoint to the
peak and back (``bench/ramp_profile.py``), through the project's retrying client (a request
is lost only if it never got a 200). Once a second it records the users offered, answers,
p95, Ray Serve's RUNNING replicas and the engines' waiting requests (``bench/ramp_probe.py``,
``bench/ramp_timeline.py``), and writes ramp.json, ramp.md and ramp.png (``ramp_report.py``).

The autoscaling config is the serve config's, with min 1 / initial 1 / max 2 replicas and a
downscale delay of 30 s instead of production's 300 s (``RAMP_AUTOSCALING``), so that the
scale-down is seen within one 10-minute device call; ``--autoscaling`` overrides any key.
Ray exports metrics every second here (``RAY_metrics_report_interval_ms``; 10 s by default)
so the engine-waiting column is fresh; nothing else differs from production.

Default timing on the GPU: the first replica starts in ~2 min, the profile (5 users 20 s;
20, 35, 50 for 20 s each; 60 for 120 s; 45, 30, 15 for 20 s each; 5 for 60 s) lasts 320 s;
``--budget-s`` (seconds since this process started) cuts the load short, if need be, so
that the results are written before a 10-minute call ends.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

from bench.cpu_profile import ray_metrics_urls
from bench.journey import context, machine
from bench.loadgen import run
from bench.ramp_load import Users, drive, fresh_bodies, loop_time
from bench.ramp_probe import dashboard_url, record
from bench.ramp_profile import Stage, build_profile, parse_holds, parse_ints, phases
from bench.ramp_report import write
from bench.ramp_timeline import (
    P95_WINDOW_S,
    Answer,
    Probe,
    per_second,
    phase_table,
    replica_path,
    replica_table,
    requests_summary,
    scale_down,
    scale_up,
)
from bench.systems import BenchContext, describe, started
from bench.targets import NativeTarget
from bench.workloads import make_workload, tokenizer_counter
from serve_app.client import RetryPolicy, TranslationClient
from serve_app.tools.launcher import load_serve_config, merge_config

RAMP_AUTOSCALING: dict[str, Any] = {
    "min_replicas": 1,
    "initial_replicas": 1,
    "max_replicas": 2,  # one per GPU of the two-GPU machine
    "downscale_delay_s": 30,  # production: 300 s, longer than one device call
    "policy": {"policy_function": "serve_app.serving.autoscaling:queue_depth_policy"},
}
RAY_DEFAULT_TARGET = 2.0  # Ray Serve's target_ongoing_requests when a config sets none
BENCH_ENV = {"RAY_metrics_report_interval_ms": "1000"}
RETRY = RetryPolicy(max_attempts=10, backoff_s=0.5, max_backoff_s=4)
DRAIN_S = 60.0  # the last requests' time to finish once the users stop
RESERVE_S = 30.0  # kept from --budget-s for the drain's start, the files and the stop


def autoscaling_config(serve_config: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """The serve config's autoscaling_config with the ramp's bounds and ``overrides``."""
    base = load_serve_config(serve_config)["applications"][0]["deployments"][0]
    merged = merge_config(base.get("autoscaling_config") or {}, RAMP_AUTOSCALING)
    return merge_config(merged, overrides)


def profile(ns: argparse.Namespace) -> list[Stage]:
    waypoints = parse_ints(ns.users, "--users")
    holds = parse_holds(ns.hold_s, len(waypoints))
    return build_profile(waypoints, holds, ns.step_users, ns.step_s)


async def ramp(
    url: str, ctx: BenchContext, stages: list[Stage], items: list[Any], deadline: float
) -> tuple[list[Answer], list[Probe], int, float]:
    """The users and the probes over the profile; answers, probes, requests sent, seconds."""
    log = (ctx.workdir / "ray_serve.log").read_text(errors="replace")
    probes: list[Probe] = []
    async with TranslationClient(url, retry=RETRY, timeout_s=300) as client:
        users = Users(client, fresh_bodies(items), loop_time())
        probing = record(dashboard_url(log), ray_metrics_urls(), users.start, probes)
        prober = asyncio.create_task(probing)
        try:
            ended = await drive(users, stages, deadline)
            await users.drain(DRAIN_S)
        finally:
            prober.cancel()
    return users.answers, probes, users.sent, ended


def assemble(
    ns: argparse.Namespace,
    ctx: BenchContext,
    stages: list[Stage],
    measured: tuple[list[Answer], list[Probe], int, float],
    start_s: float,
) -> dict[str, Any]:
    answers, probes, sent, ended = measured
    auto = ctx.autoscaling or {}
    target = float(auto.get("target_ongoing_requests", RAY_DEFAULT_TARGET))
    seconds = max([ended, *(a.done_s for a in answers)])
    rows = per_second(answers, probes, stages, seconds)
    up = scale_up(rows, target)
    full = stages[-1].end_s
    config = {
        "machine": machine(),
        "date": dt.date.today().isoformat(),
        "settings": describe(ctx),
        "autoscaling": auto,
        "target_ongoing_requests": target,
        "profile": {"users": ns.users, "step_users": ns.step_users, "step_s": ns.step_s,
                    "hold_s": ns.hold_s, "stages": [s.__dict__ for s in stages]},
        "env": BENCH_ENV,
        "p95_window_s": P95_WINDOW_S,
        "retry": {"max_attempts": RETRY.max_attempts, "max_backoff_s": RETRY.max_backoff_s},
    }  # fmt: skip
    summary = {
        "start_s": round(start_s, 1),
        "ramp_s": round(ended, 1),
        "cut_short": ended < full - 1,
        "requests": requests_summary(answers, sent),
        "scale_up": up,
        "scale_down": scale_down(rows, target, up["scaled_at_s"] or 0),
        "replica_path": replica_path(rows),
        "phases": phase_table(rows, answers, phases(stages)),
        "by_replicas": replica_table(rows, answers),
    }
    return {"config": config, "summary": summary, "timeline": rows}


async def main_async(ns: argparse.Namespace, began: float) -> dict[str, Any]:
    ns.replicas, ns.ray_serve_llm_pythonpath, ns.stream = 1, None, False
    stages = profile(ns)
    ctx = context(ns)
    ctx.autoscaling = autoscaling_config(ns.serve_config, json.loads(ns.autoscaling))
    ctx.env.update(BENCH_ENV)
    count = tokenizer_counter(ns.model)
    items = make_workload("variable", ns.pool, seed=ns.seed, count_tokens=count)
    warmup = make_workload("variable", ns.warmup, seed=ns.seed + 1000, count_tokens=count)
    async with started(ctx, "ray_serve", warmup) as target:
        start_s = time.monotonic() - began
        print(f"ramp: first replica answering after {start_s:.0f} s", flush=True)
        if warmup:
            await run(target, warmup, concurrency=stages[0].users)
        assert isinstance(target, NativeTarget)  # `ray_serve` is this project's own API
        url = str(target.client.http.base_url)
        deadline = began + ns.budget_s - RESERVE_S - DRAIN_S / 2  # loop_time is monotonic
        measured = await ramp(url, ctx, stages, items, deadline)
        result = assemble(ns, ctx, stages, measured, start_s)
        write(ns.out, result)  # before the stop: a call cut at its limit keeps the files
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.ramp", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--serve-config", type=Path, default=Path("serve_config.yaml").resolve())
    p.add_argument("--load-format")
    p.add_argument("--engine", default="{}", help="JSON engine overrides")
    p.add_argument("--autoscaling", default="{}", help="JSON autoscaling_config overrides")
    p.add_argument("--users", default="5,60,5", help="waypoints: users at start, peak(s), end")
    p.add_argument("--step-users", type=int, default=15, help="users added/removed per step")
    p.add_argument("--step-s", type=float, default=20, help="seconds per step between waypoints")
    p.add_argument("--hold-s", default="20,120,60", help="seconds held at each waypoint")
    p.add_argument("--pool", type=int, default=1000, help="distinct texts (cycled, made fresh)")
    p.add_argument("--warmup", type=int, default=20, help="requests before the ramp")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-s", type=float, default=560, help="the whole run's time limit")
    p.add_argument("--out", type=Path, required=True)
    return p


def main() -> None:
    began = time.monotonic()
    ns = parser().parse_args()
    result = asyncio.run(main_async(ns, began))
    print((ns.out / "ramp.md").read_text())
    if result["summary"]["requests"]["lost"]:
        print(f"ramp: {result['summary']['requests']['lost']} requests lost", flush=True)


if __name__ == "__main__":
    main()
