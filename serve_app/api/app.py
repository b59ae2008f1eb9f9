"""The HTTP API: one FastAPI app over one ``TranslationService``, built per replica.

``create_app`` puts the layers together: the error mapper (``errors.py``), the strict body
decoding (``bodies.py``), the security and bookkeeping middlewares, the native routes
(``native.py``) and the compatibility APIs (``compat/``). It is testable without Ray.
"""

from __future__ import annotations

from fastapi import FastAPI

from serve_app.api.anonymous_usage import AnonymousUsage
from serve_app.api.bodies import BodyCheckMiddleware
from serve_app.api.body_deadline import BodyDeadlineMiddleware
from serve_app.api.compat.deepl import deepl_router
from serve_app.api.compat.libre import libre_router
from serve_app.api.compat.openai.router import openai_router
from serve_app.api.documents import documents_router
from serve_app.api.errors import install_error_handlers
from serve_app.api.glossaries import glossaries_router
from serve_app.api.keys import ANONYMOUS
from serve_app.api.middleware import MetricsMiddleware, ReplicaHeaderMiddleware, RequestIdMiddleware
from serve_app.api.native import native_router
from serve_app.api.security import install_security
from serve_app.api.slashes import install_slash_redirects
from serve_app.api.web.router import web_router
from serve_app.core.glossary_terms import IndexCache
from serve_app.documents.replica import ReplicaDocuments
from serve_app.store.protocol import Store
from serve_app.translation.service import TranslationService


def create_app(
    service: TranslationService,
    replica_id: str | None = None,
    store: Store | None = None,
    documents: ReplicaDocuments | None = None,
) -> FastAPI:
    """The API over ``service``; ``replica_id``, if given, is sent as ``X-Replica``;
    ``store``: the shared store (stored keys and usage, glossaries, documents), if any;
    ``documents``: document translation (the replica's worker and the store's jobs)."""
    app = FastAPI(
        title="Translation service",
        summary="Machine translation with LLMs on vLLM and Ray Serve.",
        version="0.1.0",
    )
    app.state.store = store
    app.state.glossary_indexes = IndexCache()  # stored glossaries' term indexes
    app.state.anonymous_usage = AnonymousUsage(store, ANONYMOUS) if store is not None else None
    install_error_handlers(app)
    install_slash_redirects(app)  # relative Location: never a host from the Host header
    app.add_middleware(BodyCheckMiddleware)  # innermost: behind the key check and body limit
    prefix = service.config.compat.libretranslate_prefix
    install_security(
        app, service.config.security, prefix, store, _upload_limits(service, documents)
    )
    security = service.config.security  # the deadline covers every body read behind it
    app.add_middleware(
        BodyDeadlineMiddleware,
        timeout_s=security.body_timeout_s,
        min_rate=security.body_min_bytes_per_s,
    )
    app.add_middleware(MetricsMiddleware, metrics=service.metrics)
    app.add_middleware(RequestIdMiddleware)
    if replica_id:
        app.add_middleware(ReplicaHeaderMiddleware, replica_id=replica_id)
    app.include_router(native_router(service))
    if store is not None:
        glossaries_router(app, service)
    if documents is not None:
        documents_router(app, documents)
    _install_compat(app, service, documents)
    app.include_router(web_router(service))
    return app


def _install_compat(
    app: FastAPI, service: TranslationService, documents: ReplicaDocuments | None
) -> None:
    compat = service.config.compat
    if compat.deepl:
        deepl_router(app, service, documents)
    if compat.openai:
        openai_router(app, service)
    if compat.libretranslate_prefix:
        libre_router(app, service, compat.libretranslate_prefix, documents)


def _upload_limits(
    service: TranslationService, documents: ReplicaDocuments | None
) -> dict[str, int]:
    """The upload routes' body limit: the largest document plus room for the form."""
    if documents is None:
        return {}
    limit = documents.config.max_bytes + 64 * 1024
    paths = ["/documents", "/v2/document"]
    if prefix := service.config.compat.libretranslate_prefix:
        paths.append(prefix + "/translate_file")
    return dict.fromkeys(paths, limit)
