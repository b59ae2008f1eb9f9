"""Every route fuzzed with hostile requests (``tests/hostile.py``: wrong types in every field,
lone surrogates, deep nesting, huge numbers, duplicated keys and form fields, invalid UTF-8,
broken multipart, wrong content types) against the app over the fake engine, with a store,
documents and, in one run, API keys: thousands of cases, none answered with a 5xx (but a
503/504 in shape), every error in its API's own shape, nothing logged as unexpected.

Without keys, the harness first creates a glossary and a document job through the API, and
the cases marked ``real`` name them instead of ids no store made: the glossary and document
routes' handlers are fuzzed past their 404 (one deleted by a case is created again)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.core.documents_config import DocumentsConfig
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store import Store
from serve_app.store.sqlite import open_sqlite
from serve_app.translation.service import TranslationService
from tests import hostile
from tests.fakes import FakeEngine

# Cases per route (a test fuzzes its routes with this many times as many); the e2e module
# sends its cases through the real stack.
PER_ROUTE = 150
EXAMPLES = 1500  # the tests over every route at once
ARGS = {
    "prompt": {"family": "chat"},
    "limits": {"max_input_tokens": 64, "max_batch_items": 8, "max_engine_requests": 64},
}


class Harness:
    """The app in an event loop of its own, called case by case. ``ids``: the real
    glossary's, document's and document key that cases marked ``real`` are sent with (none:
    they keep the absent ones)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        client: httpx.AsyncClient,
        documents: ReplicaDocuments,
    ) -> None:
        self.loop = loop
        self.client = client
        self.documents = documents
        self.cases = 0
        self.real_cases = 0
        self.ids: dict[str, str] = {}

    def send(self, case: hostile.Case) -> httpx.Response:
        request = self.client.request(
            case.route.method, case.url, content=case.body, headers=case.headers
        )
        return self.loop.run_until_complete(asyncio.wait_for(request, 120))

    def check(self, case: hostile.Case) -> None:
        if case.real and self.ids:
            case = hostile.with_ids(case, self.ids)
            self.real_cases += 1
        r = self.send(case)
        self.cases += 1
        hostile.check_answer(case, r.status_code, r.headers, r.content)
        if case.real and case.route.method == "DELETE" and r.status_code == 204:
            self.replace_deleted(case.route.path)

    def create_real(self) -> None:
        """A glossary (one pair, so DeepL's v2 routes show it too) and a translated
        document, created through the API; their ids replace the absent ones in real
        cases. (The harness runs no document worker: the fuzzed uploads stay queued.)"""
        self.create_glossary()
        self.create_document()

    def replace_deleted(self, path: str) -> None:
        """A real case deleted the glossary or the document at ``path``: a new one for the
        next real cases (only that one: the owner's limits hold the fuzzed creations too)."""
        if self.ids[hostile.GLOSSARY] in path:
            self.create_glossary()
        else:
            self.create_document()

    def create_glossary(self) -> None:
        glossary = {"name": "real", "dictionaries": [hostile.DICTIONARY]}
        self.ids[hostile.GLOSSARY] = self._call("POST", "/glossaries", json=glossary)["id"]

    def create_document(self) -> None:
        parts = [(b"target_lang", b"DE", b""), (b"file", b"Hello world.\n", b'; filename="a.txt"')]
        headers = {**hostile.DEEPL_AUTH, "content-type": MULTIPART}
        d = self._call("POST", "/v2/document", content=hostile._multipart(parts), headers=headers)
        self.loop.run_until_complete(self._translate(d["document_id"]))
        self.ids[hostile.DOCUMENT] = d["document_id"]
        self.ids[hostile.DOCUMENT_KEY] = d["document_key"]

    async def _translate(self, document_id: str) -> None:
        """Runs the document worker until the document is translated (it may be behind
        the fuzzed uploads that are queued)."""
        worker = self.documents.worker
        for _ in range(10_000):
            job = await self.documents.jobs.status(None, document_id)
            if job.state in ("done", "error"):
                assert job.state == "done", job
                return
            await worker.step()
            await asyncio.gather(*worker.running)
        raise AssertionError(f"document {document_id} was not translated")

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        r = self.loop.run_until_complete(self.client.request(method, path, **kwargs))
        assert r.status_code in (200, 201), r.text
        return dict(r.json())


