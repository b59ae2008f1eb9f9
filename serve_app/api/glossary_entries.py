"""Glossary entries as clients send and read them: TSV and CSV (DeepL's two formats), and
the terms of a stored glossary that one text needs.

Parsing refuses what cannot be a glossary with ``InvalidGlossary`` (400) naming the line;
the store checks the terms themselves (length, control characters, duplicates), so every
way in is held to the same rules. Work here is proportional to the input: callers with large
inputs run it in a worker thread (above ``THREAD_ABOVE`` characters: a new glossary's
dictionaries, ``api.glossaries.create_glossary``; the terms a text needs:
``core.glossary_terms.glossary_for_async``).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Sequence
from typing import Literal

from serve_app.core.aio import sized
from serve_app.core.errors import InvalidGlossary
from serve_app.core.glossary_terms import Entries, terms_for

__all__ = [
    "THREAD_ABOVE",
    "Entries",
    "parse_entries",
    "terms_for",
    "to_csv",
    "to_tsv",
    "written_async",
]

EntriesFormat = Literal["tsv", "csv"]
# Above this much work (characters of entries), parsing and writing leave the event loop.
THREAD_ABOVE = 50_000
# What ends a TSV line. ``str.splitlines`` also breaks at VT, FF, U+0085, U+2028...: a term
# holding one was cut in two, and the error named a line the client's editor does not show
# (now the store refuses the character itself, by name).
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def parse_entries(data: str, fmt: str) -> Entries:
    """``(source, target)`` pairs from TSV (``source<TAB>target`` per line) or CSV
    (``source,target`` per row, optionally ``,source_lang,target_lang`` as DeepL's CSV has;
    quoting as RFC 4180). A leading byte order mark is dropped (files saved by Excel or
    Notepad start with one: it stuck to the first source term, which then matched no
    text); lines end at LF, CRLF or CR only. Blank lines are skipped; terms are trimmed."""
    data = data.removeprefix("\ufeff")
    if fmt == "tsv":
        return _parse_tsv(data)
    if fmt == "csv":
        return _parse_csv(data)
    raise InvalidGlossary(f"Unknown entries_format {fmt[:20]!r}: use 'tsv' or 'csv'.")


def _parse_tsv(data: str) -> Entries:
    entries = []
    for number, line in enumerate(_LINE_BREAK.split(data), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise InvalidGlossary(
                f"Entry on line {number} must be 'source<TAB>target' (one tab); "
                f"it has {len(parts) - 1} tabs."
            )
        entries.append((parts[0].strip(), parts[1].strip()))
    return tuple(entries)


def _parse_csv(data: str) -> Entries:
    entries = []
    try:
        rows = list(csv.reader(io.StringIO(data, newline=""), strict=True))
    except csv.Error as exc:
        raise InvalidGlossary(f"The CSV entries cannot be read: {exc}.") from exc
    for number, row in enumerate(rows, 1):
        if not row or not "".join(row).strip():
            continue
        if len(row) not in (2, 4):
            raise InvalidGlossary(
                f"Row {number} of the CSV entries has {len(row)} fields; expected "
                "'source,target' or 'source,target,source_lang,target_lang'."
            )
        entries.append((row[0].strip(), row[1].strip()))
    return tuple(entries)


def to_tsv(entries: Sequence[tuple[str, str]]) -> str:
    """The entries as DeepL serves them: ``source<TAB>target`` lines (terms never hold tabs
    or newlines: the store refuses control characters)."""
    return "\n".join(f"{s}\t{t}" for s, t in entries)


def to_csv(entries: Sequence[tuple[str, str]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerows(entries)
    return out.getvalue()


async def written_async(write: Callable[[Entries], str], entries: Entries) -> str:
    """``write(entries)`` (``to_tsv``, ``to_csv``), in a thread for large glossaries: the
    CSV of a 20 MB glossary took 0.45 s on the event loop."""
    return await sized(sum(len(s) + len(t) for s, t in entries), THREAD_ABOVE, write, entries)
