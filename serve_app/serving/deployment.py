"""The Ray Serve deployment: one translator replica, one GPU, one vLLM engine.

Ray's HTTP proxy routes each request straight to a replica, whose FastAPI app (built at
replica start, over the replica's own service) calls the engine from its event loop. The
engine is injected (``engine_cls``) so tests can swap it. Replica options (GPUs, autoscaling,
queue limits, health checks) come from ``serve_config.yaml``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from ray import serve

from serve_app.api.app import create_app
from serve_app.api.security import load_api_keys
from serve_app.core.config import AppConfig, EngineConfig
from serve_app.documents.replica import ReplicaDocuments
from serve_app.engine.protocol import TranslationEngine
from serve_app.engine.vllm import VLLMEngine
from serve_app.serving.autoscaling import replica_stats
from serve_app.serving.metrics import RayDocumentMetrics, RayServeMetrics
from serve_app.store.factory import clean_periodically, needs_deployment, store_for_replica
from serve_app.store.protocol import Store
from serve_app.translation.service import TranslationService

logger = logging.getLogger("ray.serve.translator")

EngineFactory = Callable[[EngineConfig], TranslationEngine]


async def exit_when_engine_dies(
    service: TranslationService,
    period_s: float = 1.0,
    exit_process: Callable[[int], object] = os._exit,
) -> None:
    """Ends the replica's process as soon as its engine is dead.

    A dead engine answers every request at once with a 503, so this replica looks the least
    loaded to Ray's router and draws most of the traffic until Ray's health check has failed
    three times (30 s at a 10 s period). Leaving at once instead makes Ray Serve route around
    it and start a replacement; the failed requests were retryable 503s. A replica that is
    shutting down (``service.ready`` false) is left alone.
    """
    while service.ready:
        await asyncio.sleep(period_s)
        try:
            await service.check_health()
        except Exception:
            if not service.ready:
                return
            logger.error("the vLLM engine died: this replica exits so Ray Serve replaces it")
            exit_process(1)
            return


@serve.deployment(name="Translator")
@serve.ingress()
class TranslatorDeployment:
    # Ray Serve awaits an async constructor.
    async def __init__(  # type: ignore[misc]
        self,
        config: AppConfig,
        engine_cls: EngineFactory = VLLMEngine,
        store_handle: Any | None = None,
    ) -> None:
        """``store_handle``: the ``StoreDeployment``'s handle when the store is SQLite."""
        # vLLM's own logging setup would replace the handlers Ray Serve gives the replica
        # (its log file, JSON encoding, request ids); vLLM's loggers then use Ray's.
        os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
        # Keys fail closed: a configured key source that yields none on this node stops the
        # replica here, before the engine starts, with a message that says what to set.
        load_api_keys(config.security)
        self.store = await self._open_store(config, store_handle)
        metrics = RayServeMetrics()
        self.service = TranslationService(config, engine_cls(config.engine), metrics)
        try:
            await self.service.start()
        except BaseException:
            self.service.shutdown()
            raise
        loop = asyncio.get_running_loop()
        self._watchdog = loop.create_task(exit_when_engine_dies(self.service))
        self._metrics_flusher = loop.create_task(metrics.flush_periodically())
        self.documents = self._start_documents(config)
        logger.info("translator replica ready (model %s)", config.served_model_name)

    async def _open_store(self, config: AppConfig, handle: Any | None) -> Store | None:
        if config.store is None:
            return None
        store = await store_for_replica(config.store, handle)
        if not needs_deployment(config.store):  # PostgreSQL: every replica cleans up
            self._cleaner = asyncio.get_running_loop().create_task(clean_periodically(store))
        return store

    def __serve_build_asgi_app__(self) -> FastAPI:
        replica = serve.get_replica_context().replica_id.unique_id
        return create_app(
            self.service, replica_id=replica, store=self.store, documents=self.documents
        )

    def _start_documents(self, config: AppConfig) -> ReplicaDocuments | None:
        """Document translation: its routes and this replica's worker (needs the store)."""
        if self.store is None or not config.documents.enabled:
            return None
        name = serve.get_replica_context().replica_id.unique_id
        documents = ReplicaDocuments(
            self.service, self.store, config.documents, name, RayDocumentMetrics()
        )
        documents.start()
        return documents

    async def check_health(self) -> None:
        """Raising here makes Ray Serve mark the replica unhealthy and replace it."""
        await self.service.check_health()

    def record_autoscaling_stats(self) -> dict[str, float]:
        """This replica's queue, for the queue-depth autoscaling policy (``autoscaling.py``)."""
        return replica_stats(self.service.engine.load(), self.service.in_flight)

    def __del__(self) -> None:
        service = getattr(self, "service", None)
        if service is not None:
            service.shutdown()
