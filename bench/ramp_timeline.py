"""The autoscaling ramp's timeline and summary, from what the load and the probes recorded.

Pure functions over two streams: every request's final ``Answer`` (after the client's
retries) and one ``Probe`` of the service a second (Ray Serve's count of RUNNING replicas,
the engines' waiting requests). ``per_second`` makes one row per second of the ramp;
``scale_up`` and ``scale_down`` read the times to scale from those rows; ``phase_table`` and
``replica_table`` summarise them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bench.loadgen import percentile
from bench.ramp_profile import Stage, users_at

# The latency column is the p95 of the answers completed in the trailing window, not in the
# second alone: at 5 users a second holds too few answers for a 95th percentile.
P95_WINDOW_S = 5


@dataclass(frozen=True)
class Answer:
    """One request as the user saw it after retries; times in seconds since the ramp began."""

    sent_s: float
    done_s: float
    status: int | None  # None: no HTTP answer
    replica: str | None = None  # X-Replica of the answer
    attempts: int = 1

    @property
    def ok(self) -> bool:
        return self.status == 200

    @property
    def latency_s(self) -> float:
        return self.done_s - self.sent_s


@dataclass(frozen=True)
class Probe:
    """The service once, at ``t_s``: None where the source did not answer."""

    t_s: float
    replicas_running: int | None = None  # Ray Serve's RUNNING replicas of the deployment
    engine_waiting: float | None = None  # vLLM's waiting requests, summed over replicas
    engine_running: float | None = None  # vLLM's running requests, summed over replicas
    in_flight: float | None = None  # engine requests the replicas admitted (project gauge)


def _round(x: float | None, digits: int = 3) -> float | None:
    return None if x is None else round(x, digits)


def _bucket(answers: Sequence[Answer], seconds: int) -> list[list[Answer]]:
    """Answers by the second they completed in (the last second takes any later)."""
    out: list[list[Answer]] = [[] for _ in range(seconds)]
    for a in answers:
        out[min(max(int(a.done_s), 0), seconds - 1)].append(a)
    return out


# A second without a probe (the dashboard was slow) shows the last one up to this old.
PROBE_CARRY_S = 3


def _probe_by_second(probes: Sequence[Probe], seconds: int) -> list[Probe | None]:
    """The last probe taken in each second, else the last before it (up to PROBE_CARRY_S
    seconds old), else None."""
    out: list[Probe | None] = [None] * seconds
    for p in sorted(probes, key=lambda p: p.t_s):
        if 0 <= p.t_s < seconds:
            out[int(p.t_s)] = p
    last: Probe | None = None
    for t in range(seconds):
        if out[t] is not None:
            last = out[t]
        elif last is not None and t - last.t_s <= PROBE_CARRY_S:
            out[t] = last
    return out


def per_second(
    answers: Sequence[Answer],
    probes: Sequence[Probe],
    stages: list[Stage],
    duration_s: float,
    window_s: int = P95_WINDOW_S,
) -> list[dict[str, Any]]:
    """One row per second ``[t, t+1)`` of the ramp: users offered at ``t``, answers (200s)
    and failures completed in it, the trailing-window p95, the distinct replicas that
    answered in it, and the second's last probe."""
    seconds = max(1, math.ceil(duration_s))
    done = _bucket(answers, seconds)
    probe_at = _probe_by_second(probes, seconds)
    rows = []
    for t in range(seconds):
        ok = [a for a in done[t] if a.ok]
        recent = [a.latency_s for s in done[max(0, t - window_s + 1) : t + 1] for a in s if a.ok]
        probe = probe_at[t]
        rows.append(
            {
                "t_s": t,
                "users": users_at(stages, t),
                "answers": len(ok),
                "failed": len(done[t]) - len(ok),
                "p95_s": _round(percentile(recent, 95)),
                "replicas_running": probe.replicas_running if probe else None,
                "replicas_answering": len({a.replica for a in ok if a.replica}),
                "engine_waiting": _round(probe.engine_waiting, 1) if probe else None,
                "engine_running": _round(probe.engine_running, 1) if probe else None,
                "in_flight": _round(probe.in_flight, 1) if probe else None,
            }
        )
    return rows


def _replicas(row: dict[str, Any]) -> int | None:
    """Ray Serve's count where the probe answered, else the replicas seen answering, else
    None: a second with neither is not known. It read 0 (on two loaded cores, a second whose
    probe timed out and whose requests all ended in the next), and a replica table had a
    row for 0 replicas that never were."""
    running = row["replicas_running"]
    if running is not None:
        return int(running)
    return int(row["replicas_answering"]) or None