MULTIPART = f"multipart/form-data; boundary={hostile.BOUNDARY}"


@contextmanager
def harness(tmp_path: Path, **security: Any) -> Iterator[Harness]:
    """The harness; without keys (no ``security``), with a real glossary and document."""
    loop = asyncio.new_event_loop()

    async def build() -> tuple[httpx.AsyncClient, ReplicaDocuments, Store]:
        service = TranslationService(
            AppConfig.model_validate({**ARGS, "security": security}), FakeEngine()
        )
        await service.start()
        store = await open_sqlite(str(tmp_path / "store.db"))
        # LibreTranslate's translate_file waits for its job, behind every job the fuzzing
        # queued: a short wait makes that a 504 (the answer it documents) within the test.
        docs = DocumentsConfig(poll_interval_s=0.01, worker_concurrency=4, wait_timeout_s=3)
        documents = ReplicaDocuments(service, store, docs, "r1")
        app = create_app(service, store=store, documents=documents)
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        return httpx.AsyncClient(transport=transport, base_url="http://t"), documents, store

    client, documents, store = loop.run_until_complete(build())
    try:
        h = Harness(loop, client, documents)
        if not security:
            h.create_real()
        yield h
    finally:
        loop.run_until_complete(documents.stop())
        loop.run_until_complete(client.aclose())
        # Its connection's thread is not a daemon: left open, a failing case (whose
        # traceback keeps the store alive) held pytest at exit forever, unreported.
        loop.run_until_complete(store.close())
        loop.close()


