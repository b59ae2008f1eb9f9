"""core.glossary_terms: the term index finds exactly the entries that one substring search per
entry finds (the rule it replaced), in the glossary's order, and the cache stays bounded."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest

from serve_app.core import glossary_terms
from serve_app.core.glossary_terms import (
    Entries,
    IndexCache,
    TermIndex,
    glossary_for_async,
    terms_for,
)

pytestmark = pytest.mark.unit

ALPHABET = "abcAB ßSsİiıΣσς-"


def naive(text: str, entries: Entries) -> Entries:
    lowered = text.casefold()
    return tuple((s, t) for s, t in entries if s.casefold() in lowered)


def test_the_index_finds_what_one_search_per_entry_finds() -> None:
    """Random short terms over a small alphabet (overlapping, nested, repeated, differing
    only in case, with characters whose case folding changes their length: ß, İ, Σ)."""
    rng = random.Random(7)
    for _ in range(300):
        entries = tuple(
            ("".join(rng.choices(ALPHABET, k=rng.randint(1, 4))), f"t{i}")
            for i in range(rng.randint(1, 40))
        )
        text = "".join(rng.choices(ALPHABET, k=rng.randint(0, 60)))
        assert TermIndex(entries).terms_for(text) == naive(text, entries), (text, entries)


def test_order_duplicates_and_an_empty_term() -> None:
    entries = (("Straße", "street"), ("", "always"), ("CART", "a"), ("cart", "b"), ("x", "y"))
    index = TermIndex(entries)
    assert index.terms_for("Your cart on the STRASSE") == (
        ("Straße", "street"),
        ("", "always"),
        ("CART", "a"),
        ("cart", "b"),
    )
    assert index.terms_for("") == (("", "always"),)
    assert TermIndex(()).terms_for("anything") == ()
    assert terms_for("one x", entries) == (("", "always"), ("x", "y"))


def test_a_glossary_of_the_stores_size_is_searched_by_its_automaton() -> None:
    """10,000 entries against a 20,000-character text (one search per entry took 79 ms,
    the automaton ~1 ms: ``bench/glossary_terms.py`` measures it) give the same answer."""
    rng = random.Random(3)
    words = ["".join(rng.choices("abcdefghij", k=rng.randint(5, 10))) for _ in range(10_000)]
    entries = tuple((w, w.upper()) for w in words)
    text = " ".join(rng.choice(words) if rng.random() < 0.2 else "zzz" for _ in range(3_000))
    index = TermIndex(entries)
    assert index._automaton is not None
    assert index._folded is None
    assert index.terms_for(text) == naive(text, entries)


def test_a_glossary_too_large_for_an_automaton_is_searched_term_by_term(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An automaton takes ~40 bytes per source-term character (10,000 terms of 1,024
    characters: 390 MB): beyond ``AUTOMATON_MAX_CHARS`` the terms are searched one by one,
    with the same answers, and the index's size counts characters, not an automaton."""
    rng = random.Random(11)
    entries = tuple(
        ("".join(rng.choices(ALPHABET, k=rng.randint(1, 4))), f"t{i}") for i in range(60)
    )
    automaton = TermIndex(entries)
    monkeypatch.setattr(glossary_terms, "AUTOMATON_MAX_CHARS", 10)
    scanned = TermIndex(entries)
    assert scanned.size < automaton.size
    for _ in range(100):
        text = "".join(rng.choices(ALPHABET, k=rng.randint(0, 60)))
        assert scanned.terms_for(text) == automaton.terms_for(text) == naive(text, entries)


def test_the_cache_keeps_the_recent_indexes_within_its_byte_budget() -> None:
    one, two, three = (TermIndex(((f"{n}a", "b"), (f"{n}c", "d"))) for n in "xyz")
    cache = IndexCache(max_bytes=one.size + two.size + 1)
    cache.put("one", one)
    cache.put("two", two)
    assert cache.get("one") is one  # now the most recent
    cache.put("three", three)
    assert (cache.get("two"), cache.get("one") is one, len(cache)) == (None, True, 2)
    huge = TermIndex(tuple((f"term{i}", "t") for i in range(100)))
    cache.put("huge", huge)  # alone over the budget: kept, the others dropped
    assert (cache.get("huge") is huge, len(cache)) == (True, 1)


async def test_long_texts_and_many_terms_leave_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The search of a long text and the build of many terms' entries run in a worker
    thread; a short text with a few terms stays on the loop (a thread hop costs more)."""
    monkeypatch.setattr(glossary_terms, "SEARCH_INLINE_CHARS", 50)
    monkeypatch.setattr(glossary_terms, "BUILD_INLINE_TERMS", 2)
    threads: list[int] = []
    build = glossary_terms.as_entries

    def recorded(terms: Entries) -> list[glossary_terms.GlossaryEntry]:
        threads.append(threading.get_ident())
        return build(terms)

    monkeypatch.setattr(glossary_terms, "as_entries", recorded)
    index = TermIndex((("a", "1"), ("b", "2"), ("c", "3")))
    loop = threading.get_ident()
    assert [e.target for e in await glossary_for_async("a b", index)] == ["1", "2"]
    assert [e.target for e in await glossary_for_async("a b c", index)] == ["1", "2", "3"]
    assert threads[0] == loop
    assert threads[1] != loop
    search = asyncio.to_thread  # the long text's search: off the loop too
    calls: list[str] = []

    async def to_thread(fn, *args):  # type: ignore[no-untyped-def]
        calls.append(getattr(fn, "__name__", ""))
        return await search(fn, *args)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    await glossary_for_async("a" * 100, index)
    assert calls[0] == "terms_for"


async def test_a_glossary_searched_term_by_term_leaves_the_loop_sooner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without an automaton a search reads the text once per entry: a short text against
    many entries is already a long search (10,000 terms of 1,024 characters against 20,000
    characters held a thread ~30 ms), so it runs in a worker thread."""
    entries = tuple((f"term{i}", f"t{i}") for i in range(30))
    monkeypatch.setattr(glossary_terms, "SEARCH_INLINE_CHARS", 50)
    automaton = TermIndex(entries)
    monkeypatch.setattr(glossary_terms, "AUTOMATON_MAX_CHARS", 10)
    scanned = TermIndex(entries)
    text = "a term7"
    assert (automaton.reads(text), scanned.reads(text)) == (7, 210)
    calls: list[str] = []
    search = asyncio.to_thread

    async def to_thread(fn, *args):  # type: ignore[no-untyped-def]
        calls.append(getattr(fn, "__name__", ""))
        return await search(fn, *args)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    assert [e.target for e in await glossary_for_async(text, automaton)] == ["t7"]
    assert calls == []
    assert [e.target for e in await glossary_for_async(text, scanned)] == ["t7"]
    assert calls == ["terms_for"]
