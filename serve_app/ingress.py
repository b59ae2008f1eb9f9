"""The HTTP API: a FastAPI app over one ``TranslationService``.

Routes are thin: parse, call the service, return its model. Errors go through the one mapper
in ``errors``. Every response carries ``X-Request-ID`` (the client's, when it sent a sane one).
The app is built per replica by ``create_app`` and is testable without Ray.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve_app.compat_deepl import deepl_router
from serve_app.compat_libre import libre_router
from serve_app.errors import EngineUnavailable, ServiceError, install_error_handlers
from serve_app.metrics import ServiceMetrics, endpoint_label
from serve_app.schemas import (
    BatchTranslateRequest,
    BatchTranslateResponse,
    CacheStatsResponse,
    HealthResponse,
    LanguagesResponse,
    ReadinessResponse,
    TranslateRequest,
    TranslateResponse,
)
from serve_app.security import install_security
from serve_app.service import TranslationService
from serve_app.sse import HEADERS, sse_stream

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
_ERROR = {"description": 'Error: {"error": {"code": ..., "message": ...}}'}
_ERRORS: dict[int | str, dict[str, Any]] = {code: _ERROR for code in (400, 401, 413, 422, 503, 504)}
_STREAM: dict[str, Any] = {
    "description": "text/event-stream: events start, delta (text as generated), done (the "
    'whole response) or error ({"error": {"code", "message"}}).',
    "content": {"text/event-stream": {}},
}


class RequestIdMiddleware:
    """Gives each request an id (``request.state.request_id``), the engine's request id too.

    Behind Ray's proxy the id arrives in ``X-Request-ID`` (the client's, or one the proxy
    made) and the proxy echoes it; without a proxy in front, this middleware makes and echoes
    one. Ids that are too long or hold odd characters are replaced.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = dict(scope.get("headers") or []).get(b"x-request-id")
        text = sent.decode("latin-1") if sent is not None else ""
        request_id = text if _REQUEST_ID.match(text) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        if sent is not None:
            await self.app(scope, receive, send)
            return

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


class ReplicaHeaderMiddleware:
    """Names the replica that answered, so operators can see the load balancing."""

    def __init__(self, app: ASGIApp, replica_id: str) -> None:
        self.app = app
        self.header = (b"x-replica", replica_id.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_replica(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), self.header]}
            await send(message)

        await self.app(scope, receive, send_with_replica)


class MetricsMiddleware:
    """Counts every HTTP request by endpoint, status and language pair, and times it."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            pair = scope.get("state", {}).get("pair", ("", ""))
            seconds = time.perf_counter() - start
            self.metrics.request(endpoint_label(scope["path"]), status, pair, seconds)


def create_app(service: TranslationService, replica_id: str | None = None) -> FastAPI:
    """The API over ``service``; ``replica_id``, if given, is sent as ``X-Replica``."""
    app = FastAPI(
        title="Translation service",
        summary="Machine translation with LLMs on vLLM and Ray Serve.",
        version="0.1.0",
    )
    install_error_handlers(app)
    install_security(app, service.config.security, service.config.compat.libretranslate_prefix)
    app.add_middleware(MetricsMiddleware, metrics=service.metrics)
    app.add_middleware(RequestIdMiddleware)
    if replica_id:
        app.add_middleware(ReplicaHeaderMiddleware, replica_id=replica_id)

    @app.post("/translate", response_model=TranslateResponse, responses=_ERRORS)
    async def translate(body: TranslateRequest, request: Request) -> TranslateResponse:
        """Translates one text."""
        request.state.pair = service.pair_labels([body])
        return await service.translate(body, request.state.request_id)

    @app.post("/translate/batch", response_model=BatchTranslateResponse, responses=_ERRORS)
    async def translate_batch(
        body: BatchTranslateRequest, request: Request
    ) -> BatchTranslateResponse:
        """Translates many texts concurrently; results keep the order of ``items``."""
        request.state.pair = service.pair_labels(body.items)
        return await service.translate_batch(body, request.state.request_id)

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

    _add_feature_routes(app, service)
    _install_compat(app, service)
    return app


def _add_feature_routes(app: FastAPI, service: TranslationService) -> None:
    @app.post("/translate/stream", responses={**_ERRORS, 200: _STREAM})
    async def translate_stream(body: TranslateRequest, request: Request) -> StreamingResponse:
        """Translates one text, streamed as server-sent events as it is generated."""
        request.state.pair = service.pair_labels([body])
        request_id = request.state.request_id
        events = service.translate_stream(body, request_id)
        return StreamingResponse(
            sse_stream(events, request_id), media_type="text/event-stream", headers=HEADERS
        )

    @app.get("/cache", response_model=CacheStatsResponse)
    async def cache_stats() -> CacheStatsResponse:
        """This replica's translation cache: hits, misses, size."""
        return service.cache_stats()


def _install_compat(app: FastAPI, service: TranslationService) -> None:
    compat = service.config.compat
    if compat.deepl:
        deepl_router(app, service)
    if compat.libretranslate_prefix:
        libre_router(app, service, compat.libretranslate_prefix)
