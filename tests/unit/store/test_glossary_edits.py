"""Editing stored glossaries (DeepL v3's PATCH, PUT and DELETE of dictionaries): merged or
replaced entries, added and removed pairs, renames, the limits after the edit, and the
revision every edit raises; on both backends."""

from __future__ import annotations

import pytest

from serve_app.core.errors import (
    GlossaryNotFound,
    GlossaryTooLarge,
    InvalidGlossary,
    InvalidRequest,
    LimitReached,
)
from serve_app.store import Glossary, GlossaryDictionary, Store
from serve_app.store.sql.glossaries import merged
from tests.unit.store.conftest import LIMITS

pytestmark = pytest.mark.unit

EN_DE = (("cart", "Warenkorb"), ("checkout", "Kasse"), ("price", "Preis"))


async def _shop(store: Store, owner: str = "k1") -> Glossary:
    return await store.create_glossary(owner, "shop", [GlossaryDictionary("en", "de", EN_DE)])


def _pairs(g: Glossary) -> list[tuple[str, str, int]]:
    return [(d.source_lang, d.target_lang, d.entry_count) for d in g.dictionaries]


async def test_a_merge_replaces_a_given_terms_target_in_place_and_appends_new_ones(
    store: Store,
) -> None:
    g = await _shop(store)
    edit = GlossaryDictionary("EN", "de", ((" checkout ", "Zur Kasse"), ("tax", "Steuer")))
    after = await store.update_glossary("k1", g.id, None, [edit], merge=True)
    assert (after.name, after.created_at, after.revision) == ("shop", g.created_at, 1)
    assert _pairs(after) == [("en", "de", 4)]
    assert await store.glossary_entries("k1", g.id, "en", "de") == (
        ("cart", "Warenkorb"),
        ("checkout", "Zur Kasse"),
        ("price", "Preis"),
        ("tax", "Steuer"),
    )
    assert await store.get_glossary("k1", g.id) == after


async def test_a_replace_keeps_only_the_new_entries_and_other_pairs_stay(store: Store) -> None:
    g = await store.create_glossary(
        "k1",
        "multi",
        [
            GlossaryDictionary("en", "de", EN_DE),
            GlossaryDictionary("en", "fr", (("cart", "panier"),)),
        ],
    )
    edit = GlossaryDictionary("en", "de", (("basket", "Korb"),))
    after = await store.update_glossary("k1", g.id, None, [edit], merge=False)
    assert _pairs(after) == [("en", "de", 1), ("en", "fr", 1)]
    assert await store.glossary_entries("k1", g.id, "en", "de") == (("basket", "Korb"),)
    assert await store.glossary_entries("k1", g.id, "en", "fr") == (("cart", "panier"),)


async def test_a_pair_the_glossary_lacks_is_added_and_a_rename_alone_keeps_the_entries(
    store: Store,
) -> None:
    g = await _shop(store)
    added = GlossaryDictionary("de", "en", (("Warenkorb", "cart"),))
    after = await store.update_glossary("k1", g.id, None, [added], merge=True)
    assert _pairs(after) == [("de", "en", 1), ("en", "de", 3)]
    renamed = await store.update_glossary("k1", g.id, "  shop v2 ", [], merge=True)
    assert (renamed.name, renamed.revision, _pairs(renamed)) == ("shop v2", 2, _pairs(after))
    assert await store.glossary_entries("k1", g.id, "en", "de") == EN_DE


async def test_a_removed_pair_is_gone_and_the_last_one_leaves_an_empty_glossary(
    store: Store,
) -> None:
    g = await store.create_glossary(
        "k1",
        "two",
        [
            GlossaryDictionary("en", "de", EN_DE),
            GlossaryDictionary("de", "en", (("Preis", "price"),)),
        ],
    )
    after = await store.delete_glossary_dictionary("k1", g.id, "DE", "en")
    assert (_pairs(after), after.revision) == ([("en", "de", 3)], 1)
    with pytest.raises(GlossaryNotFound, match="de->en"):
        await store.glossary_entries("k1", g.id, "de", "en")
    with pytest.raises(GlossaryNotFound, match="de->en"):
        await store.delete_glossary_dictionary("k1", g.id, "de", "en")
    empty = await store.delete_glossary_dictionary("k1", g.id, "en", "de")
    assert (empty.dictionaries, empty.entry_count) == ((), 0)
    assert [x.id for x in await store.list_glossaries("k1")] == [g.id]
    again = await store.update_glossary(
        "k1", g.id, None, [GlossaryDictionary("en", "de", EN_DE)], True
    )
    assert _pairs(again) == [("en", "de", 3)]


