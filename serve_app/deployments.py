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

from fastapi import FastAPI
from ray import serve

from serve_app.autoscaling import replica_stats
from serve_app.config import AppConfig, EngineConfig
from serve_app.engine import TranslationEngine, VLLMEngine
from serve_app.ingress import create_app
from serve_app.metrics import RayServeMetrics
from serve_app.service import TranslationService

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
        self, config: AppConfig, engine_cls: EngineFactory = VLLMEngine
    ) -> None:
        # vLLM's own logging setup would replace the handlers Ray Serve gives the replica
        # (its log file, JSON encoding, request ids); vLLM's loggers then use Ray's.
        os.environ.setdefault("VLLM_CONFIGURE_LOGGING", "0")
        self.service = TranslationService(config, engine_cls(config.engine), RayServeMetrics())
        try:
            await self.service.start()
        except BaseException:
            self.service.shutdown()
            raise
        self._watchdog = asyncio.get_running_loop().create_task(exit_when_engine_dies(self.service))
        logger.info("translator replica ready (model %s)", config.served_model_name)

    def __serve_build_asgi_app__(self) -> FastAPI:
        replica = serve.get_replica_context().replica_id.unique_id
        return create_app(self.service, replica_id=replica)

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
