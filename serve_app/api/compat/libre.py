"""LibreTranslate's API under a prefix of its own (default ``/libretranslate``), so clients
that take a LibreTranslate base URL work unchanged without clashing with the native API.

``POST /translate`` (JSON or form; ``q`` one text or a list, ``source`` a code or ``auto``,
``target``, ``format`` ``text`` or ``html`` (tags kept: Mastodon sends its statuses so),
``api_key`` accepted), ``GET|POST /languages`` and ``POST /detect`` (``q`` one text or a
list, its languages pooled), in LibreTranslate's
shapes (confidences 0-100). A blank text (of a list, or alone) is answered as it is, as
LibreTranslate translates every text of a list; an empty ``q`` is "missing". ``glossary_id``
(an extension: a stored glossary of the key, ``/glossaries``) needs an explicit ``source``.
Errors are ``{"error": ...}`` with its statuses (400 for bad parameters).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
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
from serve_app.api.compat.libre_codes import libre_code
from serve_app.api.compat.libre_documents import libre_document_routes
from serve_app.api.compat.libre_settings import frontend_settings
from serve_app.api.compat.markup import libre_format
from serve_app.api.compat.schemas import LibreDetectBody, LibreTranslateBody, request_body
from serve_app.api.errors import KeyScheme, register_error_format
from serve_app.api.glossaries import apply_glossaries
from serve_app.api.keys import translate_batch_charged
from serve_app.core.errors import InvalidRequest
from serve_app.core.schemas import BatchTranslateRequest, TextItem, TranslateResponse
from serve_app.documents.replica import ReplicaDocuments
from serve_app.translation.languages import Language
from serve_app.translation.service import TranslationService

# LibreTranslate's clients send an api_key parameter (the key check also takes a header);
# LibreTranslate's 403 carries no WWW-Authenticate.
LIBRE_KEYS = KeyScheme(None, "an 'api_key' parameter (or 'Authorization: Bearer <key>')")


def libre_error(status: int, code: str, message: str) -> tuple[int, dict[str, Any]]:
    # LibreTranslate answers a missing or invalid api_key with 403 and a used-up quota or
    # rate with 429.
    if status == 422:
        return 400, {"error": message}
    return (403 if code == "unauthorized" else status), {"error": message}


async def _translate(service: TranslationService, request: Request) -> dict[str, Any]:
    params = await read_params(request)
    q, target = params.get("q"), libre_code(one(params, "target"))
    if not q or q == [""]:
        raise InvalidRequest("Invalid request: missing q parameter")
    if not target:
        raise InvalidRequest("Invalid request: missing target parameter")
    many = "q" in request.state.arrays
    if len(q) > 1 and not many:
        raise InvalidRequest("Invalid request: q was given more than once; send a list for many.")
    fmt = libre_format(params)
    k = _alternatives_count(params, "alternatives" in request.state.arrays)
    source = libre_code(one(params, "source", "auto"))
    glossary_id = one(params, "glossary_id") or None
    service.check_batch_size(len(q))
    items = [
        make_item(text=t, source_lang=source, target_lang=target, format=fmt,
                  glossary_id=glossary_id)
        for t in q if not blank(t)
    ]  # fmt: skip
    _check_capacity(service, len(items), k)
    items = await apply_glossaries(request, service, items)
    results = await _translated(service, request, items)
    answers = in_place(q, results)
    body: dict[str, Any] = {"translatedText": _each(answers, many, _text)}
    if str(source).strip().lower() == "auto":  # as the service reads it
        body["detectedLanguage"] = _each(answers, many, _detected)
    if k > 0:
        found = iter(await _alternatives(service, request, items, results, k))
        body["alternatives"] = _each(answers, many, lambda a: _alternative(a, found))
    return body


async def _translated(
    service: TranslationService, request: Request, items: list[TextItem]
) -> list[TranslateResponse]:
    if not items:
        return []
    batch = BatchTranslateRequest(items=items)
    return all_translated(await translate_batch_charged(service, request, batch, True))


Answer = TranslateResponse | str  # a translation, or a blank text as it came


def _each(answers: list[Answer], many: bool, part: Callable[[Answer], Any]) -> Any:
    return [part(a) for a in answers] if many else part(answers[0])


def _text(answer: Answer) -> str:
    return answer if isinstance(answer, str) else answer.translation


def _alternative(answer: Answer, found: Iterator[list[str]]) -> list[str]:
    return [] if isinstance(answer, str) else next(found)


def _detected(answer: Answer) -> dict[str, Any]:
    if isinstance(answer, str):  # blank: nothing to detect
        return {"confidence": 0.0, "language": "und"}
    confidence = answer.detection_confidence or 0.0
    return {"confidence": round(confidence * 100, 1), "language": answer.source_lang}


# LibreTranslate's default --alternatives-limit.
MAX_ALTERNATIVES = 3


def _check_capacity(service: TranslationService, texts: int, k: int) -> None:
    """Texts and their alternatives must fit in what a replica runs at once."""
    if k and texts * (k + 1) > service.limits.max_engine_requests:
        raise InvalidRequest(
            f"Invalid request: {texts} texts with {k} alternatives each need more "
            f"than the {service.limits.max_engine_requests} translations a server runs at once"
        )


def _alternatives_count(params: Params, array: bool) -> int:
    """LibreTranslate's ``alternatives``: a number (negative counts as 0), at most
    ``MAX_ALTERNATIVES``; checked before any engine work."""
    raw = one(params, "alternatives", 0)
    try:
        if array:
            raise ValueError(raw)
        k = max(0, int(raw or 0))
    except (TypeError, ValueError):
        raise InvalidRequest("Invalid request: alternatives parameter is not a number") from None
    if k > MAX_ALTERNATIVES:
        raise InvalidRequest(
            f"Invalid request: alternatives parameter must be <= {MAX_ALTERNATIVES}"
        )
    return k


async def _alternatives(
    service: TranslationService,
    request: Request,
    items: list[TextItem],
    results: list[TranslateResponse],
    k: int,
) -> list[list[str]]:
    """Up to ``k`` other translations of each text: sampled, without duplicates or the
    translation itself (as LibreTranslate filters its hypotheses); none for HTML."""
    sampled = await service.alternatives(items, k, request.state.request_id)
    return [_unique(answers, r.translation) for r, answers in zip(results, sampled, strict=True)]


def _unique(answers: list[str], translation: str) -> list[str]:
    seen, out = {translation}, []
    for answer in answers:
        if answer.strip() and answer not in seen:
            seen.add(answer)
            out.append(answer)
    return out


def _detect_texts(service: TranslationService, params: Params, many: bool) -> list[str]:
    """``/detect``'s texts: ``q`` one text, or (a JSON list, ``q[]``) many, of which the
    blank ones are skipped; a list was refused as "missing q parameter"."""
    q = params.get("q") if many else [one(params, "q")]
    if not q or q == [None] or q == [""]:
        raise InvalidRequest("Invalid request: missing q parameter")
    if not all(isinstance(t, str) for t in q):
        raise InvalidRequest("Invalid request: q must be a string or a list of strings")
    service.check_batch_size(len(q))
    texts = [t for t in q if not blank(t)]
    return texts or q[:1]  # all blank: the blank text's own 400


Found = list[tuple[str, float]]


def _pooled(each: list[list[tuple[Language, float]]], lengths: list[int]) -> Found:
    """The languages of several texts as one list, as LibreTranslate's ``detect_languages``
    pools a batch: a language's confidence is its mean over the texts it was found in,
    and the languages are ranked by that mean times those texts' characters."""
    found: dict[str, list[float]] = {}
    weight: dict[str, int] = {}
    for candidates, length in zip(each, lengths, strict=True):
        for lang, confidence in candidates:
            found.setdefault(lang.code, []).append(confidence)
            weight[lang.code] = weight.get(lang.code, 0) + length
    mean = {code: sum(cs) / len(cs) for code, cs in found.items()}
    ranked = sorted(mean, key=lambda code: mean[code] * weight[code], reverse=True)
    return [(code, mean[code]) for code in ranked]


