"""The choice of method for tagged segments (``FidelityTracker``): placeholders until the
window shows they mostly fail for a target, then structural first with every Nth segment a
probe (N doubling while probes lose tags), back to placeholders once probes bring the rate
down; forced methods ignore it all."""

from __future__ import annotations

import random

import pytest

from serve_app.core.markup_config import MarkupConfig
from serve_app.translation.markup.fidelity import Choice, FidelityTracker

SMALL = MarkupConfig(
    window=8, min_attempts=4, max_failure_rate=0.8, probe_every=4, max_probe_every=16
)
P, S, PROBE = "placeholders", "structural", "probe"


def tracker(**kw: object) -> FidelityTracker:
    return FidelityTracker(SMALL.model_copy(update=kw))


def choices(t: FidelityTracker, n: int, target: str = "de") -> list[Choice]:
    return [t.choose(target) for _ in range(n)]


def failing(t: FidelityTracker, target: str = "de", n: int = 8) -> FidelityTracker:
    for _ in range(n):
        t.record(target, kept=False)
    return t


def test_an_unknown_target_tries_placeholders() -> None:
    t = tracker()
    assert choices(t, 20) == [P] * 20
    assert t.failure_rate("de") is None


def test_failing_targets_go_structural_with_every_nth_segment_a_probe() -> None:
    t = failing(tracker(), n=4)
    assert t.failure_rate("de") == 1.0
    # Probes whose outcome is not in yet: the interval stays.
    assert choices(t, 12) == [S, S, S, PROBE] * 3


def until_probe(t: FidelityTracker, target: str = "de") -> int:
    """Segments chosen up to and including the next probe."""
    for n in range(1, 1000):
        if t.choose(target) == PROBE:
            return n
    raise AssertionError("no probe in 1000 segments")


def test_probes_losing_tags_double_the_interval_up_to_the_most() -> None:
    t, seen = failing(tracker()), list[int]()
    for _ in range(5):
        seen.append(until_probe(t))
        t.record("de", kept=False, probe=True)
    assert seen == [4, 8, 16, 16, 16]


def test_a_kept_outcome_brings_the_interval_back() -> None:
    t = failing(tracker())
    t.record("de", kept=False, probe=True)
    t.record("de", kept=False, probe=True)  # interval 16
    t.record("de", kept=True, probe=True)  # window 7 lost of 8: still failing
    assert until_probe(t) == 4


def test_no_switch_before_min_attempts_or_below_the_rate() -> None:
    t = failing(tracker(), n=3)
    assert choices(t, 5) == [P] * 5  # 3 attempts < min_attempts 4
    t.record("de", kept=True)
    assert t.failure_rate("de") == 0.75  # below 0.8
    assert choices(t, 5) == [P] * 5
    t.record("de", kept=False)
    assert t.failure_rate("de") == 0.8  # at the rate: structural first
    assert choices(t, 4) == [S, S, S, PROBE]


def test_targets_are_tracked_apart() -> None:
    t = failing(tracker(), "de")
    for _ in range(8):
        t.record("fr", kept=True)
    assert choices(t, 4, "de") == [S, S, S, PROBE]
    assert choices(t, 4, "fr") == [P] * 4
    assert choices(t, 4, "ja") == [P] * 4


def test_the_window_forgets_old_outcomes() -> None:
    t = failing(tracker())
    for _ in range(7):
        t.record("de", kept=True)
    assert t.failure_rate("de") == 1 / 8
    assert choices(t, 4) == [P] * 4


def test_running_count_matches_the_window_on_random_outcomes() -> None:
    rng = random.Random(7)
    t, seen = tracker(), list[bool]()
    for _ in range(500):
        lost = rng.random() < 0.6
        t.record("de", kept=not lost)
        seen.append(lost)
        assert t.failure_rate("de") == sum(seen[-8:]) / len(seen[-8:])


def test_successful_probes_bring_placeholders_back() -> None:
    t = failing(tracker())
    probes = 0
    while PROBE in choices(t, 4):  # a probe in every 4 (kept: the interval stays 4)
        probes += 1
        t.record("de", kept=True, probe=True)
    # 8 lost in a window of 8: 2 kept make 6 / 8 = 0.75 < 0.8.
    assert probes == 2
    assert choices(t, 8) == [P] * 8


@pytest.mark.parametrize("method", ["placeholders", "structural"])
def test_forced_methods_ignore_the_outcomes(method: str) -> None:
    t = tracker(method=method)
    assert choices(t, 3) == [method] * 3
    for _ in range(8):
        t.record("de", kept=method == "structural")  # the other method's evidence
    assert choices(t, 10) == [method] * 10
