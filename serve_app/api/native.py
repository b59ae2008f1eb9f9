"""The native API's routes: translate (one, batch, streamed), languages, health, usage, cache.

Routes are thin: parse, call the service, return its model; errors go through the one mapper
(``api/errors.py``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from serve_app.api.bodies import has_lone_surrogate, lone_surrogate
from serve_app.api.glossaries import apply_glossaries
from serve_app.api.keys import caller_usage, charged, key_of, translate_batch_charged
from serve_app.api.pacing import paced
from serve_app.api.sse import EventStreamResponse, opened, sse_stream
from serve_app.core.errors import EngineUnavailable, ServiceError
from serve_app.core.schemas import (
    BatchTranslateRequest,
    BatchTranslateResponse,
    CacheStatsResponse,
    ErrorDetail,
    HealthResponse,
    ItemError,
    KeyUsageResponse,
    LanguagesResponse,
    ReadinessResponse,
    TranslateRequest,
    TranslateResponse,
)
from serve_app.translation.service import TranslationService

_ERROR = {"description": 'Error: {"error": {"code": ..., "message": ...}}'}
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: _ERROR for code in (400, 401, 413, 422, 429, 503, 504)
}
_STREAM: dict[str, Any] = {
    "description": "text/event-stream: events start, delta (text as generated), done (the "
    'whole response) or error ({"error": {"code", "message"}}).',
    "content": {"text/event-stream": {}},
}


def native_router(service: TranslationService) -> APIRouter:
    """The native API's routes over ``service``."""
    app = APIRouter()
    _translation_routes(app, service)
    _status_routes(app, service)
    return app


def _translation_routes(app: APIRouter, service: TranslationService) -> None:
    @app.post("/translate", response_model=TranslateResponse, responses=_ERRORS)
    async def translate(body: TranslateRequest, request: Request) -> TranslateResponse:
        """Translates one text."""
        request.state.pair = service.pair_labels([body])
        (body,) = await apply_glossaries(request, service, [body])
        async with charged(request, len(body.text)):
            return await service.translate(body, request.state.request_id)

    @app.post("/translate/batch", response_model=BatchTranslateResponse, responses=_ERRORS)
    async def translate_batch(
        body: BatchTranslateRequest, request: Request
    ) -> BatchTranslateResponse:
        """Translates many texts concurrently; results keep the order of ``items``."""
        service.check_batch_size(len(body.items))  # before any work per item
        request.state.pair = service.pair_labels(body.items)
        items = await apply_glossaries(request, service, body.items)
        body = body.model_copy(update={"items": items})
        return await translate_batch_items(service, request, body)

    @app.post("/translate/stream", responses={**_ERRORS, 200: _STREAM})
    async def translate_stream(body: TranslateRequest, request: Request) -> StreamingResponse:
        """Translates one text, streamed as server-sent events as it is generated."""
        request.state.pair = service.pair_labels([body])
        (body,) = await apply_glossaries(request, service, [body])
        request_id = request.state.request_id
        async with charged(request, len(body.text)):  # refunded if the stream cannot start
            events = await opened(await service.translate_stream(body, request_id))
        interval = service.limits.stream_interval_s
        return EventStreamResponse(paced(sse_stream(events, request_id), interval), events)


async def translate_batch_items(
    service: TranslationService, request: Request, body: BatchTranslateRequest
) -> BatchTranslateResponse:
    """The batch translated, each item whose text is not valid Unicode (a lone surrogate,
    let through by ``bodies.DEFERRED``) answered with its own error in its place: the
    service sees an empty text there, which it refuses for that item at no cost."""
    bad = {i for i, item in enumerate(body.items) if has_lone_surrogate(item.text)}
    if bad:
        items = [
            it.model_copy(update={"text": ""}) if i in bad else it
            for i, it in enumerate(body.items)
        ]
        body = body.model_copy(update={"items": items})
    response = await translate_batch_charged(service, request, body)
    for i in bad:
        error = lone_surrogate(f"items[{i}].text")
        response.results[i] = ItemError(
            index=i, error=ErrorDetail(code=error.code, message=error.message)
        )
    return response


def _status_routes(app: APIRouter, service: TranslationService) -> None:
    @app.get("/languages", response_model=LanguagesResponse)
    async def languages() -> LanguagesResponse:
        """Languages offered and, for each, the targets it can be translated into."""
        return service.list_languages()

    @app.get("/healthz", response_model=HealthResponse)
    async def healthz() -> HealthResponse:
        """Liveness: the replica's process answers."""
        return HealthResponse(status="ok")

    @app.get("/readyz", response_model=ReadinessResponse, responses={503: _ERROR})
    async def readyz() -> ReadinessResponse:
        """Readiness: the engine is started and healthy; with this replica's load."""
        try:
            if not service.ready:
                raise EngineUnavailable("The engine is not ready yet.", retry_after_s=5)
            await service.check_health()
        except ServiceError:
            raise
        except Exception as exc:
            raise EngineUnavailable("The engine is not healthy.", retry_after_s=5) from exc
        return ReadinessResponse(
            status="ready",
            in_flight=service.in_flight,
            engine_requests=service.engine.num_unfinished_requests(),
        )

    @app.get("/usage", response_model=KeyUsageResponse, responses=_ERRORS)
    async def usage(request: Request) -> KeyUsageResponse:
        """The caller's key's usage this month and minute, with its limits (from the store,
        cluster-wide); without keys, what this replica translated."""
        found = await caller_usage(request)
        if found is None:
            return KeyUsageResponse(scope="replica", characters=service.characters)
        return KeyUsageResponse(
            scope="key" if key_of(request) else "anonymous",
            month=found.month,
            characters=found.characters,
            character_limit=found.character_limit,
            requests_this_minute=found.minute_requests,
            requests_per_minute=found.requests_per_minute,
        )

    @app.get("/cache", response_model=CacheStatsResponse)
    async def cache_stats() -> CacheStatsResponse:
        """This replica's translation cache: hits, misses, size."""
        return service.cache_stats()
