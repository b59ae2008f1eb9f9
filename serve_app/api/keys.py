"""API keys from the store, with quotas enforced cluster-wide.

``KeyMiddleware`` identifies the caller by the key it presents (``Authorization: Bearer``,
``DeepL-Auth-Key``, ``X-API-Key``, or LibreTranslate's ``api_key`` parameter under its
prefix): first the keys from the environment or key file (compared in constant time, by
digest), then the store's keys (by digest, remembered per replica for ``cache_ttl_s``, so a
flood of requests costs one store read per key and period). A revoked key is refused at its
next request on every replica, because every request is then counted in the store, whose
charge refuses a revoked key.

Counting is exact, with no per-replica allowance: the middleware counts each request in the
key's minute window (``RateLimited``, 429 with Retry-After), and the translate routes charge
the characters of their texts before any work (``charged``), refunded if the work fails
(``QuotaExceeded``: DeepL answers 456, the others 429 with Retry-After). Both are one
atomic conditional update in the store, so concurrent requests on any number of replicas
never pass a limit and the counters add up exactly. Callers without a key have no limits:
their characters are added up in the replica and stored once a second (``AnonymousUsage``).

The caller's key id is ``request.state.key_id`` (``""`` when keys are off) and the context
variable ``apikeys.current_key``, which scopes the translation cache and owns stored
glossaries and documents.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from serve_app.api.anonymous_usage import AnonymousUsage
from serve_app.api.security import (
    BodyLimits,
    _parameter_key,
    _presented_key,
    _refuse,
    _replay,
    body_too_large,
    is_open,
    open_prefixes,
    read_bounded,
    run_as_key,
)
from serve_app.core.errors import MissingKey, ServiceError, StoreUnavailable
from serve_app.core.schemas import BatchTranslateRequest, BatchTranslateResponse, ItemError
from serve_app.store.apikeys import digest, env_key_id
from serve_app.store.protocol import Store, Usage
from serve_app.translation.service import TranslationService

logger = logging.getLogger("ray.serve.translator")


class KeyResolver:
    """Key id of a presented secret: an environment key's ``env-...`` id or a stored key's
    id; None for an unknown or revoked one. ``required``: a request without a valid key is
    refused (keys are configured in the environment, or stored keys are switched on)."""

    def __init__(
        self,
        env_keys: list[str],
        store: Store | None,
        store_keys: bool,
        cache_ttl_s: float = 5.0,
        cache_entries: int = 10_000,
    ) -> None:
        self.env = [digest(k) for k in env_keys]
        self.store = store if store_keys else None
        self.required = bool(self.env) or self.store is not None
        self.ttl_s = cache_ttl_s
        self.max_entries = cache_entries
        self._known: OrderedDict[bytes, tuple[float, str | None]] = OrderedDict()

    def _env_key(self, d: bytes) -> str | None:
        matched = False
        for known in self.env:  # every digest compared: timing tells nothing
            matched |= hmac.compare_digest(d, known)
        return env_key_id(d) if matched else None

    async def identify(self, presented: bytes | None) -> str | None:
        if presented is None:
            return None
        d = digest(presented)
        if (key_id := self._env_key(d)) is not None or self.store is None:
            return key_id
        now = time.monotonic()
        cached = self._known.get(d)
        if cached is not None and cached[0] > now:
            return cached[1]
        key = await self.store.find_key(d)
        self._known[d] = (now + self.ttl_s, None if key is None else key.id)
        self._known.move_to_end(d)
        while len(self._known) > self.max_entries:
            self._known.popitem(last=False)
        return None if key is None else key.id


class KeyMiddleware:
    """401 without a valid key (when keys are required); otherwise counts the request in
    the key's minute window (429 beyond its limit) and runs the app with the key id set."""

    def __init__(
        self,
        app: ASGIApp,
        resolver: KeyResolver,
        store: Store | None,
        body_key_prefix: str | None = None,
        limits: BodyLimits | None = None,
    ) -> None:
        self.app = app
        self.resolver = resolver
        self.store = store
        self.body_key_prefix = body_key_prefix
        # A key sent in the body is looked for within the path's own limit: an upload
        # route's (``/translate_file``) is the documents' limit, not the JSON routes'.
        self.limits = limits or BodyLimits(1 << 20)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or is_open(path, open_prefixes(self.body_key_prefix)):
            await self.app(scope, receive, send)
            return
        try:
            key_id, receive = await self._identify(scope, receive)
            if key_id is None:
                raise MissingKey()
            if self.store is not None and key_id:
                await self.store.charge(key_id, 0, requests=1)
        except ServiceError as exc:
            await _refuse(exc, scope, receive, send)
            return
        except Exception:  # the store failed in a way of its own: retryable
            logger.exception("API key check failed")
            unavailable = StoreUnavailable("The key store is unavailable; retry.", retry_after_s=1)
            await _refuse(unavailable, scope, receive, send)
            return
        await run_as_key(self.app, key_id, scope, receive, send)

    async def _identify(self, scope: Scope, receive: Receive) -> tuple[str | None, Receive]:
        """The key id (``""`` when keys are not required and none was sent) and the
        receive channel to go on with (the buffered body replayed, if it was read)."""
        presented = _presented_key(scope)
        key_id = await self.resolver.identify(presented)
        if key_id is not None:
            return key_id, receive
        prefix = self.body_key_prefix
        if presented is None and prefix and scope["path"].startswith(prefix + "/"):
            max_bytes = self.limits.for_path(scope["path"])
            messages = await read_bounded(receive, max_bytes)
            if messages is None:
                raise body_too_large(max_bytes)
            receive = _replay(messages, receive)
            presented = await _parameter_key(scope, messages)
            key_id = await self.resolver.identify(presented)
            if key_id is not None:
                return key_id, receive
        return ("" if not self.resolver.required else None), receive


