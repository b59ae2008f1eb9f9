"""DeepL API v2, the subset translation tools use: point a DeepL client at this service.

``POST /v2/translate`` (JSON or form; ``text`` one or many, ``source_lang`` optional,
``target_lang`` such as ``EN-US``, ``PT-BR``, ``ZH-HANS``; ``formality``, ``context``;
``tag_handling`` ``html``/``xml`` with its tag lists: ``api/compat/markup.py``),
``GET|POST /v2/languages?type=source|target`` and ``GET|POST /v2/usage``, answered in DeepL's
shapes; errors are ``{"message": ...}`` with DeepL's statuses (400 for bad parameters, 403
without an ``Authorization: DeepL-Auth-Key`` header, 413, 429/503 to retry). ``glossary_id``
names a stored glossary (the glossary API: ``deepl_glossaries.py``).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from fastapi import APIRouter, FastAPI, Request

from serve_app.api.compat.common import (
    Params,
    all_translated,
    blank,
    get_and_post,
    in_place,
    keeping_same_language,
    make_item,
    one,
    read_params,
)
from serve_app.api.compat.deepl_documents import deepl_document_routes
from serve_app.api.compat.deepl_glossaries import checked_id, deepl_glossary_routes
from serve_app.api.compat.deepl_options import (
    DeepLOptions,
    deepl_options,
    given_in,
    refuse_unsupported,
)
from serve_app.api.compat.markup import check_well_formed, deepl_markup
from serve_app.api.compat.schemas import DeepLTranslateBody, request_body
from serve_app.api.errors import KeyScheme, register_error_format
from serve_app.api.glossaries import apply_glossaries
from serve_app.api.keys import caller_usage, translate_batch_charged
from serve_app.core.errors import DocumentNotReady, Forbidden, InvalidRequest
from serve_app.core.schemas import BatchTranslateRequest, TextItem, TranslateResponse
from serve_app.documents.replica import ReplicaDocuments
from serve_app.translation.service import TranslationService

_FORMALITY = {
    "default": "default",
    "more": "formal",
    "less": "informal",
    "prefer_more": "formal",
    "prefer_less": "informal",
}
# DeepL's target codes for the variants it distinguishes; others are the code in capitals.
_TARGETS = {
    "en": ("EN-GB", "EN-US"),
    "pt": ("PT-PT",),
    "pt-BR": ("PT-BR",),
    "zh": ("ZH-HANS",),
    "zh-Hant": ("ZH-HANT",),
}
# DeepL's names of those variants (its /v2/languages): without them EN-GB and EN-US were
# both "English", two entries alike in a client's list.
_TARGET_NAMES = {
    "EN-GB": "English (British)",
    "EN-US": "English (American)",
    "PT-PT": "Portuguese (European)",
    "PT-BR": "Portuguese (Brazilian)",
    "ZH-HANS": "Chinese (simplified)",
    "ZH-HANT": "Chinese (traditional)",
}


# DeepL's statuses where they differ from ours: every invalid parameter is a 400, a bad key a
# 403, and a used-up character quota "456 Quota exceeded" (its clients raise
# QuotaExceededException on it); 429 stays "too many requests".
_DEEPL_STATUS = {"unauthorized": 403, "quota_exceeded": 456}
# DeepL's key scheme: the key check's refusal names it (Bearer is refused on these routes).
DEEPL_KEYS = KeyScheme("DeepL-Auth-Key", "'Authorization: DeepL-Auth-Key <key>'")


def deepl_error(status: int, code: str, message: str) -> tuple[int, dict[str, Any]]:
    # A document not ready for download is a 503 (DeepL's clients raise
    # DocumentNotReadyException).
    if code == DocumentNotReady.code:
        return 503, {"message": message}
    if status == 422:
        return 400, {"message": message}
    return _DEEPL_STATUS.get(code, status), {"message": message}


def source_code(code: str) -> str:
    """DeepL's source-language code: the base language in capitals (``zh-Hant`` -> ``ZH``)."""
    return code.split("-")[0].upper()


def _require_auth(request: Request, params: Params) -> None:
    """403 without a DeepL key: the ``DeepL-Auth-Key`` scheme, in any case (an HTTP
    authentication scheme is case-insensitive, as the key check reads it: a valid key sent
    as ``deepl-auth-key`` passed it and was then refused here), or ``auth_key``."""
    scheme = request.headers.get("authorization", "").split(" ", 1)[0]
    if not (scheme.lower() == "deepl-auth-key" or one(params, "auth_key")):
        raise Forbidden(f"Authorization failure: send {DEEPL_KEYS.send}.")


def _formality(service: TranslationService, value: Any) -> str:
    if not isinstance(value, str) or value not in _FORMALITY:
        raise InvalidRequest(f"Invalid formality '{value}'.")
    if value.startswith("prefer_") and "formality" not in service.family.supports:
        return "default"  # "prefer" means: where the target supports it
    return _FORMALITY[value]


