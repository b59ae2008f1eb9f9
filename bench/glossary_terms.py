"""A stored glossary's cost per request: one search per entry against the term index.

    python -m bench.glossary_terms [--entries 100,1000,10000] [--chars 200,2000,20000] --out DIR

A translate request naming a ``glossary_id`` needs the entries whose source term its text
holds. Before the index (``serve_app/core/glossary_terms.py``) each request read the pair's
entries from the store and searched its text once per entry; now a replica reads the
glossary's row (it may have been deleted) and searches a cached Aho-Corasick automaton once.
This times both per request against a real SQLite store (in-process: the store deployment's
Ray hop, which carried every entry each time before, is left out, against the old way), on
random terms and texts holding about one term in five words, for each glossary size and text
length, alternating the two ways; and the index's one-off build, in old requests' worth. On
the development CPU the times are for ratios only. Writes glossary_terms.json/.md/.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from serve_app.core.glossary_terms import Entries, TermIndex, as_entries
from serve_app.store import GlossaryDictionary, Store
from serve_app.store.sqlite import open_sqlite

OWNER = "bench"


def vocabulary(n: int, rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choices(letters, k=rng.randint(4, 12))) for _ in range(n * 2)}
    return sorted(words)[:n]


def text_of(chars: int, terms: list[str], rng: random.Random) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(terms) if rng.random() < 0.2 else "filler"
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:chars]


def old_terms(text: str, entries: Entries) -> Entries:
    """The rule the index replaced: one case-folded substring search per entry."""
    lowered = text.casefold()
    return tuple((s, t) for s, t in entries if s.casefold() in lowered)


async def timed(work: Callable[[], Awaitable[Any]], repeat: int) -> float:
    """The median seconds of ``repeat`` runs of ``work``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def one_case(store: Store, entries: int, chars: int, repeat: int) -> dict[str, Any]:
    rng = random.Random(entries * 100_003 + chars)
    words = vocabulary(entries, rng)
    pairs = tuple((w, w.upper()) for w in words)
    stored = GlossaryDictionary("en", "de", pairs)
    glossary = await store.create_glossary(OWNER, f"g{entries}-{chars}", [stored])
    text = text_of(chars, words, rng)
    index = TermIndex(pairs)

    async def before() -> None:
        await store.get_glossary(OWNER, glossary.id)
        read = await store.glossary_entries(OWNER, glossary.id, "en", "de")
        as_entries(old_terms(text, read))

    async def after() -> None:
        await store.get_glossary(OWNER, glossary.id)
        as_entries(index.terms_for(text))

    async def build() -> None:
        TermIndex(await store.glossary_entries(OWNER, glossary.id, "en", "de"))

    rounds = [(await timed(before, repeat), await timed(after, repeat)) for _ in range(3)]
    old = statistics.median(r[0] for r in rounds)
    new = statistics.median(r[1] for r in rounds)
    found = len(index.terms_for(text))
    assert index.terms_for(text) == old_terms(text, pairs)
    return {
        "entries": entries,
        "chars": chars,
        "terms_found": found,
        "old_over_new": round(old / new, 1),
        "build_in_old_requests": round(await timed(build, repeat) / old, 2),
    }


async def measure(ns: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = await open_sqlite(str(Path(tmp) / "bench.db"))
        try:
            cases = [await one_case(store, n, c, ns.repeat) for n in ns.entries for c in ns.chars]
        finally:
            await store.close()
    return {"what": "per-request glossary work, before / after the term index", "cases": cases}


def write(out: Path, result: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "glossary_terms.json").write_text(json.dumps(result, indent=2) + "\n")
    head = "| entries | text chars | terms found | before / after, per request "
    lines = [head + "| index build, in requests before |", "|---|---|---|---|---|"]
    for c in result["cases"]:
        lines.append(
            f"| {c['entries']} | {c['chars']} | {c['terms_found']} | {c['old_over_new']}x "
            f"| {c['build_in_old_requests']} |"
        )
    (out / "glossary_terms.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for chars in sorted({c["chars"] for c in result["cases"]}):
        rows = [c for c in result["cases"] if c["chars"] == chars]
        x = [c["entries"] for c in rows]
        ax.plot(x, [c["old_over_new"] for c in rows], marker="o", label=f"{chars} characters")
    ax.set(xscale="log", yscale="log", xlabel="glossary entries")
    ax.set(ylabel="per-request time, before / after", title="Stored glossary per request")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "glossary_terms.png", dpi=100)


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.glossary_terms")
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    p.add_argument("--entries", type=ints, default=[100, 1000, 10000])
    p.add_argument("--chars", type=ints, default=[200, 2000, 20000])
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--out", type=Path, required=True)
    ns = p.parse_args()
    result = asyncio.run(measure(ns))
    write(ns.out, result)
    print((ns.out / "glossary_terms.md").read_text())


if __name__ == "__main__":
    main()
