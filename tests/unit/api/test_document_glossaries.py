"""glossary_id on the document routes (fake engine, SQLite store, stored keys): native
/documents, DeepL's /v2/document (v2 and v3 glossaries) and LibreTranslate's /translate_file
resolve the caller's glossary at upload, keep its terms with the job, and every segment's
prompt gets the terms its text holds, even after the glossary is deleted; the refusals are
each API's own 4xx and store nothing."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from serve_app.api.app import create_app
from serve_app.core import glossary_terms
from serve_app.core.config import AppConfig
from serve_app.core.documents_config import DocumentsConfig
from serve_app.core.glossary_terms import Entries, as_entries
from serve_app.core.schemas import GlossaryEntry
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store import Store
from serve_app.store.apikeys import digest
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine
from tests.unit.api.test_documents_api import drain

pytestmark = pytest.mark.unit

A = {"Authorization": "Bearer sk-a"}
B = {"Authorization": "Bearer sk-b"}
DEEPL_A = {"Authorization": "DeepL-Auth-Key sk-a"}
DEEPL_B = {"Authorization": "DeepL-Auth-Key sk-b"}
TERMS = "cart\tWarenkorb\ncheckout\tKasse\nwishlist\tWunschzettel"
TEXT = b"Your cart is full.\n\nGo to checkout now.\n\nNothing else here.\n"


@dataclass
class Setup:
    client: httpx.AsyncClient
    documents: ReplicaDocuments
    engine: FakeEngine
    store: Store

    def prompts(self) -> list[str]:
        """The prompts the engine was sent, as text (the fake's token ids are characters)."""
        return ["".join(map(chr, r.prompt_token_ids)) for r in self.engine.requests]

    async def finish(self) -> None:
        await drain(self.documents)


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    store = await open_sqlite(str(tmp_path / "s.db"))
    await store.create_key("a", digest("sk-a"))
    await store.create_key("b", digest("sk-b"))
    engine = FakeEngine()
    security = {"store_keys": True}
    config = AppConfig.model_validate({"prompt": {"family": "chat"}, "security": security})
    service = TranslationService(config, engine)
    await service.start()
    documents = ReplicaDocuments(
        service, store, DocumentsConfig(poll_interval_s=0.01, worker_concurrency=4), "r1"
    )
    app = create_app(service, store=store, documents=documents)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        yield Setup(client, documents, engine, store)
    await documents.stop()
    await store.close()


async def glossary(setup: Setup, headers: dict[str, str] = A) -> str:
    body = {"name": "shop", "dictionaries": [{"source_lang": "en", "target_lang": "de",
                                              "entries": TERMS}]}  # fmt: skip
    r = await setup.client.post("/glossaries", json=body, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def upload(**form: str) -> dict[str, Any]:
    return {"files": {"file": ("shop.txt", TEXT, "text/plain")}, "data": form}


def text_of(prompt: str) -> str:
    return prompt.rsplit("\n\n", 1)[-1]


def check_terms(prompts: list[str]) -> None:
    """Each segment's prompt holds the glossary terms its text holds, and no other (the
    chat family's prompt ends with the text; neighbouring segments come before as context)."""
    cart = [p for p in prompts if "Your cart is full" in text_of(p)]
    checkout = [p for p in prompts if "Go to checkout" in text_of(p)]
    other = [p for p in prompts if "Nothing else here" in text_of(p)]
    assert cart
    assert checkout
    assert other
    assert all("cart -> Warenkorb" in p and "Kasse" not in p for p in cart)
    assert all("checkout -> Kasse" in p and "Warenkorb" not in p for p in checkout)
    assert all("Warenkorb" not in p and "Kasse" not in p for p in other)
    assert not any("Wunschzettel" in p for p in prompts)


async def test_native_upload_applies_the_glossary_even_after_it_is_deleted(setup: Setup) -> None:
    gid = await glossary(setup)
    r = await setup.client.post(
        "/documents", **upload(target_lang="de", source_lang="en", glossary_id=gid), headers=A
    )
    assert r.status_code == 201, r.text
    doc = r.json()
    assert doc["glossary_id"] == gid
    # The job keeps the terms the document holds (not wishlist), not a reference only.
    job = await setup.store.get_document(None, doc["id"])
    assert job.options["glossary"] == [["cart", "Warenkorb"], ["checkout", "Kasse"]]
    assert (await setup.client.delete(f"/glossaries/{gid}", headers=A)).status_code == 204
    await setup.finish()
    status = (await setup.client.get(f"/documents/{doc['id']}", headers=A)).json()
    assert status["status"] == "done", status["error"]
    check_terms(setup.prompts())
    result = await setup.client.get(f"/documents/{doc['id']}/result", headers=A)
    assert "cart -> Warenkorb" in result.text  # the fake echoes its prompt


async def test_a_segment_may_hold_more_terms_than_an_inline_glossary(setup: Setup) -> None:
    """The inline glossary of a request takes 100 entries; a stored one's terms in one
    segment are not cut at that."""
    entries = [{"source": f"k{i}q", "target": f"w{i}"} for i in range(120)]
    body = {"name": "big", "dictionaries": [{"source_lang": "en", "target_lang": "de",
                                             "entries": entries}]}  # fmt: skip
    gid = (await setup.client.post("/glossaries", json=body, headers=A)).json()["id"]
    text = " ".join(e["source"] for e in entries).encode()
    files = {"file": ("big.txt", text, "text/plain")}
    form = {"target_lang": "de", "source_lang": "en", "glossary_id": gid}
    r = await setup.client.post("/documents", files=files, data=form, headers=A)
    assert r.status_code == 201, r.text
    await setup.finish()
    status = (await setup.client.get(f"/documents/{r.json()['id']}", headers=A)).json()
    assert status["status"] == "done", status["error"]
    (prompt,) = setup.prompts()
    assert "- k0q -> w0\n" in prompt
    assert "- k119q -> w119\n" in prompt


async def test_the_entries_of_a_text_of_many_terms_are_built_off_the_event_loop(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's items and a document's segments build the entries of the terms they hold
    in a worker thread when there are many: 3,500 terms of a 10,000-entry glossary in a
    20,000-character text held the event loop 0.1 s per item."""
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def recorded(terms: Entries) -> list[GlossaryEntry]:
        threads.append(threading.get_ident())
        return as_entries(terms)

    monkeypatch.setattr(glossary_terms, "as_entries", recorded)
    entries = [{"source": f"k{i}q", "target": f"w{i}"} for i in range(120)]
    body = {"name": "big", "dictionaries": [{"source_lang": "en", "target_lang": "de",
                                             "entries": entries}]}  # fmt: skip
    gid = (await setup.client.post("/glossaries", json=body, headers=A)).json()["id"]
    text = " ".join(e["source"] for e in entries)
    item = {"text": text, "source_lang": "en", "target_lang": "de", "glossary_id": gid}
    r = await setup.client.post("/translate/batch", json={"items": [item] * 3}, headers=A)
    assert r.status_code == 200, r.text
    assert all("- k119q -> w119\n" in p for p in setup.prompts())
    files = {"file": ("big.txt", text.encode(), "text/plain")}
    form = {"target_lang": "de", "source_lang": "en", "glossary_id": gid}
    r = await setup.client.post("/documents", files=files, data=form, headers=A)
    assert r.status_code == 201, r.text
    await setup.finish()
    assert len(threads) == 4  # three items, one segment
    assert loop_thread not in threads
    assert len(setup.prompts()) == 4


async def test_without_glossary_id_no_terms_reach_the_prompt(setup: Setup) -> None:
    await glossary(setup)
    r = await setup.client.post(
        "/documents", **upload(target_lang="de", source_lang="en"), headers=A
    )
    assert r.status_code == 201, r.text
    assert r.json()["glossary_id"] is None
    await setup.finish()
    assert setup.prompts()
    assert not any("Warenkorb" in p for p in setup.prompts())


async def deepl_document(setup: Setup, glossary_id: str, target: str) -> dict[str, Any]:
    """Uploads the document to DeepL's /v2/document (English, ``glossary_id``) and runs the
    job to its end; DeepL's document handle."""
    r = await setup.client.post(
        "/v2/document",
        **upload(target_lang=target, source_lang="EN", glossary_id=glossary_id),
        headers=DEEPL_A,
    )
    assert r.status_code == 200, r.text
    await setup.finish()
    return dict(r.json())


async def test_deepl_document_with_a_v2_glossary(setup: Setup) -> None:
    form = {"name": "shop", "source_lang": "EN", "target_lang": "DE", "entries": TERMS,
            "entries_format": "tsv"}  # fmt: skip
    r = await setup.client.post("/v2/glossaries", data=form, headers=DEEPL_A)
    handle = await deepl_document(setup, r.json()["glossary_id"], "DE")
    url = f"/v2/document/{handle['document_id']}"
    key = {"document_key": handle["document_key"]}
    assert (await setup.client.post(url, json=key, headers=DEEPL_A)).json()["status"] == "done"
    check_terms(setup.prompts())


async def test_deepl_document_with_a_v3_multilingual_glossary(setup: Setup) -> None:
    dictionaries = [
        {"source_lang": "EN", "target_lang": t, "entries": e, "entries_format": "tsv"}
        for t, e in [("DE", "cart\tWarenkorb"), ("FR", "cart\tpanier")]
    ]
    body = {"name": "multi", "dictionaries": dictionaries}
    r = await setup.client.post("/v3/glossaries", json=body, headers=DEEPL_A)
    await deepl_document(setup, r.json()["glossary_id"], "FR")
    cart = [p for p in setup.prompts() if "Your cart is full" in text_of(p)]
    assert cart
    assert all("cart -> panier" in p and "Warenkorb" not in p for p in cart)


async def test_libre_translate_file_with_a_glossary(setup: Setup) -> None:
    gid = await glossary(setup)
    setup.documents.start()
    r = await setup.client.post(
        "/libretranslate/translate_file",
        **upload(source="en", target="de", glossary_id=gid),
        headers=A,
    )
    assert r.status_code == 200, r.text
    check_terms(setup.prompts())


async def test_deepl_refusals_are_deepls_shape(setup: Setup) -> None:
    gid = await glossary(setup)
    en_de = {"target_lang": "DE", "source_lang": "EN", "glossary_id": gid}
    cases = [
        ({"target_lang": "DE", "glossary_id": gid}, DEEPL_A, 400, "source_lang"),
        ({**en_de, "target_lang": "FR"}, DEEPL_A, 400, "en->fr"),
        ({**en_de, "glossary_id": "nope"}, DEEPL_A, 400, "Value for 'glossary_id' not supported"),
        ({**en_de, "glossary_id": "00000000-0000-4000-8000-000000000000"}, DEEPL_A, 404, ""),
        (en_de, DEEPL_B, 404, ""),
        ({**en_de, "glossary_ids": gid}, DEEPL_A, 400, "glossary_id"),
        # deepl-python 1.32's style_rule and translation_memory: ignored before.
        ({**en_de, "style_id": "s-1"}, DEEPL_A, 400, "style_id"),
        ({**en_de, "translation_memory_id": "tm-1"}, DEEPL_A, 400, "translation_memory_id"),
        ({**en_de, "custom_instructions": "Be formal"}, DEEPL_A, 400, "custom_instructions"),
    ]
    for form, headers, status, words in cases:
        r = await setup.client.post("/v2/document", **upload(**form), headers=headers)
        assert r.status_code == status, (form, r.text)
        assert set(r.json()) == {"message"}
        assert words in r.json()["message"]
    for headers in (A, B):
        assert (await setup.client.get("/documents", headers=headers)).json() == []


async def test_native_and_libre_refusals_are_their_shapes(setup: Setup) -> None:
    gid = await glossary(setup)
    en_de = {"target_lang": "de", "source_lang": "en", "glossary_id": gid}
    missing = "glossary_not_found"
    cases = [
        ({"target_lang": "de", "glossary_id": gid}, A, 422, "invalid_request"),
        ({**en_de, "source_lang": "auto"}, A, 422, "invalid_request"),
        ({**en_de, "target_lang": "fr"}, A, 400, "invalid_glossary"),
        ({**en_de, "glossary_id": "nope"}, A, 404, missing),
        (en_de, B, 404, missing),
        ({**en_de, "glossary_id": "x" * 101}, A, 422, "invalid_request"),
    ]
    for form, headers, status, code in cases:
        r = await setup.client.post("/documents", **upload(**form), headers=headers)
        assert r.status_code == status, (form, r.text)
        assert r.json()["error"]["code"] == code
    url = "/libretranslate/translate_file"
    for form, status in [
        ({"source": "auto", "target": "de", "glossary_id": gid}, 400),
        ({"source": "en", "target": "de", "glossary_id": "nope"}, 404),
    ]:
        r = await setup.client.post(url, **upload(**form), headers=A)
        assert r.status_code == status, (form, r.text)
        assert set(r.json()) == {"error"}
    for headers in (A, B):
        assert (await setup.client.get("/documents", headers=headers)).json() == []
