"""Stored glossaries through the real stack: `serve run` with the SQLite store's deployment,
two replicas of the tiny model on vLLM (CPU), two API keys; the official `deepl` client
(``Translator``'s v2 glossary API and ``DeepLClient``'s v3 multilingual one) creates, lists,
reads, edits, uses and deletes glossaries; the native API uses the same ids; each key sees only its
own; ``translate_document(..., glossary=...)`` uses one on a document job. Random weights: the
translations are not checked, only that the glossary reached every replica (the store) and
that errors come in each API's shape."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import deepl
import httpx
import pytest
from deepl.api_data import MultilingualGlossaryDictionaryEntries

from bench.ports import free_port
from serve_app.tools.launcher import derive_config
from tests import hostile
from tests.conftest import ROOT
from tests.e2e.conftest import serve_cluster
from tests.e2e.hostile_cases import generate
from tests.e2e.replicas import save_report
from tests.e2e.test_hostile_requests import send_all

KEY_A, KEY_B, KEY_C = "gloss-key-a", "gloss-key-b", "gloss-key-c"
TIMEOUT = 180


@pytest.fixture(scope="module")
def url(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port, gcs_port = free_port(), free_port()
    workdir = tmp_path_factory.mktemp("serve-glossaries")
    config = derive_config(
        ROOT / "serve_config.cpu.yaml",
        top={"http_options": {"port": port}},
        args={
            "engine": {"model": str(tiny_model_dir), "max_model_len": 2048},
            "prompt": {"family": "chat", "sampling": {"temperature": 0.0}},
            "limits": {
                "max_input_tokens": 512,
                "output_tokens_ratio": 0.5,
                "output_tokens_margin": 4,
            },
            "security": {"api_keys_env": "E2E_KEYS"},
            "store": {
                "url": f"sqlite:///{workdir}/store.db",
                "limits": {"max_glossary_entries": 20, "max_glossary_dictionaries": 12},
            },
        },
        runtime_env={
            "env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1", "E2E_KEYS": f"{KEY_A},{KEY_B},{KEY_C}"}
        },
        deployment={"num_replicas": 2},
    )
    with serve_cluster(config, workdir, replicas=2, ray_args=[f"--port={gcs_port}"]) as base:
        yield base


def translator(url: str, key: str = KEY_A) -> deepl.DeepLClient:
    return deepl.DeepLClient(key, server_url=url)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_deepl_client_glossary_round_trip(url: str) -> None:
    client = translator(url)
    pairs = {(p.source_lang, p.target_lang) for p in client.get_glossary_languages()}
    assert ("en", "de") in pairs
    entries = {"cart": "Warenkorb", "checkout": "Kasse"}
    glossary = client.create_glossary("shop", "EN", "DE", entries)
    assert (glossary.source_lang, glossary.target_lang, glossary.entry_count) == ("EN", "DE", 2)
    assert glossary.ready
    from_csv = client.create_glossary_from_csv("csv", "EN", "DE", "big,groß\nsmall,klein\n")
    assert from_csv.entry_count == 2
    assert {g.glossary_id for g in client.list_glossaries()} == {
        glossary.glossary_id,
        from_csv.glossary_id,
    }
    assert client.get_glossary(glossary.glossary_id).name == "shop"
    assert client.get_glossary_entries(glossary) == entries
    # Used on both replicas (the store serves every one): several calls spread over them.
    for _ in range(4):
        result = client.translate_text(
            ["Your cart", "checkout"], source_lang="EN", target_lang="DE", glossary=glossary
        )
        assert len(result) == 2
    client.delete_glossary(glossary)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_glossary(glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="not found"):
        client.translate_text("cart", source_lang="EN", target_lang="DE", glossary=glossary)


def test_deepl_client_bom_csv_and_glossary_ids(url: str) -> None:
    """A CSV saved with a byte order mark (Excel, Notepad) keeps its first term; the
    client's ``glossary_ids`` (several glossaries at once) is refused, not ignored."""
    client = translator(url)
    glossary = client.create_glossary_from_csv("bom", "EN", "DE", "\ufeffcart,Warenkorb\n")
    assert client.get_glossary_entries(glossary) == {"cart": "Warenkorb"}
    with pytest.raises(deepl.DeepLException, match="glossary_ids"):
        client.translate_text(
            "cart", source_lang="EN", target_lang="DE", glossary_ids=[glossary.glossary_id]
        )
    client.delete_glossary(glossary)


