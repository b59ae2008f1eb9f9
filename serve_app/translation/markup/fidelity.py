"""Whether the model keeps placeholders, remembered per target language: the choice of method
for the next segment with tags.

A tagged segment sent with placeholders costs one generation; if the answer loses a tag the
segment falls back and its text runs are translated again, one by one. A model that never
keeps tags (random weights; a model weak in one language) thus pays two translations per
tagged segment: on an H100 with random weights, HTML ran at 0.41x the RPS of plain text.
``FidelityTracker`` keeps each target language's last ``window`` placeholder outcomes (kept
or lost); under ``method: auto``, once at least ``min_attempts`` are known and
``max_failure_rate`` of them or more lost a tag, tagged segments go to the structural method
first, except every Nth one (a probe; a deterministic count, so tests are exact), which still
tries placeholders. A probe's outcome enters the window: a model that behaves again (a
language it handles, easier content) brings the rate down and the placeholder path back.
Each probe that loses a tag doubles N (``probe_every`` up to ``max_probe_every``), each kept
outcome brings it back: a model that never keeps tags then wastes one generation in 256
tagged segments, not one in 16 (~6% more engine work on every tagged segment).
Structural-first segments record nothing: they say nothing about tags.

Keyed by target language: a replica serves one model with one prompt family, so the family
is fixed here (the key of (family, target) reduces to the target); whether a model writes
tags back depends above all on the language it writes; a key per pair would split the
evidence many ways and fill its windows slowly (and ``auto`` sources vary). The keys are the
registry's languages: bounded. The tracker lives on the replica's event loop (no locks);
each ``choose`` and ``record`` is O(1).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from serve_app.core.markup_config import MarkupConfig

# What a tagged segment does: try placeholders (a probe is a try while structural first).
Choice = Literal["placeholders", "probe", "structural"]


@dataclass
class _Outcomes:
    """A target's last placeholder outcomes (True: a tag was lost) and its probes' count."""

    lost: deque[bool]
    probe_every: int
    failures: int = 0
    since_probe: int = 0  # tagged segments sent structurally since the last probe

    def add(self, lost: bool) -> None:
        if len(self.lost) == self.lost.maxlen:
            self.failures -= self.lost[0]
        self.lost.append(lost)
        self.failures += lost


@dataclass
class FidelityTracker:
    """The per-replica choice between the placeholder and the structural method."""

    config: MarkupConfig = field(default_factory=MarkupConfig)
    _targets: dict[str, _Outcomes] = field(default_factory=dict)

    def choose(self, target: str) -> Choice:
        """What the next tagged segment into ``target`` does (call once per segment: a
        structural choice counts towards the next probe)."""
        method = self.config.method
        if method != "auto":
            return method
        outcomes = self._targets.get(target)
        if outcomes is None or not self._failing(outcomes):
            return "placeholders"
        outcomes.since_probe += 1
        if outcomes.since_probe < outcomes.probe_every:
            return "structural"
        outcomes.since_probe = 0
        return "probe"

    def record(self, target: str, kept: bool, probe: bool = False) -> None:
        """The outcome of a placeholder attempt into ``target`` (``probe``: one chosen as a
        probe): were all tags kept?"""
        c = self.config
        outcomes = self._targets.get(target)
        if outcomes is None:
            outcomes = _Outcomes(deque(maxlen=c.window), c.probe_every)
            self._targets[target] = outcomes
        outcomes.add(not kept)
        if kept:
            outcomes.probe_every = c.probe_every
        elif probe:
            outcomes.probe_every = min(2 * outcomes.probe_every, c.max_probe_every)

    def failure_rate(self, target: str) -> float | None:
        """The share of ``target``'s remembered attempts that lost a tag (None: none yet)."""
        outcomes = self._targets.get(target)
        if outcomes is None or not outcomes.lost:
            return None
        return outcomes.failures / len(outcomes.lost)

    def _failing(self, outcomes: _Outcomes) -> bool:
        n = len(outcomes.lost)
        c = self.config
        # A hair below the product: 0.8 x 20 must read as 16 failures, whatever the float.
        return n >= c.min_attempts and outcomes.failures >= c.max_failure_rate * n - 1e-9
