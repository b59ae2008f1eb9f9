"""A py-spy profile read as shares of its samples: where a process's time went.

    python -m bench.spy_summary FILE [--top 30] [--match TEXT]

FILE is what ``bench.cpu_profile --py-spy`` wrote (``py-spy record --format raw``: one line a
stack, frames joined by ``;``, then the sample count; ``.gz`` is read too). Printed: the
samples, then per function (``name (file)``) its inclusive share (samples whose stack holds
it) and its own share (samples it is the innermost frame of), by inclusive share (ties by
name). ``--match``
keeps the stacks holding TEXT, with shares of all samples: e.g. ``--match schedule`` in an
engine core's profile is what one step's scheduling costs of the process's time.
Standard library only: it runs where the profile was taken too.
"""

from __future__ import annotations

import argparse
import gzip
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")
_LINENO = re.compile(r":\d+\)$")


def read(path: Path) -> list[tuple[list[str], int]]:
    """The (frames outermost first, samples) of each line of ``path``."""
    opener = gzip.open if path.suffix == ".gz" else open
    out: list[tuple[list[str], int]] = []
    with opener(path, "rt", encoding="utf-8", errors="replace") as lines:
        for line in lines:
            found = _LINE.match(line.rstrip("\n"))
            if found:
                out.append((found["stack"].split(";"), int(found["count"])))
    return out


def function(frame: str) -> str:
    """A frame without its line number: ``name (file)``, so a function's lines add up."""
    return _LINENO.sub(")", frame)


def shares(stacks: list[tuple[list[str], int]], match: str = "") -> dict[str, object]:
    """Inclusive and own samples per function, of the stacks holding ``match``."""
    total = sum(count for _, count in stacks)
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    kept = 0
    for frames, count in stacks:
        if match and not any(match in frame for frame in frames):
            continue
        kept += count
        names = [function(frame) for frame in frames]
        for name in set(names):
            inclusive[name] += count
        if names:
            own[names[-1]] += count
    return {"total": total, "kept": kept, "inclusive": inclusive, "own": own}


def report(result: dict[str, object], top: int) -> str:
    """The table of ``shares``: percentages of all samples."""
    total = max(int(result["total"]), 1)  # type: ignore[call-overload]
    inclusive: Counter[str] = result["inclusive"]  # type: ignore[assignment]
    own: Counter[str] = result["own"]  # type: ignore[assignment]
    lines = [f"samples {result['total']}, kept {result['kept']}", "incl%   own%  function"]
    for name, count in sorted(inclusive.items(), key=lambda item: (-item[1], item[0]))[:top]:
        lines.append(f"{100 * count / total:5.1f}  {100 * own[name] / total:5.1f}  {name}")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.spy_summary", description=__doc__)
    p.add_argument("file", type=Path)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--match", default="", help="keep only the stacks holding this text")
    ns = p.parse_args()
    print(report(shares(read(ns.file), ns.match), ns.top))


if __name__ == "__main__":
    main()
