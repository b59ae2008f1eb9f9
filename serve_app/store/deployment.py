"""One store for the whole fleet when the store is a SQLite file.

A SQLite file has one writer and lives on one disk, so exactly one ``StoreDeployment``
replica opens it, pinned to the head node (Ray's ``node:__internal_head__`` resource), and
every translator replica, on any node, calls it through a Serve handle wrapped as a
``RemoteStore``. Ray Serve restarts the deployment if it dies; committed transactions are
in the file (WAL), so nothing accepted is lost, and calls made while it is down fail fast
with a 503 (``StoreUnavailable``) instead of hanging. With PostgreSQL the deployment is not
used: every replica opens its own pool (``factory.open_store``).

Errors raised in the store travel back as values (the exception, pickled with its
``retry_after_s``) and are raised again on the caller's side, so a quota refusal reaches the
client as the same ``QuotaExceeded``, not as a Ray task error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ray import serve

from serve_app.core.errors import ServiceError, StoreUnavailable
from serve_app.core.store_config import StoreConfig, StoreLimits
from serve_app.store.factory import clean_periodically, open_local_store
from serve_app.store.protocol import (
    ApiKey,
    CleanupReport,
    DocumentBacklog,
    DocumentJob,
    Glossary,
    GlossaryDictionary,
    NewSegment,
    SegmentClaim,
    Store,
    Usage,
)

logger = logging.getLogger("ray.serve.store")

# What a handle may call: the Store's coroutines, nothing else of the object.
METHODS = frozenset(name for name in Store.__abstractmethods__ if name not in {"close", "ping"}) | {
    "ping"
}
CALL_TIMEOUT_S = 30.0


@serve.deployment(
    name="Store",
    num_replicas=1,
    max_ongoing_requests=1000,
    ray_actor_options={"num_cpus": 0, "resources": {"node:__internal_head__": 0.001}},
    health_check_period_s=10,
)
class StoreDeployment:
    """Owns the SQLite store; serves ``call(method, args, kwargs)`` to every replica and
    deletes expired documents and past usage windows every minute."""

    async def __init__(self, config: StoreConfig) -> None:  # type: ignore[misc]
        self.store = await open_local_store(config)
        self._cleaner = asyncio.get_running_loop().create_task(clean_periodically(self.store))
        logger.info("store ready (%s)", config.backend)

    async def call(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """``("ok", value)`` or ``("error", exception)`` for a ``ServiceError``."""
        if method not in METHODS:
            raise ValueError(f"not a store method: {method}")
        try:
            return "ok", await getattr(self.store, method)(*args, **kwargs)
        except ServiceError as exc:
            return "error", exc

    async def check_health(self) -> None:
        await self.store.ping()


class RemoteStore(Store):
    """The ``Store`` of a ``StoreDeployment``, through a Serve deployment handle."""

    def __init__(
        self,
        handle: Any,
        limits: StoreLimits | None = None,
        timeout_s: float = CALL_TIMEOUT_S,
    ) -> None:
        """``limits``: the deployment's (the same ``store.limits`` of the config)."""
        self.handle = handle
        self.limits = limits or StoreLimits()
        self.timeout_s = timeout_s

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(self.timeout_s):
                outcome, value = await self.handle.call.remote(method, args, kwargs)
        except TimeoutError as exc:
            raise StoreUnavailable("The store did not answer in time; retry.") from exc
        except ServiceError:
            raise
        except Exception as exc:  # the store's replica died or is restarting
            raise StoreUnavailable(f"The store is unavailable ({type(exc).__name__}).") from exc
        if outcome == "error":
            raise value
        return value

    async def close(self) -> None:
        """Nothing to release: the deployment owns the connection."""

    async def ping(self) -> None:
        await self._call("ping")

    async def create_glossary(
        self, owner: str, name: str, dictionaries: Sequence[GlossaryDictionary]
    ) -> Glossary:
        return await self._call("create_glossary", owner, name, list(dictionaries))

    async def list_glossaries(self, owner: str) -> list[Glossary]:
        return await self._call("list_glossaries", owner)

    async def get_glossary(self, owner: str, glossary_id: str) -> Glossary:
        return await self._call("get_glossary", owner, glossary_id)

    async def glossary_entries(
        self, owner: str, glossary_id: str, source_lang: str, target_lang: str
    ) -> tuple[tuple[str, str], ...]:
        args = (owner, glossary_id, source_lang, target_lang)
        return await self._call("glossary_entries", *args)

    async def update_glossary(
        self,
        owner: str,
        glossary_id: str,
        name: str | None,
        dictionaries: Sequence[GlossaryDictionary],
        merge: bool,
    ) -> Glossary:
        args = (owner, glossary_id, name, list(dictionaries), merge)
        return await self._call("update_glossary", *args)

    async def delete_glossary_dictionary(
        self, owner: str, glossary_id: str, source_lang: str, target_lang: str
    ) -> Glossary:
        args = (owner, glossary_id, source_lang, target_lang)
        return await self._call("delete_glossary_dictionary", *args)

    async def delete_glossary(self, owner: str, glossary_id: str) -> None:
        await self._call("delete_glossary", owner, glossary_id)

    async def create_key(
        self,
        name: str,
        digest: bytes,
        chars_per_month: int | None = None,
        requests_per_minute: int | None = None,
    ) -> ApiKey:
        args = (name, digest, chars_per_month, requests_per_minute)
        return await self._call("create_key", *args)

    async def find_key(self, digest: bytes) -> ApiKey | None:
        return await self._call("find_key", digest)

    async def list_keys(self) -> list[ApiKey]:
        return await self._call("list_keys")

    async def revoke_key(self, name_or_id: str) -> ApiKey:
        return await self._call("revoke_key", name_or_id)

    async def charge(self, key_id: str, characters: int, requests: int = 1) -> Usage:
        return await self._call("charge", key_id, characters, requests)

    async def refund(self, key_id: str, characters: int, month: str) -> None:
        await self._call("refund", key_id, characters, month)

    async def usage(self, key_id: str) -> Usage:
        return await self._call("usage", key_id)

    async def create_document(
        self,
        owner: str,
        name: str,
        format: str,
        source_lang: str | None,
        target_lang: str,
        options: Mapping[str, Any],
        source: bytes,
        segments: Sequence[NewSegment],
        ttl_s: float | None = None,
    ) -> DocumentJob:
        args = (owner, name, format, source_lang, target_lang, dict(options), source)
        return await self._call("create_document", *args, list(segments), ttl_s)

    async def get_document(self, owner: str | None, job_id: str) -> DocumentJob:
        return await self._call("get_document", owner, job_id)

    async def list_documents(self, owner: str) -> list[DocumentJob]:
        return await self._call("list_documents", owner)

    async def document_source(self, owner: str | None, job_id: str) -> bytes:
        return await self._call("document_source", owner, job_id)

    async def claim_segments(
        self, worker: str, limit: int, lease_s: float, job_id: str | None = None
    ) -> list[SegmentClaim]:
        return await self._call("claim_segments", worker, limit, lease_s, job_id)

    async def complete_segment(
        self, job_id: str, index: int, worker: str, translation: str
    ) -> DocumentJob:
        args = (job_id, index, worker, translation)
        return await self._call("complete_segment", *args)

    async def fail_segment(
        self, job_id: str, index: int, worker: str, error: str, retry: bool = True
    ) -> DocumentJob:
        args = (job_id, index, worker, error, retry)
        return await self._call("fail_segment", *args)

    async def segment_translations(self, job_id: str) -> list[str | None]:
        return await self._call("segment_translations", job_id)

    async def finish_document(self, job_id: str, result: bytes) -> DocumentJob:
        return await self._call("finish_document", job_id, result)

    async def fail_document(self, job_id: str, error: str) -> DocumentJob:
        return await self._call("fail_document", job_id, error)

    async def document_result(self, owner: str | None, job_id: str) -> bytes:
        return await self._call("document_result", owner, job_id)

    async def delete_document(self, owner: str, job_id: str) -> None:
        await self._call("delete_document", owner, job_id)

    async def document_backlog(self) -> DocumentBacklog:
        return await self._call("document_backlog")

    async def cleanup(self) -> CleanupReport:
        return await self._call("cleanup")
