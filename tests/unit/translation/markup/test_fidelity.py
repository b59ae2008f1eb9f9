"""The choice of method for tagged segments (``FidelityTracker``): placeholders until the
window shows they mostly fail for a target, then structural first with every Kth segment a
probe, back to placeholders once probes bring the rate down; forced methods ignore it all."""

from __future__ import annotations

import random

import pytest

from serve_app.core.markup_config import MarkupConfig
from serve_app.translation.markup.fidelity import FidelityTracker

SMALL = MarkupConfig(window=8, min_attempts=4, max_failure_rate=0.8, probe_every=4)


def tracker(**kw: object) -> FidelityTracker:
    return FidelityTracker(SMALL.model_copy(update=kw))


def choices(t: FidelityTracker, n: int, target: str = "de") -> list[bool]:
    return [t.try_placeholders(target) for _ in range(n)]


def test_an_unknown_target_tries_placeholders() -> None:
    t = tracker()
    assert choices(t, 20) == [True] * 20
    assert t.failure_rate("de") is None


def test_failing_targets_go_structural_with_every_kth_segment_a_probe() -> None:
    t = tracker()
    for _ in range(4):
        t.record("de", kept=False)
    assert t.failure_rate("de") == 1.0
    assert choices(t, 12) == [False, False, False, True] * 3


def test_no_switch_before_min_attempts_or_below_the_rate() -> None:
    t = tracker()
    for _ in range(3):
        t.record("de", kept=False)
    assert choices(t, 5) == [True] * 5  # 3 attempts < min_attempts 4
    t.record("de", kept=True)
    assert t.failure_rate("de") == 0.75  # below 0.8
    assert choices(t, 5) == [True] * 5
    t.record("de", kept=False)
    assert t.failure_rate("de") == 0.8  # at the rate: structural first
    assert choices(t, 4) == [False, False, False, True]


def test_targets_are_tracked_apart() -> None:
    t = tracker()
    for _ in range(8):
        t.record("de", kept=False)
        t.record("fr", kept=True)
    assert choices(t, 4, "de") == [False, False, False, True]
    assert choices(t, 4, "fr") == [True] * 4
    assert choices(t, 4, "ja") == [True] * 4


def test_the_window_forgets_old_outcomes() -> None:
    t = tracker()
    for _ in range(8):
        t.record("de", kept=False)
    for _ in range(7):
        t.record("de", kept=True)
    assert t.failure_rate("de") == 1 / 8
    assert choices(t, 4) == [True] * 4


def test_running_count_matches_the_window_on_random_outcomes() -> None:
    rng = random.Random(7)
    t, seen = tracker(), list[bool]()
    for _ in range(500):
        lost = rng.random() < 0.6
        t.record("de", kept=not lost)
        seen.append(lost)
        assert t.failure_rate("de") == sum(seen[-8:]) / len(seen[-8:])


def test_successful_probes_bring_placeholders_back() -> None:
    t = tracker()
    for _ in range(8):
        t.record("de", kept=False)
    probes = 0
    while not all(choices(t, 4)):  # a probe in every 4: recorded as kept
        probes += 1
        t.record("de", kept=True)
    # 8 lost in a window of 8: 2 kept make 6 / 8 = 0.75 < 0.8.
    assert probes == 2
    assert choices(t, 8) == [True] * 8


@pytest.mark.parametrize(("method", "expected"), [("placeholders", True), ("structural", False)])
def test_forced_methods_ignore_the_outcomes(method: str, expected: bool) -> None:
    t = tracker(method=method)
    assert choices(t, 3) == [expected] * 3
    for _ in range(8):
        t.record("de", kept=method == "structural")  # the other method's evidence
    assert choices(t, 10) == [expected] * 10
