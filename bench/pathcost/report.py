"""Plots a ``pathcost.json`` (cases of ``run_case.sh`` collected into one file):

    python -m bench.pathcost.report DIR      # DIR/pathcost.json -> DIR/pathcost.png

Left: requests per second of each case; right: CPU microseconds per request of each
process that ``run_case.sh`` measured (the translator replica, Ray's proxy, the store).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.report import _pyplot


def plot(folder: Path) -> Path:
    data = json.loads((folder / "pathcost.json").read_text())
    cases = data["cases"]
    names = list(cases)
    processes = sorted({k for c in cases.values() for k in c if k.endswith("_us_per_request")})
    plt = _pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
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
    fig.suptitle(f"Serving path cost, {data.get('machine', '')}", fontsize=10)
    fig.tight_layout()
    path = folder / "pathcost.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    print(plot(Path(sys.argv[1])))
