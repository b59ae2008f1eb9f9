"""Plots a ``pathcost.json`` (cases of ``run_case.sh`` collected into one file):

    python -m bench.pathcost.report DIR      # DIR/pathcost.json -> DIR/pathcost.png
    python -m bench.pathcost.report DIR --collect MACHINE   # first: DIR/*/ -> pathcost.json

Left: requests per second of each case; middle: CPU microseconds per request of each
process that ``run_case.sh`` measured (the translator replica, Ray's proxy, the store);
right, for streamed cases: time to first text and to the first event, p50.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.report import _pyplot

_KEPT = ("rps", "p50_s", "p95_s", "ttft_p50_s", "ttft_p95_s", "first_event_p50_s")


def collect(folder: Path, machine: str) -> Path:
    """``pathcost.json`` from the case folders under ``folder`` (each with ``run_case.sh``'s
    ``cpu.txt`` and the load generator's ``results.json``), in the order of their names."""
    cases = {}
    for case in sorted(p for p in folder.iterdir() if (p / "cpu.txt").exists()):
        cpu = dict(line.split() for line in (case / "cpu.txt").read_text().splitlines())
        run = json.loads((case / "results.json").read_text())
        cases[case.name] = {**{k: run.get(k) for k in _KEPT}, **{k: int(v) for k, v in cpu.items()}}
    path = folder / "pathcost.json"
    path.write_text(json.dumps({"machine": machine, "cases": cases}, indent=1) + "\n")
    return path


def plot(folder: Path) -> Path:
    data = json.loads((folder / "pathcost.json").read_text())
    cases = data["cases"]
    names = list(cases)
    processes = sorted({k for c in cases.values() for k in c if k.endswith("_us_per_request")})
    streamed = [n for n in names if cases[n].get("ttft_p50_s") is not None]
    plt = _pyplot()
    fig, (left, right, *ttft) = plt.subplots(1, 3 if streamed else 2, figsize=(16, 4))
    bars = left.bar(names, [cases[n]["rps"] for n in names], color="tab:blue")
    left.bar_label(bars, fmt="%.0f")
    left.set_ylabel("requests per second")
    width = 0.8 / max(1, len(processes))
    for i, proc in enumerate(processes):
        xs = [j + i * width for j in range(len(names))]
        right.bar(xs, [cases[n].get(proc, 0) for n in names], width, label=proc.split("_us")[0])
    right.set_xticks([j + width * (len(processes) - 1) / 2 for j in range(len(names))], names)
    right.set_ylabel("CPU us per request")
    right.legend()
    if streamed:
        positions = range(len(streamed))
        for i, key in enumerate(("ttft_p50_s", "first_event_p50_s")):
            ms = [1000 * (cases[n].get(key) or 0) for n in streamed]
            ttft[0].bar([x + i * 0.4 for x in positions], ms, 0.4, label=key.replace("_s", " ms"))
        ttft[0].set_xticks([x + 0.2 for x in positions], streamed)
        ttft[0].set_ylabel("ms (p50)")
        ttft[0].legend()
    for ax in (left, right, *ttft):
        ax.tick_params(axis="x", labelrotation=30)
    fig.suptitle(f"Serving path cost, {data.get('machine', '')}", fontsize=10)
    fig.tight_layout()
    path = folder / "pathcost.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    if "--collect" in sys.argv:
        print(collect(Path(sys.argv[1]), sys.argv[sys.argv.index("--collect") + 1]))
    print(plot(Path(sys.argv[1])))