def test_deepl_client_multilingual_glossary(url: str) -> None:
    client = translator(url)
    dictionaries = [
        MultilingualGlossaryDictionaryEntries("EN", "DE", {"cart": "Warenkorb"}),
        MultilingualGlossaryDictionaryEntries("EN", "FR", {"cart": "panier"}),
    ]
    glossary = client.create_multilingual_glossary("multi", dictionaries)
    assert sorted((d.target_lang, d.entry_count) for d in glossary.dictionaries) == [
        ("DE", 1),
        ("FR", 1),
    ]
    found = client.get_multilingual_glossary_entries(glossary, "EN", "FR")
    assert found.dictionaries[0].entries == "cart\tpanier"
    result = client.translate_text("cart", source_lang="EN", target_lang="FR", glossary=glossary)
    assert isinstance(result.text, str)
    client.delete_multilingual_glossary(glossary)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_multilingual_glossary(glossary.glossary_id)


def test_deepl_client_edits_a_multilingual_glossary(url: str) -> None:
    """deepl-python's v3 edits (rename, merge a dictionary, replace one, delete one) reach
    the store's deployment from either replica; the native API edits the same glossary;
    another key cannot."""
    client = translator(url)
    en_de = MultilingualGlossaryDictionaryEntries("EN", "DE", {"cart": "Warenkorb"})
    glossary = client.create_multilingual_glossary("to edit", [en_de])
    assert client.update_multilingual_glossary_name(glossary, "edited").name == "edited"
    merge = MultilingualGlossaryDictionaryEntries("EN", "DE", {"cart": "Korb", "tax": "Steuer"})
    merged = client.update_multilingual_glossary_dictionary(glossary, merge)
    assert [(d.target_lang, d.entry_count) for d in merged.dictionaries] == [("DE", 2)]
    found = client.get_multilingual_glossary_entries(glossary, "EN", "DE")
    assert found.dictionaries[0].entries == "cart\tKorb\ntax\tSteuer"
    en_fr = MultilingualGlossaryDictionaryEntries("EN", "FR", {"cart": "panier"})
    info = client.replace_multilingual_glossary_dictionary(glossary, en_fr)
    assert (info.source_lang, info.target_lang, info.entry_count) == ("EN", "FR", 1)
    # By id: the client checks a glossary object's own (now old) list of pairs itself.
    gid = glossary.glossary_id
    for _ in range(4):  # both replicas read the edited glossary
        result = client.translate_text("cart", source_lang="EN", target_lang="FR", glossary=gid)
        assert isinstance(result.text, str)
    client.delete_multilingual_glossary_dictionary(glossary, source_lang="EN", target_lang="FR")
    with pytest.raises(deepl.DeepLException, match="en->fr"):
        client.translate_text("cart", source_lang="EN", target_lang="FR", glossary=gid)
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator(url, KEY_B).update_multilingual_glossary_name(glossary, "theirs")
    edit = {"mode": "replace", "dictionaries": [{"source_lang": "en", "target_lang": "de",
                                                 "entries": "basket\tKorb"}]}  # fmt: skip
    r = httpx.patch(f"{url}/glossaries/{gid}", json=edit, headers=bearer(KEY_A), timeout=60)
    assert (r.status_code, r.json()["entry_count"]) == (200, 1), r.text
    assert client.get_multilingual_glossary(gid).name == "edited"
    client.delete_multilingual_glossary(glossary)


def test_native_api_shares_the_ids_and_keeps_keys_apart(url: str) -> None:
    body = {
        "name": "native",
        "dictionaries": [{"source_lang": "en", "target_lang": "de", "entries": "cart\tWarenkorb"}],
    }
    created = httpx.post(f"{url}/glossaries", json=body, headers=bearer(KEY_A), timeout=60)
    assert created.status_code == 201, created.text
    gid = created.json()["id"]
    assert translator(url).get_glossary(gid).entry_count == 1  # the same store behind both APIs
    item = {"text": "my cart", "source_lang": "en", "target_lang": "de", "glossary_id": gid}
    ok = httpx.post(f"{url}/translate", json=item, headers=bearer(KEY_A), timeout=TIMEOUT)
    assert ok.status_code == 200, ok.text
    libre = {"q": "my cart", "source": "en", "target": "de", "glossary_id": gid, "api_key": KEY_A}
    assert httpx.post(f"{url}/libretranslate/translate", json=libre, timeout=TIMEOUT).is_success
    # Another key: nothing to see, and its requests naming the id are 404 in each shape.
    assert translator(url, KEY_B).list_glossaries() == []
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator(url, KEY_B).get_glossary(gid)
    other = httpx.post(f"{url}/translate", json=item, headers=bearer(KEY_B), timeout=60)
    assert (other.status_code, other.json()["error"]["code"]) == (404, "glossary_not_found")
    too_big = {**body, "dictionaries": [{**body["dictionaries"][0],
               "entries": "\n".join(f"t{i}\tu{i}" for i in range(21))}]}  # fmt: skip
    refused = httpx.post(f"{url}/glossaries", json=too_big, headers=bearer(KEY_A), timeout=60)
    assert refused.status_code == 413
    with pytest.raises(deepl.DeepLException, match="at most 20"):
        translator(url).create_glossary("big", "EN", "DE", {f"t{i}": "u" for i in range(21)})
    deleted = httpx.delete(f"{url}/glossaries/{gid}", headers=bearer(KEY_A), timeout=60)
    assert deleted.status_code == 204


