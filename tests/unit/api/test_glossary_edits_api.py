"""Editing stored glossaries through the app (fake engine echoing the prompt, SQLite store):
the native ``PATCH /glossaries/{id}`` and ``DELETE /glossaries/{id}/dictionaries``, DeepL's
v3 ``PATCH``, ``PUT .../dictionaries`` and ``DELETE .../dictionaries`` as deepl-python's
``DeepLClient`` sends them, each API's error shape, and that an edit reaches the next
translation at once (the replica's cached term index is keyed on the glossary's revision)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from serve_app.store.apikeys import digest
from serve_app.store.sqlite import open_sqlite
from tests.unit.api.test_glossaries_api import DEEPL_A, LIMITS, A, B, client_for, create

pytestmark = pytest.mark.unit

DEEPL_B = {"Authorization": "DeepL-Auth-Key sk-b"}


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = await open_sqlite(str(tmp_path / "s.db"), LIMITS)
    await store.create_key("a", digest("sk-a"))
    await store.create_key("b", digest("sk-b"))
    async with await client_for(store) as c:
        yield c
    await store.close()


async def _translated(api: httpx.AsyncClient, gid: str, text: str, target: str = "de") -> str:
    item = {"text": text, "source_lang": "en", "target_lang": target, "glossary_id": gid}
    r = await api.post("/translate", json=item, headers=A)
    assert r.status_code == 200, r.text
    return str(r.json()["translation"])


async def test_native_merge_and_replace_reach_the_next_translation(
    api: httpx.AsyncClient,
) -> None:
    g = await create(api)
    assert "cart -> Warenkorb" in await _translated(api, g["id"], "my cart")  # now cached
    edit = {"dictionaries": [{"source_lang": "en", "target_lang": "de",
                              "entries": [{"source": "cart", "target": "Einkaufswagen"},
                                          {"source": "tax", "target": "Steuer"}]}]}  # fmt: skip
    r = await api.patch(f"/glossaries/{g['id']}", json=edit, headers=A)
    assert r.status_code == 200, r.text
    assert (r.json()["entry_count"], r.json()["created_at"]) == (4, g["created_at"])
    after = await _translated(api, g["id"], "my cart and tax")
    assert "cart -> Einkaufswagen" in after
    assert "tax -> Steuer" in after
    assert "Warenkorb" not in after
    entries = (await api.get(f"/glossaries/{g['id']}/entries", headers=A)).json()["entries"]
    assert [e["source"] for e in entries] == ["cart", "checkout", "wishlist", "tax"]
    replace = {"mode": "replace", "name": "shop v2",
               "dictionaries": [{"source_lang": "EN", "target_lang": "DE",
                                 "entries": "basket\tKorb"}]}  # fmt: skip
    r = await api.patch(f"/glossaries/{g['id']}", json=replace, headers=A)
    assert (r.json()["name"], r.json()["entry_count"]) == ("shop v2", 1)
    assert "Einkaufswagen" not in await _translated(api, g["id"], "my cart")


async def test_native_pairs_are_added_and_removed(api: httpx.AsyncClient) -> None:
    g = await create(api)
    fr = {"dictionaries": [{"source_lang": "en", "target_lang": "fr", "entries": "cart\tpanier"}]}
    r = await api.patch(f"/glossaries/{g['id']}", json=fr, headers=A)
    assert [d["target_lang"] for d in r.json()["dictionaries"]] == ["de", "fr"]
    assert "cart -> panier" in await _translated(api, g["id"], "cart", "fr")
    url = f"/glossaries/{g['id']}/dictionaries"
    r = await api.delete(url, params={"source_lang": "en-US", "target_lang": "fr"}, headers=A)
    assert r.status_code == 200, r.text
    assert [d["target_lang"] for d in r.json()["dictionaries"]] == ["de"]
    gone = {"text": "cart", "source_lang": "en", "target_lang": "fr", "glossary_id": g["id"]}
    r = await api.post("/translate", json=gone, headers=A)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_glossary")
    r = await api.delete(url, params={"source_lang": "en", "target_lang": "fr"}, headers=A)
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_glossary")
    r = await api.delete(url, params={"source_lang": " ", "target_lang": ""}, headers=A)
    assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_request")
    r = await api.delete(url, params={"source_lang": "en", "target_lang": "de"}, headers=A)
    assert (r.json()["dictionaries"], r.json()["entry_count"]) == ([], 0)


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({}, 422, "invalid_request"),
        ({"name": "x", "mode": "append"}, 422, "invalid_request"),
        ({"name": "x", "extra": 1}, 422, "invalid_request"),
        ({"name": " "}, 422, "invalid_request"),
        (
            {"dictionaries": [{"source_lang": "en", "target_lang": "de", "entries": "a\tb\na\tc"}]},
            400,
            "invalid_glossary",
        ),
        (
            {"dictionaries": [{"source_lang": "en", "target_lang": "xx", "entries": "a\tb"}]},
            400,
            None,
        ),
        (
            {
                "dictionaries": [
                    {
                        "source_lang": "en",
                        "target_lang": "de",
                        "entries": "\n".join(f"t{i}\tu{i}" for i in range(3)),
                    }
                ]
            },
            413,
            "glossary_too_large",
        ),
    ],
)
async def test_native_edits_refused_in_the_native_shape(
    api: httpx.AsyncClient, body: dict[str, Any], status: int, code: str | None
) -> None:
    g = await create(api)  # 3 entries of the 5 allowed
    r = await api.patch(f"/glossaries/{g['id']}", json=body, headers=A)
    assert r.status_code == status, r.text
    if code:
        assert r.json()["error"]["code"] == code
    assert (await api.get(f"/glossaries/{g['id']}", headers=A)).json() == g


async def test_another_keys_glossary_cannot_be_edited(api: httpx.AsyncClient) -> None:
    g = await create(api)
    name = {"name": "mine now"}
    assert (await api.patch(f"/glossaries/{g['id']}", json=name, headers=B)).status_code == 404
    pair = {"source_lang": "en", "target_lang": "de"}
    url = f"/glossaries/{g['id']}/dictionaries"
    assert (await api.delete(url, params=pair, headers=B)).status_code == 404
    v3 = f"/v3/glossaries/{g['id']}"
    assert (await api.patch(v3, json=name, headers=DEEPL_B)).status_code == 404
    assert (await api.delete(v3 + "/dictionaries", params=pair, headers=DEEPL_B)).status_code == 404
    assert (await api.get(f"/glossaries/{g['id']}", headers=A)).json() == g


def _v3_dictionary(target: str, entries: str) -> dict[str, str]:
    return {"source_lang": "EN", "target_lang": target, "entries": entries, "entries_format": "tsv"}


async def test_deepl_v3_edits_as_deepl_python_sends_them(api: httpx.AsyncClient) -> None:
    """The requests of ``update_multilingual_glossary_name``,
    ``update_multilingual_glossary_dictionary``, ``replace_multilingual_glossary_dictionary``
    and ``delete_multilingual_glossary_dictionary`` (deepl 1.32, ``deepl_client.py``)."""
    body = {"name": "multi", "dictionaries": [_v3_dictionary("DE", "cart\tWarenkorb")]}
    g = (await api.post("/v3/glossaries", json=body, headers=DEEPL_A)).json()
    url = f"/v3/glossaries/{g['glossary_id']}"
    r = await api.patch(url, json={"name": "renamed"}, headers=DEEPL_A)
    assert r.status_code == 200, r.text
    assert (r.json()["name"], r.json()["creation_time"]) == ("renamed", g["creation_time"])
    merge = {"dictionaries": [_v3_dictionary("DE", "cart\tEinkaufswagen\ntax\tSteuer")]}
    r = await api.patch(url, json=merge, headers=DEEPL_A)
    assert r.json()["dictionaries"] == [
        {"source_lang": "EN", "target_lang": "DE", "entry_count": 2}
    ]
    put = _v3_dictionary("FR", "cart\tpanier")
    r = await api.put(url + "/dictionaries", json=put, headers=DEEPL_A)
    assert (r.status_code, r.json()) == (
        200,
        {"source_lang": "EN", "target_lang": "FR", "entry_count": 1},
    )
    r = await api.put(
        url + "/dictionaries", json=_v3_dictionary("DE", "tax\tAbgabe"), headers=DEEPL_A
    )
    assert r.json()["entry_count"] == 1
    entries = await api.get(
        url + "/entries", params={"source_lang": "EN", "target_lang": "DE"}, headers=DEEPL_A
    )
    assert entries.json()["dictionaries"][0]["entries"] == "tax\tAbgabe"
    text = {
        "text": ["tax"],
        "source_lang": "EN",
        "target_lang": "DE",
        "glossary_id": g["glossary_id"],
    }
    r = await api.post("/v2/translate", json=text, headers=DEEPL_A)
    assert "tax -> Abgabe" in r.json()["translations"][0]["text"]
    pair = "?source_lang=EN&target_lang=FR"
    assert (await api.delete(url + "/dictionaries" + pair, headers=DEEPL_A)).status_code == 204
    got = (await api.get(url, headers=DEEPL_A)).json()
    assert [d["target_lang"] for d in got["dictionaries"]] == ["DE"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("PATCH", "", {}, 400),
        ("PATCH", "", {"name": ""}, 400),
        ("PATCH", "", {"dictionaries": "cart"}, 400),
        ("PATCH", "", {"dictionaries": [_v3_dictionary("DE", "a\tb\na\tc")]}, 400),
        ("PATCH", "", {"dictionaries": [_v3_dictionary("XX", "a\tb")]}, 400),
        ("PUT", "/dictionaries", {"source_lang": "EN", "target_lang": "DE"}, 400),
        ("PUT", "/dictionaries", {**_v3_dictionary("DE", "a\tb"), "entries_format": "xml"}, 400),
        (
            "PUT",
            "/dictionaries",
            _v3_dictionary("DE", "\n".join(f"t{i}\tu" for i in range(6))),
            413,
        ),
        ("DELETE", "/dictionaries?source_lang=EN", None, 400),
        ("DELETE", "/dictionaries?source_lang=EN&target_lang=XX", None, 400),
        ("DELETE", "/dictionaries?source_lang=EN&target_lang=FR", None, 404),
    ],
)
async def test_deepl_v3_edit_errors_in_deepls_shape(
    api: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None, status: int
) -> None:
    created = {"name": "one", "dictionaries": [_v3_dictionary("DE", "cart\tWarenkorb")]}
    g = (await api.post("/v3/glossaries", json=created, headers=DEEPL_A)).json()
    url = f"/v3/glossaries/{g['glossary_id']}{path}"
    r = await api.request(method, url, json=body, headers=DEEPL_A)
    assert r.status_code == status, r.text
    assert set(r.json()) == {"message"}
    assert (await api.get(f"/v3/glossaries/{g['glossary_id']}", headers=DEEPL_A)).json() == g


async def test_deepl_v3_patch_edits_one_dictionary_at_a_time(api: httpx.AsyncClient) -> None:
    """DeepL's reference: ``dictionaries`` of a PATCH "only supports 0 or 1 dictionaries";
    two are refused whole (neither is merged), as deepl-mock refuses them."""
    created = {"name": "one", "dictionaries": [_v3_dictionary("DE", "cart\tWarenkorb")]}
    g = (await api.post("/v3/glossaries", json=created, headers=DEEPL_A)).json()
    two = [_v3_dictionary("DE", "tax\tSteuer"), _v3_dictionary("FR", "tax\timpôt")]
    r = await api.patch(
        f"/v3/glossaries/{g['glossary_id']}", json={"dictionaries": two}, headers=DEEPL_A
    )
    assert (r.status_code, r.json()) == (
        400,
        {"message": "Only one dictionary can be edited at a time."},
    )
    assert (await api.get(f"/v3/glossaries/{g['glossary_id']}", headers=DEEPL_A)).json() == g