async def _translate(service: TranslationService, request: Request) -> dict[str, Any]:
    params = await read_params(request)
    _require_auth(request, params)
    texts, target = params.get("text"), one(params, "target_lang")
    if not texts:
        raise InvalidRequest("Parameter 'text' not specified.")
    service.check_batch_size(len(texts))
    if not target:
        raise InvalidRequest("Parameter 'target_lang' not specified.")
    source = one(params, "source_lang") or "auto"
    refuse_unsupported(given_in(params))  # glossary_ids, style_id, custom_instructions...
    glossary_id = one(params, "glossary_id")
    if glossary_id:
        glossary_id = checked_id(glossary_id)
        if source == "auto":
            raise InvalidRequest("Parameter 'source_lang' is required when using a glossary.")
    formality = _formality(service, one(params, "formality", "default"))
    common = {"source_lang": source, "target_lang": target, "formality": formality}
    common["context"] = one(params, "context")
    common["glossary_id"] = glossary_id
    common |= deepl_markup(params)  # tag_handling and its tag lists
    options = deepl_options(params)  # split_sentences, preserve_formatting, model_type...
    if options.tag_handling_version == "v2" and common.get("format") == "xml":
        await asyncio.to_thread(check_well_formed, [t for t in texts if isinstance(t, str)])
    items = [make_item(text=t, **common) for t in texts if not blank(t)]
    items = await apply_glossaries(request, service, items)
    answers = in_place(texts, await _translated(service, items, request))
    return {"translations": [_entry(t, a, options) for t, a in zip(texts, answers, strict=True)]}


def _entry(text: Any, answer: TranslateResponse | str, options: DeepLOptions) -> dict[str, Any]:
    """One text's entry of ``translations``; a blank text comes back as it is, unbilled."""
    if isinstance(answer, str):
        return {"detected_source_language": "", "text": text, "billed_characters": 0}
    code = source_code(answer.source_lang)
    entry = {"detected_source_language": code, "text": options.apply(text, answer.translation)}
    return options.annotate(entry | {"billed_characters": len(text)})


async def _translated(
    service: TranslationService, items: list[TextItem], request: Request
) -> list[TranslateResponse]:
    if not items:
        return []
    batch = BatchTranslateRequest(items=items)
    return all_translated(await translate_batch_charged(service, request, batch, True))


def _languages(service: TranslationService, kind: str) -> list[dict[str, Any]]:
    if kind not in ("source", "target"):
        raise InvalidRequest("Parameter 'type' must be 'source' or 'target'.")
    formality = "formality" in service.family.supports
    out: dict[str, dict[str, Any]] = {}
    for code, lang in service.languages.languages.items():
        if kind == "source":
            out.setdefault(source_code(code), {"language": source_code(code), "name": lang.name})
            continue
        for target in _TARGETS.get(code, (code.upper(),)):
            name = _TARGET_NAMES.get(target, lang.name)
            entry = {"language": target, "name": name, "supports_formality": formality}
            out.setdefault(target, entry)
    return list(out.values())


# What DeepL's clients expect: {"message": ...} with DeepL's statuses (403: no auth key).
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": 'Error: {"message": ...}'}
    for code in (400, 401, 403, 413, 429, 456, 503, 504)
}


def deepl_router(
    app: FastAPI, service: TranslationService, documents: ReplicaDocuments | None = None
) -> None:
    """Adds the DeepL endpoints and their error shape to ``app`` (``/v2/document`` with
    ``documents``)."""
    router = APIRouter(prefix="/v2", tags=["DeepL API v2 compatibility"], responses=_ERRORS)
    if documents is not None:
        formality = functools.partial(_formality, service)
        deepl_document_routes(router, documents, formality, _require_auth)
    deepl_glossary_routes(app, router, service, _require_auth, (deepl_error, DEEPL_KEYS), _ERRORS)

    @router.post("/translate", openapi_extra=request_body(DeepLTranslateBody))
    async def translate(request: Request) -> dict[str, Any]:
        """DeepL ``POST /v2/translate``."""
        with keeping_same_language():
            return await _translate(service, request)

    @get_and_post(router, "/languages", "deepl_languages")
    async def languages(request: Request) -> list[dict[str, Any]]:
        """DeepL ``/v2/languages``: ``type=source`` (default) or ``type=target``."""
        params = await read_params(request)
        _require_auth(request, params)
        return _languages(service, one(params, "type", "source"))

    @get_and_post(router, "/usage", "deepl_usage")
    async def usage(request: Request) -> dict[str, int]:
        """DeepL ``/v2/usage``: the key's characters this month and its limit (from the
        store, cluster-wide); without a store, what this replica translated."""
        _require_auth(request, await read_params(request))
        limit = service.config.compat.deepl_character_limit
        found = await caller_usage(request)
        if found is None:
            return {"character_count": service.characters, "character_limit": limit}
        limit = limit if found.character_limit is None else found.character_limit
        return {"character_count": found.characters, "character_limit": limit}

    app.include_router(router)
    register_error_format(app, "/v2", deepl_error, DEEPL_KEYS)