def fuzz(h: Harness, routes: tuple[hostile.Route, ...], examples: int) -> None:
    @settings(
        max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(case=hostile.cases(routes))
    def run(case: hostile.Case) -> None:
        h.check(case)

    run()


@pytest.fixture
def no_unexpected(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    with caplog.at_level(logging.ERROR, logger="ray.serve.translator"):
        yield
    unexpected = [r for r in caplog.records if "unexpectedly" in r.getMessage()]
    assert not unexpected, unexpected[0].getMessage()


@pytest.mark.usefixtures("no_unexpected")
def test_native_routes(tmp_path: Path) -> None:
    with harness(tmp_path) as h:
        fuzz(h, hostile.NATIVE_ROUTES, PER_ROUTE * len(hostile.NATIVE_ROUTES))
    assert h.cases >= PER_ROUTE * len(hostile.NATIVE_ROUTES)


@pytest.mark.usefixtures("no_unexpected")
def test_compat_routes(tmp_path: Path) -> None:
    with harness(tmp_path) as h:
        fuzz(h, hostile.COMPAT_ROUTES, PER_ROUTE * len(hostile.COMPAT_ROUTES))


@pytest.mark.usefixtures("no_unexpected")
def test_store_routes_documents_and_glossaries(tmp_path: Path) -> None:
    """A share of the cases of routes that name a glossary or document name real ones."""
    with harness(tmp_path) as h:
        fuzz(h, hostile.STORE_ROUTES, PER_ROUTE // 3 * len(hostile.STORE_ROUTES))
    by_id = [r for r in hostile.STORE_ROUTES if r.names_an_id()]
    assert h.real_cases >= PER_ROUTE // 12 * len(by_id), h.real_cases


@pytest.mark.usefixtures("no_unexpected")
def test_every_route_with_keys_on_and_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a key: a 401 (403 in DeepL's and LibreTranslate's shapes) or a 4xx for the
    body, never a 5xx, whatever the body (LibreTranslate's key may be in it)."""
    monkeypatch.setenv("FUZZ_KEYS", "secret-key")
    routes = tuple(
        hostile.Route(r.method, r.path, r.api, r.fields, r.kinds)  # no DeepL auth header
        for r in hostile.ROUTES + hostile.STORE_ROUTES
    )
    with harness(tmp_path, api_keys_env="FUZZ_KEYS") as h:
        fuzz(h, routes, EXAMPLES // 3)


@pytest.mark.usefixtures("no_unexpected")
def test_invalid_utf8_in_a_multipart_name_value_or_file_name_is_refused_in_shape(
    tmp_path: Path,
) -> None:
    """Starlette reads such bytes as Latin-1 (a 200 or 201 for mojibake before the fix):
    every multipart route refuses them, 422 native, 400 DeepL and LibreTranslate."""
    routes = hostile.ROUTES + hostile.STORE_ROUTES

    @settings(max_examples=300, deadline=None, database=None)
    @given(case=hostile.broken_utf8_multipart(routes))
    def run(case: hostile.Case) -> None:
        h.check(case)

    with harness(tmp_path) as h:
        run()


def _keyed(route: hostile.Route, key: str) -> hostile.Route:
    """``route`` with ``key`` sent the API's own way (LibreTranslate's in the body)."""
    if route.api == "libre":
        return replace(route, fields={**route.fields, "api_key": key})
    scheme = "DeepL-Auth-Key" if route.api == "deepl" else "Bearer"
    return replace(route, headers={"Authorization": f"{scheme} {key}"})


@pytest.mark.usefixtures("no_unexpected")
def test_with_keys_on_an_unreadable_body_is_its_400_not_a_missing_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LibreTranslate's key may be in the body: a multipart body that cannot be read (invalid
    UTF-8) was answered 403 "missing key" though the key was in it; now the body's 400."""
    monkeypatch.setenv("FUZZ_KEYS", "secret-key")
    routes = tuple(_keyed(r, "secret-key") for r in hostile.ROUTES + hostile.STORE_ROUTES)

    @settings(max_examples=150, deadline=None, database=None)
    @given(case=hostile.broken_utf8_multipart(routes))
    def run(case: hostile.Case) -> None:
        h.check(case)

    with harness(tmp_path, api_keys_env="FUZZ_KEYS") as h:
        run()


UPLOADS = (
    ("/documents", "native", {"target_lang": "de"}),
    ("/v2/document", "deepl", {"target_lang": "DE"}),
    ("/libretranslate/translate_file", "libre", {"target": "de"}),
)


def _upload(h: Harness, path: str, api: str, fields: dict[str, str], data: bytes, ctype: str
            ) -> tuple[int, Any]:  # fmt: skip
    parts = [(k.encode(), v.encode(), b"") for k, v in fields.items()]
    body = hostile._multipart([*parts, (b"file", data, b'; filename="a.txt"')])
    route = hostile.Route("POST", path, api, fields, ("upload",), hostile.DEEPL_AUTH)
    headers: dict[str, str | bytes] = {**hostile.DEEPL_AUTH, "content-type": ctype}
    case = hostile.Case(route, body, headers)
    r = h.send(case)
    hostile.check_answer(case, r.status_code, r.headers, r.content)
    return r.status_code, r.json()


@pytest.mark.usefixtures("no_unexpected")
def test_a_text_document_not_in_utf8_is_the_documents_own_400_and_a_bad_charset_a_400(
    tmp_path: Path,
) -> None:
    multipart = f"multipart/form-data; boundary={hostile.BOUNDARY}"
    with harness(tmp_path) as h:
        for path, api, fields in UPLOADS:
            status, body = _upload(h, path, api, fields, b"Hello \xff\xfe world", multipart)
            assert status == 400, body
            assert "not valid UTF-8 text" in str(body)
            status, body = _upload(h, path, api, fields, b"Hello world", multipart)
            assert status in (200, 201, 504), body  # LibreTranslate's waits for the job
            for charset in ("latin-1", "utf-16", "bogus"):
                ctype = f"{multipart}; charset={charset}"
                status, body = _upload(h, path, api, fields, b"Hello world", ctype)
                assert status == (422 if api == "native" else 400), body
                assert "must be UTF-8" in str(body)
