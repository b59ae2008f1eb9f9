"""The autoscaling ramp's load profile: how many closed-loop users are offered when.

A profile is given as waypoints (``5,60,5``: start at 5 users, climb to 60, come back to 5).
Each waypoint is held for its ``hold_s``; between two waypoints the users change by
``step_users`` every ``step_s`` seconds. Every stage carries the phase it belongs to
(``start 5``, ``up 5->60``, ``hold 60``, ``down 60->5``, ``end 5``), which the report
summarises one by one. Pure functions: the unit tests pin them down.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stage:
    """``users`` offered from ``start_s`` to ``end_s`` (seconds since the ramp began)."""

    start_s: float
    end_s: float
    users: int
    phase: str


def parse_ints(text: str, name: str) -> list[int]:
    """``"5,60,5"`` -> ``[5, 60, 5]``; every value a positive integer."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{name}: comma-separated integers expected, got {text!r}") from None
    if not values or min(values) < 1:
        raise ValueError(f"{name}: positive integers expected, got {text!r}")
    return values


def parse_holds(text: str, waypoints: int) -> list[float]:
    """One hold per waypoint: a single value for all, or exactly one per waypoint."""
    try:
        holds = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--hold-s: comma-separated seconds expected, got {text!r}") from None
    if len(holds) == 1:
        holds *= waypoints
    if len(holds) != waypoints or min(holds) < 0:
        raise ValueError(f"--hold-s: 1 or {waypoints} non-negative values expected, got {text!r}")
    return holds


def _hold_name(index: int, count: int, users: int) -> str:
    if index == 0:
        return f"start {users}"
    return f"end {users}" if index == count - 1 else f"hold {users}"


def _leg(low: int, high: int, step_users: int) -> list[int]:
    """The users of the steps strictly between two waypoints, in the direction of travel."""
    sign = 1 if high > low else -1
    return list(range(low + sign * step_users, high, sign * step_users))


def build_profile(
    waypoints: list[int], holds: list[float], step_users: int, step_s: float
) -> list[Stage]:
    """The stages of the whole ramp, back to back."""
    if step_users < 1 or step_s <= 0:
        raise ValueError("step_users must be >= 1 and step_s > 0")
    stages: list[Stage] = []
    t = 0.0

    def add(users: int, seconds: float, phase: str) -> None:
        nonlocal t
        if seconds > 0:
            stages.append(Stage(t, t + seconds, users, phase))
            t += seconds

    for i, users in enumerate(waypoints):
        if i > 0:
            before = waypoints[i - 1]
            kind = "up" if users > before else "down"
            for step in _leg(before, users, step_users):
                add(step, step_s, f"{kind} {before}->{users}")
        add(users, holds[i], _hold_name(i, len(waypoints), users))
    return stages


def duration(stages: list[Stage]) -> float:
    return stages[-1].end_s if stages else 0.0


def users_at(stages: list[Stage], t: float) -> int:
    """Users offered at ``t``; 0 before the first stage and after the last."""
    for stage in stages:
        if stage.start_s <= t < stage.end_s:
            return stage.users
    return 0


def phases(stages: list[Stage]) -> list[tuple[str, float, float]]:
    """``(phase, start_s, end_s)`` in order, consecutive stages of one phase merged."""
    out: list[tuple[str, float, float]] = []
    for stage in stages:
        if out and out[-1][0] == stage.phase:
            out[-1] = (stage.phase, out[-1][1], stage.end_s)
        else:
            out.append((stage.phase, stage.start_s, stage.end_s))
    return out
