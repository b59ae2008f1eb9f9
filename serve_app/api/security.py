"""Request-level protection: optional API keys, a limit on the request body's size, and the
security headers of every answer (``api/headers.py``).

Both are ASGI middlewares in front of the routes, so a refused request costs no parsing and
no engine work. Keys come from an environment variable and/or a file (never from the config
itself, so they stay out of ``serve_config.yaml`` and out of logs); they are compared in
constant time, by digest, against every configured key. LibreTranslate's clients send their
key as an ``api_key`` parameter: under its prefix, a request without a valid key header has
its (size-bounded) body read to find one. Answers go through the one error
mapper (``errors.service_error_response``), so they have the service's JSON shape.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from serve_app.api.bodies import refuse_compressed
from serve_app.api.bodies import replay as _replay
from serve_app.api.compat.common import one, read_params
from serve_app.api.errors import service_error_response
from serve_app.api.headers import SecurityHeadersMiddleware
from serve_app.core.config import SecurityConfig
from serve_app.core.context import current_key
from serve_app.core.errors import (
    BodyTooLarge,
    InvalidRequest,
    KeysMissing,
    MissingKey,
    ServiceError,
)
from serve_app.store.apikeys import env_key_id
from serve_app.store.protocol import Store

# Probes stay open: load balancers and Ray health checks carry no keys, and they reveal no text.
# So do the web page's files (``/``, ``/ui/static/...``): what the page fetches needs a key.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/"})
OPEN_PREFIXES = ("/ui/static/",)


def is_open(path: str, more_prefixes: tuple[str, ...] = ()) -> bool:
    """Paths served without a key: the probes, the web page and its files, and
    ``more_prefixes`` (every key middleware asks this one place)."""
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES + more_prefixes)


def open_prefixes(body_key_prefix: str | None) -> tuple[str, ...]:
    """LibreTranslate's ``/download_file/<id>.<name>``: its clients fetch the
    ``translatedFileUrl`` without a key, as LibreTranslate serves it; the job's random id
    (122 bits) is the download's credential."""
    return (f"{body_key_prefix}/download_file/",) if body_key_prefix else ()


def load_api_keys(config: SecurityConfig) -> list[str]:
    """Keys from ``api_keys_env`` (comma-separated) and ``api_keys_file`` (one a line, ``#``
    comments); an empty list (no source configured) means keys are off.

    Keys fail closed: a configured source that yields no key (the variable unset or empty on
    this node, a file of comments only) raises ``KeysMissing``, and a missing file
    ``FileNotFoundError``, so the replica does not start rather than serve without keys."""
    keys: list[str] = []
    if config.api_keys_env:
        found = _keys(os.environ.get(config.api_keys_env, "").split(","))
        if not found:
            raise KeysMissing(
                f"security.api_keys_env names the variable {config.api_keys_env}, which is "
                "unset or holds no key on this node: set it (comma-separated keys) in the "
                "replica's environment (runtime_env env_vars, or the pod's env from a "
                "Secret), or remove security.api_keys_env to serve without keys."
            )
        keys += found
    if config.api_keys_file:
        lines = Path(config.api_keys_file).read_text(encoding="utf-8").splitlines()
        found = _keys(line for line in lines if not line.lstrip().startswith("#"))
        if not found:
            raise KeysMissing(
                f"security.api_keys_file {config.api_keys_file} holds no key (only blank or "
                "'#' lines): add keys, one a line, or remove security.api_keys_file to serve "
                "without keys."
            )
        keys += found
    return keys


def _keys(raw: Iterable[str]) -> list[str]:
    return [k.strip() for k in raw if k.strip()]


class BodyLimits:
    """The largest body a path accepts: ``default``, or the limit of the longest prefix in
    ``larger`` that the path starts with (file uploads)."""

    def __init__(self, default: int, larger: Mapping[str, int] | None = None) -> None:
        self.default = default
        self.larger = sorted((larger or {}).items(), key=lambda kv: -len(kv[0]))

    def for_path(self, path: str) -> int:
        for prefix, limit in self.larger:
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                return limit
        return self.default


def install_security(
    app: FastAPI,
    config: SecurityConfig,
    body_key_prefix: str | None = None,
    store: Store | None = None,
    upload_limits: Mapping[str, int] | None = None,
) -> None:
    """Adds the body limit and, when keys are configured, the key check in front of it
    (a request without a key is refused before its body is read, except under
    ``body_key_prefix``, whose clients may send the key as an ``api_key`` parameter).
    With a store, ``api/keys.py``'s middleware checks keys instead: stored keys too (when
    ``store_keys``), and every key's usage counted and limited in the store.
    ``upload_limits``: path prefixes that take larger bodies (document uploads). Every answer
    gets the security headers (``api/headers.py``), refusals included."""
    docs = (app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url)
    limits = BodyLimits(config.max_body_bytes, upload_limits)
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=config.max_body_bytes, limits=limits)
    if store is not None:
        from serve_app.api.keys import KeyMiddleware, KeyResolver  # it builds on this module

        resolver = KeyResolver(load_api_keys(config), store, config.store_keys)
        app.add_middleware(
            KeyMiddleware,
            resolver=resolver,
            store=store,
            body_key_prefix=body_key_prefix,
            limits=limits,
        )
    elif keys := load_api_keys(config):
        app.add_middleware(
            ApiKeyMiddleware,
            keys=keys,
            body_key_prefix=body_key_prefix,
            max_body_bytes=config.max_body_bytes,
            limits=limits,
        )
    app.add_middleware(SecurityHeadersMiddleware, own_scripts=[p for p in docs if p])


