"""bench.schedtrace: the reading of a scheduler trace, on hand-made steps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from bench.schedtrace import load, markdown, report


def step(t: float, ph: str, new: int = 0, n: int = 4, r1: int = 4, w1: int = 0) -> dict:
    """One step record as the tracer writes it."""
    counts = {"r0": r1, "w0": w1, "r1": r1, "w1": w1, "n": n, "new": new, "tok": n + 10 * new}
    return {"e": "s", "t": t, "us": 100, "ph": ph, **counts, "held": r1 - n, "max": r1 - n, "g": 1}


def test_runs_are_numbered_and_steps_split_by_admission(tmp_path: Path) -> None:
    records = [
        step(0.000, "", new=4),
        step(1.000, "a", new=1),
        step(1.009, "a"),  # the admitting step took 9 ms
        step(1.012, "a", n=3),  # a decode step of 3 ms, one place held
        step(1.015, "a", n=3, r1=3, w1=2),  # an empty place beside waiting requests
        step(1.018, "", n=0, r1=0),
        step(2.000, "a", new=2),
        step(2.010, "a"),
        {**step(2.013, "a"), "g": 4},  # the experiment's group changed: a run of its own
        {"e": "a", "t": 1.0005, "id": "x", "p": 100, "m": 20, "pr": 0},
        {"e": "f", "t": 1.0405, "id": "x", "o": 20, "st": "FINISHED_LENGTH_CAPPED"},
        {"e": "a", "t": 2.001, "id": "y", "p": 50, "m": 30, "pr": 0},
    ]
    with gzip.open(tmp_path / "1.jsonl.gz", "wt") as f:
        f.write("\n".join(json.dumps(r) for r in records[::-1]) + "\n{torn")
    rows = report(load(tmp_path), max_seqs=4)
    assert list(rows) == ["a #1", "a #2", "a #3 (group 4)"]
    first = rows["a #1"]
    assert first["steps"] == 4
    assert first["decoded_per_ms"] == round((4 + 4 + 3) / 15, 3)  # places at work per ms
    assert first["steps_admitting_share"] == round(1 / 3, 3)
    assert first["interval_ms_admitting"] == 9.0
    assert first["interval_ms_decode_only"] == 3.0
    assert first["held_mean"] == 0.25
    assert first["empty_mean"] == 0.25
    assert first["refused_admission_steps"] == 1
    assert first["requests"] == 1
    assert first["at_max_tokens"] == 1
    assert first["lifetime_ms_mean"] == 40.0
    assert first["finished"] == {"FINISHED_LENGTH_CAPPED": 1}
    second = rows["a #2"]
    assert second["requests"] == 1
    assert second["output_tokens_mean"] is None  # never freed in the trace
    assert "| steps | 4 | 2 | 1 |" in markdown(rows)