def scale_up(rows: list[dict[str, Any]], target: float) -> dict[str, Any]:
    """From the first second offering more users than one replica's policy target holds to
    the first second with 2 replicas RUNNING (Ray Serve) that both answered."""
    cross = next((r["t_s"] for r in rows if r["users"] > target), None)
    if cross is None:
        return {"crossed_at_s": None, "scaled_at_s": None, "seconds": None}
    at = next(
        (
            r["t_s"]
            for r in rows
            if r["t_s"] >= cross and (_replicas(r) or 0) >= 2 and r["replicas_answering"] >= 2
        ),
        None,
    )
    return {"crossed_at_s": cross, "scaled_at_s": at, "seconds": None if at is None else at - cross}


def scale_down(rows: list[dict[str, Any]], target: float, after_s: float) -> dict[str, Any]:
    """From the last time the users offered fell to one replica's target or below (after
    ``after_s``, the scale-up) to the first second with 1 replica RUNNING again."""
    fall = None
    for before, row in itertools.pairwise(rows):
        if row["t_s"] > after_s and before["users"] > target >= row["users"]:
            fall = row["t_s"]
    if fall is None:
        return {"fell_at_s": None, "scaled_at_s": None, "seconds": None}
    at = next((r["t_s"] for r in rows if r["t_s"] >= fall and _replicas(r) == 1), None)
    return {"fell_at_s": fall, "scaled_at_s": at, "seconds": None if at is None else at - fall}


def replica_path(rows: list[dict[str, Any]]) -> list[int]:
    """The replica counts Ray Serve reported, consecutive repeats dropped (e.g. [1, 2, 1])."""
    path: list[int] = []
    for row in rows:
        n = row["replicas_running"]
        if n is not None and (not path or path[-1] != n):
            path.append(n)
    return path


def _span_stats(
    rows: list[dict[str, Any]], answers: Sequence[Answer], spans: list[tuple[float, float]]
) -> dict[str, Any]:
    seconds = sum(end - start for start, end in spans)
    inside = [a for a in answers if any(s <= a.done_s < e for s, e in spans)]
    ok = [a.latency_s for a in inside if a.ok]
    picked = [r for r in rows if any(s <= r["t_s"] < e for s, e in spans)]
    replicas = [n for r in picked if (n := _replicas(r)) is not None]
    return {
        "seconds": round(seconds, 1),
        "answers": len(ok),
        "failed": len(inside) - len(ok),
        "rps": round(len(ok) / seconds, 2) if seconds else None,
        "p50_s": _round(percentile(ok, 50)),
        "p95_s": _round(percentile(ok, 95)),
        "replicas": sorted(set(replicas)),
    }


def phase_table(
    rows: list[dict[str, Any]], answers: Sequence[Answer], phases: list[tuple[str, float, float]]
) -> list[dict[str, Any]]:
    """Per phase of the profile: answers per second, p50/p95, replicas seen."""
    return [
        {"phase": name, **_span_stats(rows, answers, [(start, end)])} for name, start, end in phases
    ]


def replica_table(rows: list[dict[str, Any]], answers: Sequence[Answer]) -> list[dict[str, Any]]:
    """Per replica count (Ray Serve's): the seconds spent with it, their RPS and p95."""
    out = []
    for n in sorted({n for r in rows if (n := _replicas(r)) is not None}):
        spans = [(r["t_s"], r["t_s"] + 1) for r in rows if _replicas(r) == n]
        users = [r["users"] for r in rows if _replicas(r) == n]
        stats = _span_stats(rows, answers, spans)
        out.append({**stats, "replicas": n, "users": [min(users), max(users)]})
    return out


def requests_summary(answers: Sequence[Answer], sent: int) -> dict[str, Any]:
    """Requests sent and lost (never answered 200, after the client's retries)."""
    statuses: dict[str, int] = {}
    for a in answers:
        if not a.ok:
            key = "no_answer" if a.status is None else str(a.status)
            statuses[key] = statuses.get(key, 0) + 1
    ok = sum(1 for a in answers if a.ok)
    return {
        "sent": sent,
        "ok": ok,
        "lost": sent - ok,
        "failed_by_status": statuses,
        "retried": sum(1 for a in answers if a.attempts > 1),
        "max_attempts": max((a.attempts for a in answers), default=0),
    }
