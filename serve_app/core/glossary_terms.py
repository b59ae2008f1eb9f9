"""Which entries of a glossary a text needs: one rule for the translate routes (a request's
text) and document jobs (a document's segments), so a term applies the same way in both.

A term applies where its source occurs in the text, case-insensitively; the prompt
families filter each piece of a long text again (``PromptOptions.for_text``).

Why an index: a stored glossary may hold thousands of entries, and one substring search per
entry made every request pay for the whole glossary. ``TermIndex`` holds an Aho-Corasick
automaton (pyahocorasick) over the case-folded source terms, built once per glossary pair,
so a text is read once, whatever the glossary's size: with 10,000 entries a request's
glossary work is 19-58x smaller (``bench/glossary_terms.py``). Stored glossaries never
change (a new one gets a new id), so ``IndexCache`` keeps the indexes of the pairs in use in
each replica: a request reads the glossary's row (that it still exists and is the caller's),
not its entries.

An automaton takes ~40 bytes per character of the source terms (10,000 terms of 1,024
characters, the store's largest: 390 MB), so a glossary whose source terms hold more than
``AUTOMATON_MAX_CHARS`` characters is searched one term at a time instead (its case-folded
terms kept), and the cache is bounded by the indexes' estimated bytes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable

import ahocorasick

from serve_app.core.aio import sized
from serve_app.core.schemas import GlossaryEntry

Entries = tuple[tuple[str, str], ...]
# Searches reading more characters than this run in a worker thread (~1 ms per 20,000).
SEARCH_INLINE_CHARS = 20_000
# More terms found than this are built as entries in a worker thread (~30 us each).
BUILD_INLINE_TERMS = 100
# Glossaries larger than this are indexed in a worker thread (~2 ms per 1,000 entries).
INDEX_INLINE_ENTRIES = 1_000
# Source terms of more characters than this are searched one by one (~40 MB of automaton).
AUTOMATON_MAX_CHARS = 1_000_000
_ENTRY_BYTES = 150  # an entry's tuple and two strings, besides their characters


class TermIndex:
    """A glossary pair's entries and an automaton over their case-folded source terms (or,
    for a glossary too large for one, the case-folded terms); ``size``: estimated bytes."""

    __slots__ = ("_always", "_automaton", "_folded", "entries", "size")

    def __init__(self, entries: Entries) -> None:
        self.entries = entries
        self._always: tuple[int, ...] = ()
        self._automaton: ahocorasick.Automaton | None = None
        self._folded: tuple[str, ...] | None = None
        chars = sum(len(s) + len(t) for s, t in entries)
        self.size = chars + _ENTRY_BYTES * len(entries)
        if sum(len(s) for s, _ in entries) > AUTOMATON_MAX_CHARS:
            self._folded = tuple(s.casefold() for s, _ in entries)
            self.size += chars
            return
        by_term: dict[str, list[int]] = {}
        for i, (source, _) in enumerate(entries):
            by_term.setdefault(source.casefold(), []).append(i)
        # An empty term occurs in every text (as ``"" in text`` says); stores refuse one.
        self._always = tuple(by_term.pop("", ()))
        if by_term:
            automaton = ahocorasick.Automaton()
            for term, indices in by_term.items():
                automaton.add_word(term, tuple(indices))
            automaton.make_automaton()
            self._automaton = automaton
            self.size += int(automaton.get_stats()["total_size"])

    def reads(self, text: str) -> int:
        """How many characters a search of ``text`` reads: the text once with the
        automaton, once per entry without."""
        return len(text) * (1 if self._folded is None else max(1, len(self.entries)))

    def terms_for(self, text: str) -> Entries:
        """The entries whose source term occurs in ``text`` (case-insensitively), in the
        glossary's order."""
        lowered = text.casefold()
        if self._folded is not None:
            return tuple(e for e, f in zip(self.entries, self._folded, strict=True) if f in lowered)
        found = set(self._always)
        if self._automaton is not None:
            for _, indices in self._automaton.iter(lowered):
                found.update(indices)
        return tuple(self.entries[i] for i in sorted(found))


def terms_for(text: str, entries: Entries) -> Entries:
    """The entries whose source term occurs in ``text`` (case-insensitively): one search,
    e.g. a whole document's text against the glossary sent with it."""
    return TermIndex(entries).terms_for(text)


def as_entries(terms: Entries) -> list[GlossaryEntry]:
    """Terms as an item's glossary entries (not validated again: the store checked the
    terms, and a text may hold more than the inline limit)."""
    return [GlossaryEntry.model_construct(source=s, target=t) for s, t in terms]


async def index_async(entries: Entries) -> TermIndex:
    """``TermIndex(entries)``, in a worker thread for a large glossary."""
    return await sized(len(entries), INDEX_INLINE_ENTRIES, TermIndex, entries)


async def glossary_for_async(text: str, index: TermIndex) -> list[GlossaryEntry]:
    """The entries ``text`` needs as an item's glossary, each step in a worker thread when
    its input is large: the search for a long text (or any text against a glossary searched
    term by term: 10,000 terms of 1,024 characters against 20,000 characters, ~30 ms),
    the entries' build for many terms (3,500 of them took 0.1 s)."""
    terms = await sized(index.reads(text), SEARCH_INLINE_CHARS, index.terms_for, text)
    return await sized(len(terms), BUILD_INLINE_TERMS, as_entries, terms)


class IndexCache:
    """The indexes of the glossary pairs in use, least recently used dropped first once
    their estimated bytes pass ``max_bytes`` (one larger than that alone is still kept)."""

    def __init__(self, max_bytes: int = 256 * 2**20) -> None:
        self.max_bytes = max_bytes
        self._indexes: OrderedDict[Hashable, TermIndex] = OrderedDict()
        self._held = 0

    def get(self, key: Hashable) -> TermIndex | None:
        index = self._indexes.get(key)
        if index is not None:
            self._indexes.move_to_end(key)
        return index

    def put(self, key: Hashable, index: TermIndex) -> None:
        if (old := self._indexes.pop(key, None)) is not None:
            self._held -= old.size
        self._indexes[key] = index
        self._held += index.size
        while self._held > self.max_bytes and len(self._indexes) > 1:
            _, dropped = self._indexes.popitem(last=False)
            self._held -= dropped.size

    def __len__(self) -> int:
        return len(self._indexes)