def test_deepl_client_translates_a_document_with_a_glossary(url: str, tmp_path: Path) -> None:
    client = translator(url)
    glossary = client.create_glossary("docs", "EN", "DE", {"cart": "Warenkorb"})
    source, out = tmp_path / "shop.txt", tmp_path / "shop.de.txt"
    source.write_text("Your cart is full.\n\nGo to the checkout.\n", encoding="utf-8")
    status = client.translate_document_from_filepath(
        source, out, source_lang="EN", target_lang="DE", glossary=glossary
    )
    assert status.done
    assert status.billed_characters > 0
    assert out.read_text(encoding="utf-8").strip()
    # The job keeps the glossary's terms: deleting the glossary after the upload changes
    # nothing (native upload, so its status can be read with the glossary's id).
    files = {"file": ("shop.txt", source.read_bytes(), "text/plain")}
    form = {"target_lang": "de", "source_lang": "en", "glossary_id": glossary.glossary_id}
    up = httpx.post(f"{url}/documents", files=files, data=form, headers=bearer(KEY_A), timeout=60)
    assert up.status_code == 201, up.text
    client.delete_glossary(glossary)
    doc = up.json()["id"]
    for _ in range(TIMEOUT):
        job = httpx.get(f"{url}/documents/{doc}", headers=bearer(KEY_A), timeout=60).json()
        if job["status"] in ("done", "error"):
            break
        time.sleep(1)
    assert (job["status"], job["glossary_id"]) == ("done", glossary.glossary_id), job


def test_document_glossary_errors_in_deepls_shape(url: str) -> None:
    client = translator(url)
    glossary = client.create_glossary("doc errors", "EN", "DE", {"cart": "Warenkorb"})
    data = b"Your cart is full."
    upload = functools.partial(client.translate_document_upload, data, filename="a.txt")
    with pytest.raises(deepl.DeepLException, match="en->fr"):  # the pair must match
        upload(target_lang="FR", source_lang="EN", glossary=glossary.glossary_id)
    with pytest.raises(deepl.DeepLException, match="'glossary_id' not supported"):
        upload(target_lang="DE", source_lang="EN", glossary="no-such-glossary")  # no UUID
    with pytest.raises(deepl.DeepLException, match="not found"):
        upload(target_lang="DE", source_lang="EN", glossary="00000000-0000-4000-8000-000000000000")
    other_key, gid = translator(url, KEY_B), glossary.glossary_id
    with pytest.raises(deepl.DeepLException, match="not found"):  # another key's glossary
        other_key.translate_document_upload(
            data, filename="a.txt", target_lang="DE", source_lang="EN", glossary=gid
        )
    # deepl-python asks for source_lang itself; the server too, for other clients.
    files = {"file": ("a.txt", data, "text/plain")}
    form = {"target_lang": "DE", "glossary_id": glossary.glossary_id}
    auth = {"Authorization": f"DeepL-Auth-Key {KEY_A}"}
    r = httpx.post(f"{url}/v2/document", files=files, data=form, headers=auth, timeout=60)
    assert r.status_code == 400
    assert "source_lang" in r.json()["message"]
    client.delete_glossary(glossary)


# -- hostile input on the store's routes (last: it leaves glossaries and jobs behind) ------

STORE_CASES = 400
STORE_UTF8_CASES = 100


def keyed(route: hostile.Route) -> hostile.Route:
    """``route`` with a valid key of this cluster, sent the API's own way (the fuzzing then
    reaches the routes, not only the key check)."""
    if route.api == "deepl":
        return replace(route, headers={"Authorization": f"DeepL-Auth-Key {KEY_B}"})
    if route.api == "libre":
        return replace(route, fields={**route.fields, "api_key": KEY_B})
    return replace(route, headers={**route.headers, **bearer(KEY_B)})


