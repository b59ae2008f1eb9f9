"""DeepL's glossary API over the store's glossaries, as deepl-python and Weblate call it.

v2 (one language pair per glossary; ``deepl.Translator``): ``POST /v2/glossaries`` (JSON or
form: ``name``, ``source_lang``, ``target_lang``, ``entries``, ``entries_format`` ``tsv`` or
``csv``), ``GET /v2/glossaries``, ``GET /v2/glossaries/{id}``, ``GET /v2/glossaries/{id}/entries``
(TSV, ``text/tab-separated-values``), ``DELETE /v2/glossaries/{id}`` and
``GET /v2/glossary-language-pairs``. v3 (multilingual; ``deepl.DeepLClient``):
``POST /v3/glossaries`` (``name`` and ``dictionaries``), ``GET /v3/glossaries``,
``GET /v3/glossaries/{id}``, ``GET /v3/glossaries/{id}/entries?source_lang=&target_lang=``,
``DELETE /v3/glossaries/{id}``, and its edits: ``PATCH /v3/glossaries/{id}`` (``name``;
``dictionaries`` merged into the pairs' entries), ``PUT /v3/glossaries/{id}/dictionaries``
(one pair's entries replaced) and ``DELETE /v3/glossaries/{id}/dictionaries?source_lang=&
target_lang=``. The v2 routes show only one-pair glossaries; the same ids work
in ``glossary_id`` of ``/v2/translate``. Errors are DeepL's: ``{"message"}``, 404 for an
unknown id (deepl-python raises ``GlossaryNotFoundException``), 400 for bad entries.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response

from serve_app.api.compat.common import Params, get_and_post, one, read_params
from serve_app.api.errors import ErrorFormat, KeyScheme, register_error_format
from serve_app.api.glossaries import (
    NewDictionary,
    create_glossary,
    edit_glossary,
    glossary_store,
    owner,
    stored_code,
)
from serve_app.api.glossary_entries import to_tsv, written_async
from serve_app.core.errors import (
    GlossaryNotFound,
    InvalidLanguageCode,
    InvalidRequest,
    UnsupportedLanguage,
)
from serve_app.store import DictionaryInfo, Glossary, Store
from serve_app.store.validation import check_dictionary_count
from serve_app.translation.service import TranslationService

RequireAuth = Callable[[Request, Params], None]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)


def checked_id(value: Any) -> str:
    """A ``glossary_id`` as DeepL takes one: a UUID (every id the store makes is one).
    Anything else is DeepL's 400 "Value for 'glossary_id' not supported.", as deepl-mock
    answers, before the store is asked."""
    if not isinstance(value, str) or not _UUID.fullmatch(value):
        raise InvalidRequest("Value for 'glossary_id' not supported.")
    return value


def _time(ts: float) -> str:
    """DeepL's ``creation_time``: ISO 8601 with fractional seconds, UTC."""
    moment = datetime.datetime.fromtimestamp(ts, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _code(code: str) -> str:
    """DeepL's glossary language: the base language, upper-case (glossaries are not
    regional)."""
    return code.split("-")[0].upper()


def v2_info(g: Glossary) -> dict[str, Any]:
    (d,) = g.dictionaries
    return {
        "glossary_id": g.id,
        "name": g.name,
        "ready": True,
        "source_lang": _code(d.source_lang),
        "target_lang": _code(d.target_lang),
        "creation_time": _time(g.created_at),
        "entry_count": d.entry_count,
    }


def _dictionary_info(d: DictionaryInfo) -> dict[str, Any]:
    return {
        "source_lang": _code(d.source_lang),
        "target_lang": _code(d.target_lang),
        "entry_count": d.entry_count,
    }


def v3_info(g: Glossary) -> dict[str, Any]:
    dictionaries = [_dictionary_info(d) for d in g.dictionaries]
    return {
        "glossary_id": g.id,
        "name": g.name,
        "creation_time": _time(g.created_at),
        "dictionaries": dictionaries,
    }


def _text(params: Params, name: str) -> str:
    value = one(params, name)
    if not isinstance(value, str) or not value:
        raise InvalidRequest(f"Parameter '{name}' not specified.")
    return value


def _language(service: TranslationService, params: Params, name: str) -> str:
    """Parameter ``name``'s glossary language, in DeepL's base code; a language with no
    glossaries here (one the model does not offer, or no language code) is DeepL's 400
    "Value for '...' not supported.", as deepl-mock answers one it does not know."""
    raw = _text(params, name)
    try:
        return _code(stored_code(service, raw))
    except (InvalidLanguageCode, UnsupportedLanguage) as exc:
        raise InvalidRequest(f"Value for '{name}' not supported.") from exc


def _dictionary(fields: dict[str, Any] | Params) -> NewDictionary:
    params = {k: v if isinstance(v, list) else [v] for k, v in fields.items()}
    fmt = one(params, "entries_format", "tsv")
    if fmt not in ("tsv", "csv"):
        raise InvalidRequest("Parameter 'entries_format' must be 'tsv' or 'csv'.")
    entries = _text(params, "entries")
    return NewDictionary(_text(params, "source_lang"), _text(params, "target_lang"), entries, fmt)


def language_pairs(service: TranslationService) -> list[dict[str, str]]:
    """Every offered pair, in DeepL's base codes (lower-case, as DeepL answers); none when
    the model takes no glossary."""
    if "glossary" not in service.family.supports:
        return []
    pairs: dict[tuple[str, str], None] = {}
    for source in service.languages.languages:
        for target in service.languages.targets_for(source):
            s, t = _code(source).lower(), _code(target).lower()
            if s != t:
                pairs[(s, t)] = None
    return [{"source_lang": s, "target_lang": t} for s, t in pairs]


def _v2_routes(router: APIRouter, service: TranslationService, auth: RequireAuth) -> None:
    async def one_pair(request: Request, glossary_id: str) -> Glossary:
        found = await glossary_store(request, service).get_glossary(owner(request), glossary_id)
        if len(found.dictionaries) != 1:  # multilingual: the v3 routes show it
            raise GlossaryNotFound(f"Glossary {glossary_id[:100]!r} not found in the v2 API.")
        return found

    @get_and_post(router, "/glossary-language-pairs", "deepl_glossary_language_pairs")
    async def pairs(request: Request) -> dict[str, Any]:
        """DeepL ``/v2/glossary-language-pairs``: pairs a glossary may have."""
        auth(request, await read_params(request))
        if getattr(request.app.state, "store", None) is None:
            return {"supported_languages": []}
        return {"supported_languages": language_pairs(service)}

    @router.post("/glossaries", status_code=201)
    async def create(request: Request) -> dict[str, Any]:
        """DeepL ``POST /v2/glossaries`` (JSON or form)."""
        params = await read_params(request)
        auth(request, params)
        name = _text(params, "name")
        dictionary = _dictionary(params)
        return v2_info(await create_glossary(request, service, name, [dictionary]))

    @router.get("/glossaries")
    async def list_all(request: Request) -> dict[str, Any]:
        """DeepL ``GET /v2/glossaries``: the key's one-pair glossaries."""
        auth(request, await read_params(request))
        found = await glossary_store(request, service).list_glossaries(owner(request))
        return {"glossaries": [v2_info(g) for g in found if len(g.dictionaries) == 1]}

    @router.get("/glossaries/{glossary_id}")
    async def get(glossary_id: str, request: Request) -> dict[str, Any]:
        """DeepL ``GET /v2/glossaries/{id}``."""
        auth(request, await read_params(request))
        glossary_id = checked_id(glossary_id)
        return v2_info(await one_pair(request, glossary_id))

    @router.get("/glossaries/{glossary_id}/entries")
    async def entries(glossary_id: str, request: Request) -> Response:
        """DeepL ``GET /v2/glossaries/{id}/entries``: TSV."""
        auth(request, await read_params(request))
        glossary_id = checked_id(glossary_id)
        g = await one_pair(request, glossary_id)
        d = g.dictionaries[0]
        store = glossary_store(request, service)
        found = await store.glossary_entries(owner(request), g.id, d.source_lang, d.target_lang)
        tsv = await written_async(to_tsv, found)
        return Response(tsv, media_type="text/tab-separated-values; charset=utf-8")

    @router.delete("/glossaries/{glossary_id}", status_code=204)
    async def delete(glossary_id: str, request: Request) -> Response:
        """DeepL ``DELETE /v2/glossaries/{id}``."""
        auth(request, await read_params(request))
        glossary_id = checked_id(glossary_id)
        await glossary_store(request, service).delete_glossary(owner(request), glossary_id)
        return Response(status_code=204)


def _dictionaries(
    request: Request,
    service: TranslationService,
    params: Params,
    required: bool,
    one_at_most: bool = False,
) -> list[NewDictionary]:
    """Parameter ``dictionaries``: a list of objects (may be absent unless ``required``);
    too many are refused before any is read. ``one_at_most``: a PATCH's, which DeepL's API
    reference limits to "0 or 1 dictionaries" (deepl-mock refuses more with a 400 too)."""
    raw = params.get("dictionaries") or []
    if (required and not raw) or not all(isinstance(d, dict) for d in raw):
        raise InvalidRequest("Parameter 'dictionaries' must be a list of objects.")
    check_dictionary_count(len(raw), glossary_store(request, service).limits)
    if one_at_most and len(raw) > 1:
        raise InvalidRequest("Only one dictionary can be edited at a time.")
    return [_dictionary(d) for d in raw]


def _languages(service: TranslationService, params: Params) -> tuple[str, str]:
    """``source_lang`` and ``target_lang`` of a request naming one of a glossary's
    dictionaries, checked before the glossary is read (400), as deepl-mock does."""
    return _language(service, params, "source_lang"), _language(service, params, "target_lang")


def _held_pair(g: Glossary, source: str, target: str) -> DictionaryInfo:
    """The glossary's ``source -> target`` dictionary; a pair it lacks is a 404, as
    deepl-mock answers."""
    for d in g.dictionaries:
        if (_code(d.source_lang), _code(d.target_lang)) == (source, target):
            return d
    raise GlossaryNotFound(f"Glossary {g.id[:100]!r} has no {source}->{target} dictionary.")


def _v3_routes(router: APIRouter, service: TranslationService, auth: RequireAuth) -> None:
    async def named_pair(
        request: Request, glossary_id: str
    ) -> tuple[Store, Glossary, DictionaryInfo]:
        """The store, the request's glossary and the dictionary its ``source_lang`` and
        ``target_lang`` name: the key checked first, then the id and the languages (400),
        then the glossary (404) and its pairs (404)."""
        params = await read_params(request)
        auth(request, params)
        glossary_id = checked_id(glossary_id)
        source, target = _languages(service, params)
        store = glossary_store(request, service)
        g = await store.get_glossary(owner(request), glossary_id)
        return store, g, _held_pair(g, source, target)

    @router.post("/glossaries", status_code=201)
    async def create(request: Request) -> dict[str, Any]:
        """DeepL ``POST /v3/glossaries``: ``name`` and ``dictionaries``."""
        params = await read_params(request)
        auth(request, params)
        name = _text(params, "name")
        dictionaries = _dictionaries(request, service, params, required=True)
        return v3_info(await create_glossary(request, service, name, dictionaries))

    @router.patch("/glossaries/{glossary_id}")
    async def edit(glossary_id: str, request: Request) -> dict[str, Any]:
        """DeepL ``PATCH /v3/glossaries/{id}``: a new ``name`` and/or one dictionary
        whose entries are merged into the pair's (a term given replaces its entry); more
        than one is a 400, as DeepL's API reference and deepl-mock have it."""
        params = await read_params(request)
        auth(request, params)
        glossary_id = checked_id(glossary_id)
        name = _text(params, "name") if "name" in params else None
        dictionaries = _dictionaries(request, service, params, name is None, one_at_most=True)
        edited = await edit_glossary(request, service, glossary_id, name, dictionaries, True)
        return v3_info(edited)

    @router.put("/glossaries/{glossary_id}/dictionaries")
    async def replace(glossary_id: str, request: Request) -> dict[str, Any]:
        """DeepL ``PUT /v3/glossaries/{id}/dictionaries``: one pair's entries replaced (the
        pair is added when the glossary lacks it); answers the dictionary's info."""
        params = await read_params(request)
        auth(request, params)
        glossary_id = checked_id(glossary_id)
        d = _dictionary(params)
        edited = await edit_glossary(request, service, glossary_id, None, [d], False)
        pair = (stored_code(service, d.source_lang), stored_code(service, d.target_lang))
        (info,) = [i for i in edited.dictionaries if (i.source_lang, i.target_lang) == pair]
        return _dictionary_info(info)

    @router.delete("/glossaries/{glossary_id}/dictionaries", status_code=204)
    async def delete_pair(glossary_id: str, request: Request) -> Response:
        """DeepL ``DELETE /v3/glossaries/{id}/dictionaries?source_lang=&target_lang=``."""
        store, g, d = await named_pair(request, glossary_id)
        await store.delete_glossary_dictionary(owner(request), g.id, d.source_lang, d.target_lang)
        return Response(status_code=204)

    @router.get("/glossaries")
    async def list_all(request: Request) -> dict[str, Any]:
        """DeepL ``GET /v3/glossaries``."""
        auth(request, await read_params(request))
        found = await glossary_store(request, service).list_glossaries(owner(request))
        return {"glossaries": [v3_info(g) for g in found]}

    @router.get("/glossaries/{glossary_id}")
    async def get(glossary_id: str, request: Request) -> dict[str, Any]:
        """DeepL ``GET /v3/glossaries/{id}``."""
        auth(request, await read_params(request))
        glossary_id = checked_id(glossary_id)
        store = glossary_store(request, service)
        return v3_info(await store.get_glossary(owner(request), glossary_id))

    @router.get("/glossaries/{glossary_id}/entries")
    async def entries(glossary_id: str, request: Request) -> dict[str, Any]:
        """DeepL ``GET /v3/glossaries/{id}/entries?source_lang=&target_lang=``: the languages
        are checked before the glossary is read, and a pair it lacks is a 404, as
        deepl-mock answers."""
        store, g, d = await named_pair(request, glossary_id)
        found = await store.glossary_entries(owner(request), g.id, d.source_lang, d.target_lang)
        tsv = await written_async(to_tsv, found)
        entry = {"source_lang": _code(d.source_lang), "target_lang": _code(d.target_lang),
                 "entries": tsv, "entries_format": "tsv"}  # fmt: skip
        return {"dictionaries": [entry]}

    @router.delete("/glossaries/{glossary_id}", status_code=204)
    async def delete(glossary_id: str, request: Request) -> Response:
        """DeepL ``DELETE /v3/glossaries/{id}``."""
        auth(request, await read_params(request))
        glossary_id = checked_id(glossary_id)
        await glossary_store(request, service).delete_glossary(owner(request), glossary_id)
        return Response(status_code=204)


def deepl_glossary_routes(
    app: FastAPI,
    v2: APIRouter,
    service: TranslationService,
    auth: RequireAuth,
    errors: tuple[ErrorFormat, KeyScheme],
    responses: dict[int | str, dict[str, Any]],
) -> None:
    """Adds the v2 glossary routes to ``v2`` (DeepL's ``/v2`` router) and the v3 ones, in
    DeepL's error shape, to ``app``."""
    _v2_routes(v2, service, auth)
    v3 = APIRouter(prefix="/v3", tags=["DeepL API v3 glossaries"], responses=responses)
    _v3_routes(v3, service, auth)
    app.include_router(v3)
    register_error_format(app, "/v3", *errors)