# LibreTranslate's error shape, {"error": ...}, with its statuses.
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"description": 'Error: {"error": ...}'} for code in (400, 401, 403, 413, 429, 503, 504)
}


def libre_router(
    app: FastAPI,
    service: TranslationService,
    prefix: str,
    documents: ReplicaDocuments | None = None,
) -> None:
    """Adds the LibreTranslate endpoints under ``prefix`` and their error shape to ``app``
    (``/translate_file`` with ``documents``)."""
    router = APIRouter(prefix=prefix, tags=["LibreTranslate compatibility"], responses=_ERRORS)
    if documents is not None:
        libre_document_routes(router, documents, prefix)

    @router.post("/translate", openapi_extra=request_body(LibreTranslateBody))
    async def translate(request: Request) -> dict[str, Any]:
        """LibreTranslate ``POST /translate``: ``q`` a string or a list of strings."""
        with keeping_same_language():
            return await _translate(service, request)

    @get_and_post(router, "/languages", "libre_languages")
    async def languages() -> list[dict[str, Any]]:
        """LibreTranslate ``/languages``: codes, names and the targets of each."""
        return [
            {"code": code, "name": lang.name, "targets": service.languages.targets_for(code)}
            for code, lang in service.languages.languages.items()
        ]

    @router.get("/frontend/settings")
    async def libre_frontend_settings() -> dict[str, Any]:
        """LibreTranslate ``/frontend/settings``: what its web front end and some clients
        read first (limits, whether keys are needed, files, default languages)."""
        return frontend_settings(service, documents, app.state.store)

    @router.post("/detect", openapi_extra=request_body(LibreDetectBody))
    async def detect(request: Request) -> list[dict[str, Any]]:
        """LibreTranslate ``POST /detect``: likely languages of ``q`` (a text, or a list
        whose languages are pooled, as LibreTranslate does), confidences 0-100."""
        texts = _detect_texts(service, await read_params(request), "q" in request.state.arrays)
        found = _pooled([service.detect(t) for t in texts], [len(t) for t in texts])
        return [{"confidence": round(c * 100, 1), "language": code} for code, c in found]

    app.include_router(router)
    register_error_format(app, prefix, libre_error, LIBRE_KEYS)
