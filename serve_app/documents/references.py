"""How many times openpyxl reads each part of a workbook: once per reference, not once.

openpyxl follows a workbook's relationships and reads the target part anew each time it is
named: a worksheet once per ``<sheet r:id>`` of the workbook, a drawing once per worksheet
that names it, a picture once per ``<a:blip r:embed>`` of a drawing (and keeps each copy,
with Pillow installed). The package check counts each part once, so a small upload could
make it read far more: the workbook naming one sheet of 20,000 cells 100 times (a 107 KB
upload) took two minutes and 775 MB; a drawing showing one 12 MB bitmap 50 times (an 18 KB
upload) took 655 MB, a thousand times gigabytes.

So the check also records, while it streams the parts, the relationships (``.rels`` parts)
and the references to them (prefixed ``id``, ``embed`` and ``link`` attributes: ``r:id``,
``r:embed``), and ``extra_reads`` finds how many times each part is read: a part named by
no relationship is read once (the package's root); a target is read, for each part that
names it, as often as that part is read times the references it holds to the relationship
(at least once: openpyxl also reads relationships of some types whoever refers to them).
What is read more than once costs its elements and bytes again. python-docx and
python-pptx load each part once, so only workbooks are counted so.
"""

from __future__ import annotations

import posixpath
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

_REFERENCE_NAMES = frozenset({"id", "embed", "link"})  # r:id, r:embed, r:link
_MAX_READS = 10**9  # beyond any real workbook; keeps the numbers small


@dataclass
class References:
    """What the package check saw: each part's elements, the internal relationships of
    each ``.rels`` part, and the references each part holds to a relationship id."""

    elements: dict[str, int] = field(default_factory=dict)
    relationships: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    held: Counter[tuple[str, str]] = field(default_factory=Counter)

    def element(self, part: str, tag: str, attrs: dict[str, str]) -> None:
        """Records an element of ``part``: a relationship, or references in its attributes."""
        if part.endswith(".rels"):
            if _relationship(tag, attrs):
                self.relationships.setdefault(part, []).append((attrs["Id"], attrs["Target"]))
            return
        for name in attrs:
            if ":" in name and name.rpartition(":")[2] in _REFERENCE_NAMES:
                self.held[(part, attrs[name])] += 1


def _relationship(tag: str, attrs: dict[str, str]) -> bool:
    """An internal relationship (one to a part of the package), with its id and target."""
    if tag.rsplit(":", 1)[-1] != "Relationship" or attrs.get("TargetMode") == "External":
        return False
    return "Id" in attrs and "Target" in attrs


def extra_reads(refs: References, sizes: dict[str, int]) -> dict[str, int]:
    """The times each part of ``sizes`` is read beyond the first, where it is read more than
    once."""
    edges = _edges(refs)
    reads = _reads(edges)
    return {part: n - 1 for part, n in reads.items() if n > 1 and part in sizes}


def _edges(refs: References) -> dict[str, Counter[str]]:
    """For each source part (``""``: the package), the parts it reads, with how often."""
    edges: dict[str, Counter[str]] = defaultdict(Counter)
    for rels, found in refs.relationships.items():
        folder, name = posixpath.split(rels)
        source = posixpath.join(posixpath.dirname(folder), name.removesuffix(".rels"))
        for rid, target in found:
            path = (
                target.lstrip("/")
                if target.startswith("/")
                else posixpath.join(posixpath.dirname(source), target)
            )
            edges[source][posixpath.normpath(path)] += max(1, refs.held[(source, rid)])
    return edges


def _reads(edges: dict[str, Counter[str]]) -> dict[str, int]:
    """Reads of every part, sources before their targets (parts on a cycle, which no real
    package holds, keep what reached them from outside it)."""
    incoming: Counter[str] = Counter(t for targets in edges.values() for t in targets)
    reads: Counter[str] = Counter({s: 1 for s in edges if incoming[s] == 0})
    ready = deque(reads)
    while ready:
        source = ready.popleft()
        for target, times in edges.get(source, Counter()).items():
            reads[target] = min(_MAX_READS, reads[target] + reads[source] * times)
            incoming[target] -= 1
            if incoming[target] == 0:
                ready.append(target)
    return reads
