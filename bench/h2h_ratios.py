"""This project / a peer, round by round, over several head-to-head calls.

Each ``bench/gpu/headtohead.sh`` call writes one ``journey.json`` whose ratios are the first
system named over the others: ``ray_serve`` first in one order, ``vllm_serve`` first in the
other. Issue 18 asks for both orders read the same way, this project over the peer, with the
median and range of the per-round ratios, per order and over all rounds. This reads the calls'
folders and writes that as ``ratios.json`` and ``ratios.png`` (each round's ratios, a column
per call) and prints a markdown table of the rounds:

    python -m bench.h2h_ratios OUT_DIR RUN_DIR [RUN_DIR ...]

Each ``RUN_DIR`` holds a ``journey.json``; its folder name labels it in the output. A control
call (``headtohead.sh control``: two ``vllm serve`` up at once) is read with ``--ours
vllm_serve``: the first server over its twin, the yardstick the ratios are judged against.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from bench import report

OURS = "ray_serve"
METRICS = ("rps_ratio", "p95_ratio", "ttft_p50_ratio", "ttft_p95_ratio")


def _ratio(ours: float | None, peer: float | None) -> float | None:
    if not ours or not peer:
        return None
    return round(ours / peer, 3)


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 1)


def round_ratios(number: int, ours: dict[str, Any], peer: dict[str, Any]) -> dict[str, Any]:
    """One round's figures of both systems and this project's ratios to the peer."""
    row: dict[str, Any] = {
        "round": number,
        "ours_rps": ours["rps"],
        "peer_rps": peer["rps"],
        "ours_halves_rps": ours.get("halves_rps"),
        "peer_halves_rps": peer.get("halves_rps"),
        "rps_ratio": _ratio(ours["rps"], peer["rps"]),
        "p95_ratio": _ratio(ours.get("p95_s"), peer.get("p95_s")),
    }
    for key in ("ttft_p50_s", "ttft_p95_s"):
        name = key.removesuffix("_s")
        if ours.get(key) is not None:
            row[f"ours_{name}_ms"] = _ms(ours.get(key))
            row[f"peer_{name}_ms"] = _ms(peer.get(key))
            row[f"{name}_ratio"] = _ratio(ours.get(key), peer.get(key))
    return row


def spread(values: list[float]) -> dict[str, Any]:
    """Median, range and count."""
    return {
        "median": round(statistics.median(values), 3),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


def medians(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The spread of each ratio the rows have."""
    out = {}
    for metric in METRICS:
        values = [row[metric] for row in rows if row.get(metric) is not None]
        if values:
            out[metric] = spread(values)
    return out


def run_ratios(journey: dict[str, Any], ours: str = OURS) -> dict[str, Any]:
    """One call's rounds, ``ours`` over its peer whichever started first."""
    h2h = journey["head_to_head"]
    systems = h2h["systems"]
    if ours not in systems or len(systems) != 2:
        raise ValueError(f"expected {ours} and one peer, got {systems}")
    peer = next(s for s in systems if s != ours)
    rows = [round_ratios(i, r[ours], r[peer]) for i, r in enumerate(h2h["rounds"], start=1)]
    return {
        "machine": journey.get("machine"),
        "systems_in_start_order": systems,
        "ours": ours,
        "peer": peer,
        "design": h2h.get("design"),
        "requests_per_run": h2h.get("requests_per_run"),
        "rounds": rows,
        "medians": medians(rows),
    }


def label(run_dir: Path, run_dirs: list[Path]) -> str:
    """A call's name: its folder's, or ``day/folder`` where two calls' folders share a name
    (every day's results have an ``s-ours``)."""
    shared = sum(d.name == run_dir.name for d in run_dirs) > 1
    return f"{run_dir.parent.name}/{run_dir.name}" if shared else run_dir.name


def collect(run_dirs: list[Path], ours: str = OURS) -> dict[str, Any]:
    """Every call's ratios, the spread over all their rounds, and over the rounds of each
    start order (``ours_first``: this project's server was started first in that call)."""
    runs = {
        label(d, run_dirs): run_ratios(json.loads((d / "journey.json").read_text()), ours)
        for d in run_dirs
    }
    every = [row for run in runs.values() for row in run["rounds"]]
    by_order: dict[str, Any] = {}
    for order, first in (("ours_first", True), ("peer_first", False)):
        rows = [
            row
            for run in runs.values()
            if (run["systems_in_start_order"][0] == ours) == first
            for row in run["rounds"]
        ]
        if rows:
            by_order[order] = medians(rows)
    return {"runs": runs, "all_rounds": medians(every), "by_order": by_order}


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _pair(row: dict[str, Any], name: str) -> str:
    """``ours / peer`` milliseconds of a TTFT figure, or nothing for a non-streaming run."""
    if f"ours_{name}_ms" not in row:
        return ""
    return f"{row[f'ours_{name}_ms']} / {row[f'peer_{name}_ms']}"


def _spread_cell(figure: dict[str, Any] | None) -> str:
    return "" if figure is None else f"{figure['median']} ({figure['min']}-{figure['max']})"


def markdown(result: dict[str, Any]) -> str:
    """A row per round, then the medians per call and over all rounds."""
    lines = [
        "| run | round | this project RPS | peer RPS | RPS ratio | p95 ratio "
        "| TTFT p50 ms (ours / peer) | TTFT p95 ms | TTFT p50 ratio | TTFT p95 ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, run in result["runs"].items():
        for row in run["rounds"]:
            cells = [name, row["round"], row["ours_rps"], row["peer_rps"], row["rps_ratio"],
                     row["p95_ratio"], _pair(row, "ttft_p50"), _pair(row, "ttft_p95"),
                     row.get("ttft_p50_ratio"), row.get("ttft_p95_ratio")]  # fmt: skip
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += ["", "| run | rounds | " + " | ".join(METRICS) + " |"]
    lines.append("|---|---|" + "---|" * len(METRICS))
    groups = [(n, r["medians"], len(r["rounds"])) for n, r in result["runs"].items()]
    for order, spreads in result.get("by_order", {}).items():
        groups.append((order.replace("_", " "), spreads, spreads["rps_ratio"]["n"]))
    groups.append(("all", result["all_rounds"], result["all_rounds"]["rps_ratio"]["n"]))
    for name, spreads, count in groups:
        cells = [_spread_cell(spreads.get(m)) for m in METRICS]
        lines.append(f"| {name} | {count} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("runs", type=Path, nargs="+")
    parser.add_argument("--ours", default=OURS, help="the system read over its peer")
    args = parser.parse_args()
    result = collect(args.runs, args.ours)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "ratios.json").write_text(json.dumps(result, indent=1) + "\n")
    machines = sorted({str(run["machine"]) for run in result["runs"].values()})
    title = f"{args.ours} / peer per round, {', '.join(machines)}"
    report.plot_ratios(result, METRICS, args.out / "ratios.png", title)
    print(markdown(result), end="")


if __name__ == "__main__":
    main()
