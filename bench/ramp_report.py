"""The autoscaling ramp's result files: ramp.json (everything), ramp.md (the summary tables)
and ramp.png (users and replicas, answers per second, p95 and the engines' waiting requests
against time, one panel each, as bench/report.py plots)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.report import _pyplot, markdown_table

PHASE_COLUMNS = [
    ("phase", "phase"), ("seconds", "seconds"), ("answers", "answers"), ("failed", "failed"),
    ("rps", "RPS"), ("p50_s", "p50 s"), ("p95_s", "p95 s"), ("replicas", "replicas"),
]  # fmt: skip
REPLICA_COLUMNS = [
    ("replicas", "replicas"), ("users", "users (min, max)"), ("seconds", "seconds"),
    ("answers", "answers"), ("rps", "RPS"), ("p95_s", "p95 s"),
]  # fmt: skip


def _s(value: Any) -> str:
    return "not reached" if value is None else f"{value} s"


def markdown(result: dict[str, Any]) -> str:
    cfg, summary = result["config"], result["summary"]
    up, down, req = summary["scale_up"], summary["scale_down"], summary["requests"]
    auto = cfg["autoscaling"]
    cut = " (cut short by the time budget)" if summary["cut_short"] else ""
    lines = [
        f"# Autoscaling ramp on {cfg['machine']} ({cfg['date']})",
        "",
        f"Users {cfg['profile']['users']} (step {cfg['profile']['step_users']} users every "
        f"{cfg['profile']['step_s']} s, holds {cfg['profile']['hold_s']} s), closed loop, "
        f"`variable` texts; replicas {auto.get('min_replicas')}-{auto.get('max_replicas')}, "
        f"queue-depth policy target {cfg['target_ongoing_requests']} per replica, upscale delay "
        f"{auto.get('upscale_delay_s')} s, downscale delay {auto.get('downscale_delay_s')} s. "
        f"First replica ready {summary['start_s']} s after `serve run`; ramp "
        f"{summary['ramp_s']} s{cut}.",
        "",
        "| measure | value |",
        "|---|---|",
        f"| time to scale up (users > {cfg['target_ongoing_requests']} at t={up['crossed_at_s']} s"
        f" -> 2 replicas RUNNING and answering at t={up['scaled_at_s']} s) "
        f"| **{_s(up['seconds'])}** |",
        f"| time to scale down (users <= target at t={down['fell_at_s']} s -> 1 replica RUNNING "
        f"at t={down['scaled_at_s']} s) | **{_s(down['seconds'])}** |",
        f"| replicas (Ray Serve, RUNNING) | {' -> '.join(map(str, summary['replica_path']))} |",
        f"| requests sent / answered 200 / **lost** | {req['sent']} / {req['ok']} / "
        f"**{req['lost']}** |",
        f"| requests retried (503 + Retry-After...) | {req['retried']} "
        f"(max attempts {req['max_attempts']}) |",
        "",
        "Per phase of the profile (p95 over the answers completed in the phase):",
        "",
        markdown_table(summary["phases"], PHASE_COLUMNS),
        "Per replica count (Ray Serve's, per second):",
        "",
        markdown_table(summary["by_replicas"], REPLICA_COLUMNS),
        f"Timeline (ramp.json `timeline`, ramp.png): one row a second; `p95_s` over the answers "
        f"of the trailing {cfg['p95_window_s']} s; `engine_waiting` is vLLM's waiting requests "
        "summed over replicas, as Ray's Prometheus endpoint last exported them.",
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    rows = result["timeline"]
    t = [r["t_s"] for r in rows]
    fig, axes = plt.subplots(4, 1, sharex=True, figsize=(9, 10))
    users, rps, p95, queue = axes
    users.step(t, [r["users"] for r in rows], where="post", label="users offered")
    users.set_ylabel("users")
    twin = users.twinx()
    running = [r["replicas_running"] for r in rows]
    twin.step(t, [float("nan") if n is None else n for n in running], where="post", color="C2")
    twin.set_ylabel("replicas RUNNING", color="C2")
    twin.set_yticks(range(0, 1 + max((n or 0 for n in running), default=2)))
    rps.plot(t, [r["answers"] for r in rows], label="answers / s")
    rps.set_ylabel("answers / s")
    p95.plot(t, [r["p95_s"] for r in rows], color="C1")
    p95.set_ylabel(f"p95 s ({result['config']['p95_window_s']} s window)")
    for key, label in (("engine_waiting", "vLLM waiting"), ("in_flight", "admitted in flight")):
        values = [float("nan") if r[key] is None else r[key] for r in rows]
        queue.plot(t, values, label=label)
    queue.set_ylabel("requests (all replicas)")
    queue.legend(loc="upper right")
    queue.set_xlabel("seconds since the ramp began")
    summary = result["summary"]
    for ax in axes:
        for key in ("scale_up", "scale_down"):
            if summary[key]["scaled_at_s"] is not None:
                ax.axvline(summary[key]["scaled_at_s"], color="grey", linestyle=":")
    fig.suptitle(f"Autoscaling ramp on {result['config']['machine']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(out: Path, result: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "ramp.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "ramp.md").write_text(markdown(result))
    plot(result, out / "ramp.png")