def _dictionaries(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"source_lang": s, "target_lang": t, "entries": "a\tb"} for s, t in pairs]


def test_a_keys_dictionaries_are_bounded_through_the_proxy(url: str) -> None:
    """store.limits.max_glossary_dictionaries (12 here, under the 20 entries a glossary may
    hold): one glossary over it is a 413, and glossaries that pass it together a 403, each in
    its API's shape (every glossary list answers all of a key's dictionaries)."""
    pairs = sorted(
        {(p.source_lang, p.target_lang) for p in translator(url).get_glossary_languages()}
    )
    assert len(pairs) > 13
    wide = {"name": "wide", "dictionaries": _dictionaries(pairs[:13])}
    refused = httpx.post(f"{url}/glossaries", json=wide, headers=bearer(KEY_C), timeout=60)
    assert refused.status_code == 413, refused.text
    assert refused.json()["error"]["code"] == "glossary_too_large"
    half = {"name": "half", "dictionaries": _dictionaries(pairs[:8])}
    created = httpx.post(f"{url}/glossaries", json=half, headers=bearer(KEY_C), timeout=60)
    assert created.status_code == 201, created.text
    deepl_key = {"Authorization": f"DeepL-Auth-Key {KEY_C}"}
    more = httpx.post(f"{url}/v3/glossaries", json=half, headers=deepl_key, timeout=60)
    assert more.status_code == 403, more.text
    assert "at most 12" in more.json()["message"]
    gid = created.json()["id"]
    assert httpx.delete(f"{url}/glossaries/{gid}", headers=bearer(KEY_C), timeout=60).is_success


def _real_ids(url: str) -> dict[str, str]:
    """A glossary and a translated document of ``KEY_B`` (the fuzzed cases' key), by the
    absent ids they stand in for."""
    glossary = {"name": "real", "dictionaries": [hostile.DICTIONARY]}
    made = httpx.post(f"{url}/glossaries", json=glossary, headers=bearer(KEY_B), timeout=60)
    assert made.status_code == 201, made.text
    client = translator(url, KEY_B)
    handle = client.translate_document_upload(b"Hello world.\n", target_lang="DE", filename="a.txt")
    for _ in range(TIMEOUT):
        if client.translate_document_get_status(handle).done:
            break
        time.sleep(1)
    return {
        hostile.GLOSSARY: made.json()["id"],
        hostile.DOCUMENT: handle.document_id,
        hostile.DOCUMENT_KEY: handle.document_key,
    }


def test_hostile_requests_to_glossary_and_document_routes_get_no_5xx(url: str) -> None:
    # The shared hostile-request cluster has no store: glossary and document routes (uploads
    # included) are fuzzed here, through the proxy, the store's deployment and the workers.
    # Cases marked ``real`` name a glossary and a translated document of the key instead
    # of ids no store made; they go after the others, their deletions last.
    routes = tuple(keyed(r) for r in hostile.STORE_ROUTES)
    cases = generate(STORE_CASES, routes)  # drawn in a fresh interpreter: the same every run
    cases += generate(STORE_UTF8_CASES, routes, utf8=True)
    ids = _real_ids(url)
    real = [hostile.with_ids(c, ids) for c in cases if c.real]
    real.sort(key=lambda c: c.route.method == "DELETE")
    absent = [c for c in cases if not c.real]
    answered = asyncio.run(send_all(url, absent))  # checks each answer's status and shape
    answered_real = asyncio.run(send_all(url, real))
    answered += answered_real
    statuses = Counter(status for _, status in answered)
    real_statuses = Counter(status for _, status in answered_real)
    report = {
        "cases": len(answered),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "real_id_statuses": {str(k): v for k, v in sorted(real_statuses.items())},
        "routes": dict(Counter(c.route.path for c, _ in answered)),
    }
    save_report("hostile_store_requests", report)
    assert len(answered) == STORE_CASES + STORE_UTF8_CASES
    assert sum(v for s, v in real_statuses.items() if s < 300) > 0, report  # real rows reached
    assert sum(v for s, v in statuses.items() if s < 300) > 0, report  # the keys got through
    assert not [s for s in statuses if s >= 500 and s not in (503, 504)], report
    for _ in range(4):
        assert httpx.get(f"{url}/readyz", timeout=30).status_code == 200
    glossaries = httpx.get(f"{url}/glossaries", headers=bearer(KEY_B), timeout=30)
    assert glossaries.status_code == 200, glossaries.text