async def test_edits_are_held_to_the_rules_of_a_new_glossary(store: Store) -> None:
    g = await _shop(store)
    dup = GlossaryDictionary("en", "de", (("a", "b"), ("a", "c")))
    with pytest.raises(InvalidGlossary, match="repeated"):
        await store.update_glossary("k1", g.id, None, [dup], merge=True)
    bad = GlossaryDictionary("en", "de", (("a\x00", "b"),))
    with pytest.raises(InvalidGlossary, match="control character"):
        await store.update_glossary("k1", g.id, None, [bad], merge=True)
    with pytest.raises(InvalidGlossary, match="no entries"):
        await store.update_glossary("k1", g.id, None, [GlossaryDictionary("en", "de", ())], False)
    with pytest.raises(InvalidRequest, match="empty"):
        await store.update_glossary("k1", g.id, " \u200b ", [], merge=True)
    # Nothing of a refused edit was written.
    assert (await store.get_glossary("k1", g.id)).revision == 0
    assert await store.glossary_entries("k1", g.id, "en", "de") == EN_DE


async def test_the_limits_hold_for_the_glossary_after_the_edit(store: Store) -> None:
    g = await _shop(store)
    terms = tuple((f"t{i}", f"u{i}") for i in range(LIMITS.max_glossary_entries - 3))
    full = await store.update_glossary(
        "k1", g.id, None, [GlossaryDictionary("en", "de", terms)], True
    )
    assert full.entry_count == LIMITS.max_glossary_entries
    one_more = GlossaryDictionary("en", "fr", (("x", "y"),))
    with pytest.raises(GlossaryTooLarge, match="would have 51 entries"):
        await store.update_glossary("k1", g.id, None, [one_more], merge=True)
    # A merge that only changes targets stays within the limit.
    same = GlossaryDictionary("en", "de", (("t0", "changed"),))
    assert (await store.update_glossary("k1", g.id, None, [same], True)).entry_count == 50
    # Pairs: the glossary's own limit and the owner's.
    shop = await store.update_glossary(
        "k1", g.id, None, [GlossaryDictionary("en", "de", EN_DE)], False
    )
    for target in ("fr", "it", "es", "nl"):
        shop = await store.update_glossary(
            "k1", g.id, None, [GlossaryDictionary("en", target, (("a", "b"),))], True
        )
    assert len(shop.dictionaries) == LIMITS.max_glossary_dictionaries
    with pytest.raises(GlossaryTooLarge, match="dictionaries"):
        await store.update_glossary(
            "k1", g.id, None, [GlossaryDictionary("en", "pl", (("a", "b"),))], True
        )
    other = await store.create_glossary("k2", "other", [GlossaryDictionary("en", "de", EN_DE)])
    for n, target in enumerate(("fr", "it")):
        await store.create_glossary(
            "k2", f"g{n}", [GlossaryDictionary("en", target, (("a", "b"),))]
        )
    with pytest.raises(LimitReached, match="dictionaries"):
        await store.update_glossary(
            "k2",
            other.id,
            None,
            [GlossaryDictionary("de", t, (("a", "b"),)) for t in ("fr", "it", "es")],
            merge=True,
        )


async def test_another_owners_or_an_unknown_glossary_is_not_found(store: Store) -> None:
    g = await _shop(store)
    edit = [GlossaryDictionary("en", "de", (("a", "b"),))]
    for owner, gid in (
        ("k2", g.id),
        ("k1", "00000000-0000-0000-0000-000000000000"),
        ("k1", "\x00"),
    ):
        with pytest.raises(GlossaryNotFound):
            await store.update_glossary(owner, gid, "x", edit, merge=True)
        with pytest.raises(GlossaryNotFound):
            await store.delete_glossary_dictionary(owner, gid, "en", "de")
    assert await store.glossary_entries("k1", g.id, "en", "de") == EN_DE


def test_merged_keeps_the_order_of_the_old_entries() -> None:
    old = (("b", "1"), ("a", "2"))
    assert merged(old, (("c", "3"), ("b", "9"))) == (("b", "9"), ("a", "2"), ("c", "3"))
    assert merged((), (("x", "y"),)) == (("x", "y"),)
