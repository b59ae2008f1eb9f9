"""The head-to-head's ABBA design (``bench.journey._alternate``) with fake targets: the order
of the runs, each arm's two halves merged, and a machine that speeds up over the call.

The control on an H100 (2026-11-24) had the same ``vllm serve`` against itself at 0.94
(0.88-1.08): throughput rose over the call, so whoever ran later in a round won it. These
tests hold the design that cancels such a drift to what it must do.
"""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

import pytest

from bench import loadgen
from bench.journey import _alternate, _h2h
from bench.targets import Sample, Target
from bench.workloads import Item


class Clock:
    """The load loop's ``time`` on a virtual clock that only the fake targets advance."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    virtual = Clock()
    monkeypatch.setattr(loadgen, "time", virtual)
    return virtual


class Clocked:
    """A target whose requests take ``base_s / speed`` virtual seconds, where the machine's
    speed rises by ``drift`` per request served by any target (a warming machine); every
    request is logged as ``name:text`` in the machine's ``sent``, in order."""

    def __init__(self, name: str, base_s: float, machine: dict[str, Any]) -> None:
        self.name, self.base_s, self.machine = name, base_s, machine

    async def send(self, item: Item) -> Sample:
        clock: Clock = self.machine["clock"]
        self.machine["sent"].append(f"{self.name}:{item.text}")
        start = clock.now  # absolute, as the real targets: the loop makes it relative
        latency = self.base_s / self.machine["speed"]
        self.machine["speed"] += self.machine["drift"]
        clock.now += latency
        await asyncio.sleep(0)
        return Sample(start_s=start, latency_s=latency, status=200, output_tokens=1)

    async def aclose(self) -> None:
        return None


def items(tag: str, n: int) -> list[Item]:
    return [Item(f"{tag}{i}", "en", "de", 1, 1) for i in range(n)]


def rounds_of(targets: list[Clocked], n_rounds: int, n: int) -> list[dict[str, Any]]:
    texts = [items(f"r{r}-", n) for r in range(n_rounds)]
    return [{t.name: (t, texts[r]) for t in targets} for r in range(n_rounds)]


def alternate(rounds: list[dict[str, Any]], design: str) -> list[dict[str, Any]]:
    summary = lambda per_round: _h2h(["a", "b"], 1, 0, per_round, design)  # noqa: E731
    return asyncio.run(_alternate(rounds, 1, summary, None, design))


def test_abba_runs_each_round_as_two_mirrored_halves(clock: Clock) -> None:
    machine = {"speed": 1.0, "drift": 0.0, "clock": clock, "sent": []}
    a, b = Clocked("a", 0.001, machine), Clocked("b", 0.001, machine)
    per_round = alternate(rounds_of([a, b], 2, 4), "abba")
    # Round 1: A B on texts 0-1, then B A on texts 2-3; round 2 mirrored: B A A B.
    assert machine["sent"] == [
        "a:r0-0", "a:r0-1", "b:r0-0", "b:r0-1", "b:r0-2", "b:r0-3", "a:r0-2", "a:r0-3",
        "b:r1-0", "b:r1-1", "a:r1-0", "a:r1-1", "a:r1-2", "a:r1-3", "b:r1-2", "b:r1-3",
    ]  # fmt: skip
    for round_ in per_round:  # each arm's round covers both its halves: every text once
        assert {k: (v["requests"], v["ok"]) for k, v in round_.items()} == {
            "a": (4, 4),
            "b": (4, 4),
        }
        assert all(len(v["halves_rps"]) == 2 for v in round_.values())


@pytest.mark.parametrize(("design", "unbiased"), [("alternate", False), ("abba", True)])
def test_a_drifting_machine_favours_no_one_under_abba(
    design: str, unbiased: bool, clock: Clock
) -> None:
    """Two identical systems on a machine that speeds up 0.2% per request: alternating whole
    runs hands the later one most rounds (the median ratio moves off 1, as the GPU control
    did); ABBA keeps every round's ratio near 1."""
    machine = {"speed": 1.0, "drift": 0.002, "clock": clock, "sent": []}
    a, b = Clocked("a", 0.002, machine), Clocked("b", 0.002, machine)
    per_round = alternate(rounds_of([a, b], 3, 40), design)
    ratios = [r["a"]["rps"] / r["b"]["rps"] for r in per_round]
    off = abs(statistics.median(ratios) - 1)
    if unbiased:
        assert off < 0.03, ratios
    else:
        assert off > 0.05, ratios


@pytest.mark.parametrize("design", ["abba", "alternate"])
def test_each_run_names_its_arm_to_a_watcher(
    design: str, clock: Clock, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bench.cpu_profile`` measures a phase while the phase file names it: a workloads'
    head-to-head names the system and the workload, and clears the file between runs."""
    phases = tmp_path / "phase.txt"
    monkeypatch.setenv("BENCH_PHASE_FILE", str(phases))
    machine = {"speed": 1.0, "drift": 0.0, "clock": clock, "sent": []}
    seen: list[str] = []

    class Watched(Clocked):
        async def send(self, item: Item) -> Sample:
            seen.append(phases.read_text())
            return await super().send(item)

    target = Watched("ray_serve", 0.001, machine)
    arms: list[dict[str, tuple[Target, list[Item]]]] = [
        {"html": (target, items("h", 4)), "variable": (target, items("v", 4))}
    ]
    asyncio.run(_alternate(arms, 1, lambda per_round: {}, None, design))
    assert seen.count("ray_serve html") == 4
    assert seen.count("ray_serve variable") == 4
    assert phases.read_text() == ""
