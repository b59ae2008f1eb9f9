"""Stored glossaries: CRUD per owner, limits and clear errors, on both backends."""

from __future__ import annotations

import pytest

from serve_app.core.errors import GlossaryNotFound, GlossaryTooLarge, InvalidGlossary, LimitReached
from serve_app.store import GlossaryDictionary, Store

pytestmark = pytest.mark.unit


def pair(source: str = "en", target: str = "de", n: int = 2) -> GlossaryDictionary:
    return GlossaryDictionary(
        source, target, tuple((f"term {i}", f"Begriff {i}") for i in range(n))
    )


async def test_created_glossary_reads_back_with_entries_in_order(store: Store) -> None:
    entries = (("zebra", "Zebra"), ("apple", "Apfel"), ("Ökonomie", "economy"))
    created = await store.create_glossary("k1", " Tech ", [GlossaryDictionary("EN", "de", entries)])
    assert created.name == "Tech"
    assert created.entry_count == 3
    got = await store.get_glossary("k1", created.id)
    assert got == created
    assert await store.glossary_entries("k1", created.id, "en", "DE") == entries


async def test_multilingual_glossary_keeps_each_pair(store: Store) -> None:
    created = await store.create_glossary("k1", "multi", [pair("en", "de", 2), pair("en", "fr", 3)])
    assert [(d.source_lang, d.target_lang, d.entry_count) for d in created.dictionaries] == [
        ("en", "de", 2),
        ("en", "fr", 3),
    ]
    assert len(await store.glossary_entries("k1", created.id, "en", "fr")) == 3
    with pytest.raises(GlossaryNotFound, match="en->it"):
        await store.glossary_entries("k1", created.id, "en", "it")


async def test_glossaries_never_leak_across_owners(store: Store) -> None:
    mine = await store.create_glossary("k1", "mine", [pair()])
    await store.create_glossary("k2", "theirs", [pair()])
    assert [g.name for g in await store.list_glossaries("k1")] == ["mine"]
    with pytest.raises(GlossaryNotFound):
        await store.get_glossary("k2", mine.id)
    with pytest.raises(GlossaryNotFound):
        await store.glossary_entries("k2", mine.id, "en", "de")
    with pytest.raises(GlossaryNotFound):
        await store.delete_glossary("k2", mine.id)
    assert (await store.get_glossary("k1", mine.id)).id == mine.id


async def test_deleted_glossary_is_gone_with_its_entries(store: Store) -> None:
    created = await store.create_glossary("k1", "g", [pair()])
    await store.delete_glossary("k1", created.id)
    with pytest.raises(GlossaryNotFound):
        await store.get_glossary("k1", created.id)
    with pytest.raises(GlossaryNotFound):
        await store.glossary_entries("k1", created.id, "en", "de")
    assert await store.list_glossaries("k1") == []


async def test_list_is_oldest_first(store: Store, clock: object) -> None:
    for name in ("a", "b", "c"):
        await store.create_glossary("k1", name, [pair()])
        clock.advance(1)  # type: ignore[attr-defined]
    assert [g.name for g in await store.list_glossaries("k1")] == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ((("", "x"),), "source term is empty"),
        ((("a", "   "),), "target term is empty"),
        ((("\u200b", "x"),), "source term is empty"),  # nothing visible: a zero-width space
        ((("a", "\ufeff\u200e "),), "target term is empty"),
        ((("a" * 41, "x"),), "41 characters long; at most 40"),
        ((("a\tb", "x"),), "control character U\\+0009"),
        ((("a", "b\x00"),), "control character U\\+0000"),
        ((("a", "\ud800"),), "control character U\\+D800"),
        ((("a", "x"), ("a ", "y")), "'a' is repeated"),
        ((), "has no entries"),
    ],
)
async def test_bad_entries_are_refused_with_a_clear_message(
    store: Store, entries: tuple[tuple[str, str], ...], message: str
) -> None:
    with pytest.raises(InvalidGlossary, match=message):
        await store.create_glossary("k1", "bad", [GlossaryDictionary("en", "de", entries)])
    assert await store.list_glossaries("k1") == []


async def test_bad_pairs_are_refused(store: Store) -> None:
    with pytest.raises(InvalidGlossary, match="both 'en'"):
        await store.create_glossary("k1", "g", [pair("en", "EN")])
    with pytest.raises(InvalidGlossary, match="more than once"):
        await store.create_glossary("k1", "g", [pair("en", "de"), pair("EN", "de")])
    with pytest.raises(InvalidGlossary, match="language code"):
        await store.create_glossary("k1", "g", [pair("e n", "de")])
    with pytest.raises(InvalidGlossary, match="at least one dictionary"):
        await store.create_glossary("k1", "g", [])


async def test_too_many_entries_is_413(store: Store) -> None:
    with pytest.raises(GlossaryTooLarge, match="51 entries; at most 50"):
        await store.create_glossary("k1", "big", [pair("en", "de", 30), pair("en", "fr", 21)])
    created = await store.create_glossary("k1", "max", [pair("en", "de", 50)])
    assert created.entry_count == 50


async def test_owner_glossary_count_is_bounded(store: Store) -> None:
    for n in range(3):
        await store.create_glossary("k1", f"g{n}", [pair()])
    with pytest.raises(LimitReached, match="3 glossaries"):
        await store.create_glossary("k1", "one more", [pair()])
    await store.create_glossary("k2", "another owner", [pair()])


async def test_the_dictionaries_of_an_owners_glossaries_are_bounded(store: Store) -> None:
    """A list of glossaries answers every dictionary of the owner's glossaries: 21
    glossaries of 3,906 language pairs held the event loop 1.3 s on ``GET /glossaries``."""
    targets = ["fr", "es", "it", "nl", "pl", "sv"]
    with pytest.raises(GlossaryTooLarge, match=r"6 dictionaries .* at most 5"):
        await store.create_glossary("k1", "wide", [pair("en", t, 1) for t in targets])
    await store.create_glossary("k1", "g1", [pair("en", t, 1) for t in targets[:3]])
    with pytest.raises(LimitReached, match=r"hold 3 dictionaries .* this one has 3"):
        await store.create_glossary("k1", "g2", [pair("en", t, 1) for t in targets[3:]])
    await store.create_glossary("k1", "g2", [pair("en", t, 1) for t in targets[3:5]])
    await store.create_glossary("k2", "another owner", [pair("en", t, 1) for t in targets[:5]])


async def test_unknown_ids_are_not_found(store: Store) -> None:
    with pytest.raises(GlossaryNotFound, match="not found"):
        await store.get_glossary("k1", "no-such-id")
    with pytest.raises(GlossaryNotFound):
        await store.delete_glossary("k1", "x" * 10_000)


@pytest.mark.parametrize("glossary_id", ["a\x00b", "\x00", "\ud800", "id\x1b"])
async def test_an_id_no_row_can_hold_is_not_found(store: Store, glossary_id: str) -> None:
    """A NUL or a lone surrogate (``/glossaries/%00``, a JSON ``"\\u0000"``) failed in
    PostgreSQL's driver (a 500): not found, as on SQLite."""
    with pytest.raises(GlossaryNotFound):
        await store.get_glossary("k1", glossary_id)
    with pytest.raises(GlossaryNotFound):
        await store.glossary_entries("k1", glossary_id, "en", "de")
    with pytest.raises(GlossaryNotFound):
        await store.glossary_entries("k1", "no-such-id", "en\x00", "de")
    with pytest.raises(GlossaryNotFound):
        await store.delete_glossary("k1", glossary_id)