def _digest(key: str | bytes) -> bytes:
    raw = key.encode() if isinstance(key, str) else key
    return hashlib.sha256(raw).digest()


def _presented_key(scope: Scope) -> bytes | None:
    headers = dict(scope.get("headers") or [])
    auth = headers.get(b"authorization", b"")
    for scheme in (b"bearer ", b"deepl-auth-key "):  # DeepL clients send their own scheme
        if auth[: len(scheme)].lower() == scheme:
            return auth[len(scheme) :].strip()
    return headers.get(b"x-api-key")


async def _refuse(exc: ServiceError, scope: Scope, receive: Receive, send: Send) -> None:
    """``exc`` answered by the one error mapper (a key refusal with its API's challenge)."""
    await service_error_response(exc, Request(scope))(scope, receive, send)


async def _parameter_key(scope: Scope, messages: list[Message]) -> bytes | None:
    """The ``api_key`` parameter of a buffered request (query, JSON or form body), as
    LibreTranslate's clients send it; None when absent. A body that cannot be read (invalid
    UTF-8, a broken multipart frame) raises its ``InvalidRequest``: the answer is that 400,
    not a 401 for a key that was perhaps sent; a compressed one its 415 (it was read as
    "not valid UTF-8")."""
    refuse_compressed(Headers(scope=scope))

    async def no_more() -> Message:
        return {"type": "http.disconnect"}

    try:
        params = await read_params(Request(scope, _replay(messages, no_more)))
    except HTTPException:
        return None
    key = one(params, "api_key")
    return key.encode() if isinstance(key, str) else None


class ApiKeyMiddleware:
    """401 unless the request carries a configured key (``Authorization: Bearer KEY``,
    ``Authorization: DeepL-Auth-Key KEY`` or ``X-API-Key: KEY``; under ``body_key_prefix``
    also an ``api_key`` parameter). Every key is compared, so timing tells nothing about
    which matched."""

    def __init__(
        self,
        app: ASGIApp,
        keys: list[str],
        body_key_prefix: str | None = None,
        max_body_bytes: int = 1 << 20,
        limits: BodyLimits | None = None,
    ) -> None:
        self.app = app
        self.digests = [_digest(k) for k in keys]
        self.body_key_prefix = body_key_prefix
        self.limits = limits or BodyLimits(max_body_bytes)

    def allows(self, presented: bytes | None) -> bool:
        return self.key_id(presented) is not None

    def key_id(self, presented: bytes | None) -> str | None:
        """The id of the configured key presented (as ``api/keys.py`` names environment
        keys), or None."""
        digest = _digest(presented or b"")
        matched = False
        for known in self.digests:
            matched |= hmac.compare_digest(digest, known)
        return env_key_id(digest) if matched and presented is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or is_open(path, open_prefixes(self.body_key_prefix)):
            await self.app(scope, receive, send)
            return
        if (key_id := self.key_id(_presented_key(scope))) is not None:
            await run_as_key(self.app, key_id, scope, receive, send)
            return
        prefix = self.body_key_prefix
        if prefix and scope["path"].startswith(prefix + "/"):
            max_bytes = self.limits.for_path(scope["path"])
            messages = await read_bounded(receive, max_bytes)
            if messages is None:
                await _refuse(body_too_large(max_bytes), scope, receive, send)
                return
            try:
                presented = await _parameter_key(scope, messages)
            except InvalidRequest as exc:
                await _refuse(exc, scope, receive, send)
                return
            if (key_id := self.key_id(presented)) is not None:
                await run_as_key(self.app, key_id, scope, _replay(messages, receive), send)
                return
        await _refuse(MissingKey(), scope, receive, send)


async def run_as_key(app: ASGIApp, key_id: str, scope: Scope, receive: Receive, send: Send) -> None:
    """``app`` with the caller's key id set (in the scope's state and ``current_key``): it
    scopes the translation cache, usage and stored glossaries."""
    scope.setdefault("state", {})["key_id"] = key_id
    token = current_key.set(key_id)
    try:
        await app(scope, receive, send)
    finally:
        current_key.reset(token)


class BodySizeLimitMiddleware:
    """413 for a body over ``max_bytes``: at once from ``Content-Length``, else (chunked
    uploads) after reading at most ``max_bytes + 1`` bytes, which are then replayed."""

    def __init__(self, app: ASGIApp, max_bytes: int, limits: BodyLimits | None = None) -> None:
        self.app = app
        self.limits = limits or BodyLimits(max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.limits.for_path(scope["path"])
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            # (A length of thousands of digits is refused before int() would refuse it.)
            if not length.isdigit() or len(length) > 15 or int(length) > max_bytes:
                await _refuse(body_too_large(max_bytes), scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        messages = await read_bounded(receive, max_bytes)
        if messages is None:
            await _refuse(body_too_large(max_bytes), scope, receive, send)
            return
        await self.app(scope, _replay(messages, receive), send)


def body_too_large(max_bytes: int) -> BodyTooLarge:
    return BodyTooLarge(f"The request body is larger than {max_bytes} bytes.")


async def read_bounded(receive: Receive, max_bytes: int) -> list[Message] | None:
    """The request's body messages, or None once they exceed ``max_bytes``."""
    messages, size = [], 0
    while True:
        message = await receive()
        messages.append(message)
        size += len(message.get("body", b""))
        if size > max_bytes:
            return None
        if message["type"] != "http.request" or not message.get("more_body", False):
            return messages
