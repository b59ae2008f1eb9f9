"""Reads the scheduler traces of ``bench/gpu/schedtrace`` (one JSON line per engine step and
per request added and freed) and says, per benchmark phase, where the batch's places went:
at work (scheduled), held (in the batch without a token: vLLM's async-scheduling hold of a
request whose last token is in flight, or one not schedulable this step), or empty, and
whether an empty place ever stood beside a waiting request (an admission the scheduler
refused). The per-request lines give each phase's engine requests: how many, prompt and
output lengths, and how many ran to their ``max_tokens``.

    python -m bench.schedtrace TRACE_DIR [--max-seqs 24] [--out report.json]
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import itertools
import json
from collections import Counter, defaultdict
from pathlib import Path
from statistics import fmean
from typing import Any

Record = dict[str, Any]


def load(folder: Path) -> list[Record]:
    """Every record of every ``*.jsonl`` / ``*.jsonl.gz`` file, in time order (a torn last
    line of a killed engine is skipped)."""
    records: list[Record] = []
    for path in sorted(folder.glob("*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as f:
            for line in f:
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return sorted(records, key=lambda r: r["t"])


def step_summary(steps: list[Record], max_seqs: int) -> Record:
    """Mean places per step by what they did, over a phase's steps."""
    gaps = [(a, b["t"] - a["t"]) for a, b in itertools.pairwise(steps)]
    mixed = [g for s, g in gaps if s["new"]]
    decode = [g for s, g in gaps if not s["new"]]
    span = steps[-1]["t"] - steps[0]["t"]
    return {
        "steps": len(steps),
        "decoded_per_ms": round(sum(s["n"] for s, _ in gaps) / (1e3 * span), 3) if span else None,
        "step_interval_ms": _ms(g for _, g in gaps),
        "steps_admitting_share": round(len(mixed) / len(gaps), 3) if gaps else None,
        "interval_ms_admitting": _ms(mixed),
        "interval_ms_decode_only": _ms(decode),
        "scheduled_mean": round(fmean(s["n"] for s in steps), 2),
        "held_mean": round(fmean(s["held"] for s in steps), 2),
        "held_at_max_tokens_mean": round(fmean(s["max"] for s in steps), 2),
        "empty_mean": round(fmean(max_seqs - s["r1"] for s in steps), 2),
        "waiting_mean": round(fmean(s["w1"] for s in steps), 2),
        "new_per_step": round(fmean(s["new"] for s in steps), 3),
        "tokens_per_step": round(fmean(s["tok"] for s in steps), 1),
        "refused_admission_steps": sum(1 for s in steps if s["w1"] > 0 and s["r1"] < max_seqs),
        "schedule_us_mean": round(fmean(s["us"] for s in steps)),
    }


def _ms(gaps: Any) -> float | None:
    values = list(gaps)
    return round(1e3 * fmean(values), 3) if values else None


def request_summary(requests: list[tuple[Record, Record | None]]) -> Record:
    """A phase's engine requests: sizes, and how many ran to their limit."""
    done = [(a, f) for a, f in requests if f is not None]
    return {
        "requests": len(requests),
        "prompt_tokens_mean": round(fmean(a["p"] for a, _ in requests), 1),
        "max_tokens_mean": round(fmean(a["m"] or 0 for a, _ in requests), 1),
        "output_tokens_mean": round(fmean(f["o"] for _, f in done), 1) if done else None,
        "at_max_tokens": sum(1 for a, f in done if f["o"] >= (a["m"] or 1 << 30)),
        "lifetime_ms_mean": round(1e3 * fmean(f["t"] - a["t"] for a, f in done), 1)
        if done
        else None,
        "finished": dict(sorted(Counter(f["st"] for _, f in done).items())),
    }


def number_runs(steps: list[Record]) -> None:
    """Renames each step's phase to its run: the phase and how many times it began so far,
    and the admission group of the experiment where it is above 1 (a change of group, which
    the experiment makes between runs, begins a run too)."""
    began: dict[str, int] = defaultdict(int)
    previous: tuple[str, int] = ("", 1)
    for s in steps:
        key = (s["ph"], s.get("g", 1))
        if key[0] and key != previous:
            began[key[0]] += 1
        previous = key
        group = f" (group {key[1]})" if key[1] > 1 else ""
        s["ph"] = f"{key[0]} #{began[key[0]]}{group}" if key[0] else ""


def report(records: list[Record], max_seqs: int) -> dict[str, Record]:
    """Per run (the steps' phase, numbered by its turn: ``ray_serve html #2``; a request takes
    the run of the first step after its arrival, the first that could admit it): the step and
    request summaries. Steps outside a measured run (phase "") are left out."""
    steps = [r for r in records if r["e"] == "s"]
    number_runs(steps)
    times = [s["t"] for s in steps]
    freed = {r["id"]: r for r in records if r["e"] == "f"}
    by_phase_steps: dict[str, list[Record]] = defaultdict(list)
    by_phase_requests: dict[str, list[tuple[Record, Record | None]]] = defaultdict(list)
    for s in steps:
        by_phase_steps[s["ph"]].append(s)
    for r in records:
        if r["e"] == "a":
            i = min(bisect.bisect_left(times, r["t"]), len(steps) - 1)
            phase = steps[i]["ph"] if steps else ""
            by_phase_requests[phase].append((r, freed.get(r["id"])))
    out: dict[str, Record] = {}
    for phase, phase_steps in by_phase_steps.items():
        if not phase:
            continue
        out[phase] = step_summary(phase_steps, max_seqs)
        if by_phase_requests[phase]:
            out[phase] |= request_summary(by_phase_requests[phase])
    return out


def markdown(rows: dict[str, Record]) -> str:
    keys = [k for row in rows.values() for k in row if k != "finished"]
    keys = list(dict.fromkeys(keys))
    lines = ["| | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(str(r.get(k, "")) for r in rows.values()) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--max-seqs", type=int, default=24)
    parser.add_argument("--out", type=Path)
    ns = parser.parse_args()
    rows = report(load(ns.trace), ns.max_seqs)
    if ns.out:
        ns.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