# Usage without keys is counted in the store too (no limits; in each replica first, stored
# once a second: api/anonymous_usage.py), so /usage and /v2/usage are
# cluster-wide, not one replica's.
ANONYMOUS = "anonymous"


def key_of(request: Request) -> str:
    """The caller's key id (``""`` when keys are off)."""
    return str(getattr(request.state, "key_id", "") or "")


def _counted_as(request: Request) -> str:
    return key_of(request) or ANONYMOUS


def store_of(request: Request) -> Store | None:
    return getattr(request.app.state, "store", None)


def anonymous_usage(request: Request) -> AnonymousUsage | None:
    return getattr(request.app.state, "anonymous_usage", None)


# What ``charged`` yields for a caller without a key: counted in the replica, not the store.
_LOCAL = Usage(ANONYMOUS, "", 0, None, 0, None)


@asynccontextmanager
async def charged(request: Request, characters: int) -> AsyncIterator[Usage | None]:
    """Charges ``characters`` to the caller's key before the block runs (refused with
    ``QuotaExceeded`` when they do not fit this month) and refunds them if it raises.
    Without a key they are counted under ``ANONYMOUS``, in the replica first
    (``AnonymousUsage``: no limits to check, so no store round trip before the work);
    without a store, not at all."""
    store, key_id = store_of(request), _counted_as(request)
    if store is None:
        yield None
        return
    local = anonymous_usage(request)
    if key_id == ANONYMOUS and local is not None:
        local.add(characters)
        try:
            yield _LOCAL
        except BaseException:
            local.add(-characters)
            raise
        return
    usage = await store.charge(key_id, characters, requests=0)
    try:
        yield usage
    except BaseException:
        # Shielded: a cancelled request still gets its characters back.
        await asyncio.shield(store.refund(key_id, characters, usage.month))
        raise


async def refund(request: Request, usage: Usage | None, characters: int) -> None:
    """Gives back part of a charge (the texts of a batch that failed)."""
    store, local = store_of(request), anonymous_usage(request)
    if store is None or usage is None or characters <= 0:
        return
    if usage is _LOCAL and local is not None:
        local.add(-characters)
    else:
        await store.refund(usage.key_id, characters, usage.month)


async def translate_batch_charged(
    service: TranslationService,
    request: Request,
    batch: BatchTranslateRequest,
    all_or_nothing: bool = False,
) -> BatchTranslateResponse:
    """``service.translate_batch`` with the texts' characters charged first; the items that
    failed are refunded (every item, with ``all_or_nothing``: APIs whose answer is then an
    error, so nothing was delivered)."""
    chars = [len(item.text) for item in batch.items]
    async with charged(request, sum(chars)) as usage:
        response = await service.translate_batch(batch, request.state.request_id)
    failed = [r.index for r in response.results if isinstance(r, ItemError)]
    back = sum(chars) if all_or_nothing and failed else sum(chars[i] for i in failed)
    await refund(request, usage, back)
    return response


async def caller_usage(request: Request) -> Usage | None:
    """The caller's usage from the store (all callers without a key together); None
    without a store."""
    store, key_id, local = store_of(request), _counted_as(request), anonymous_usage(request)
    if store is None:
        return None
    if key_id == ANONYMOUS and local is not None:
        await local.flush()  # this replica's counts at once; the others' within a second
    return await store.usage(key_id)
