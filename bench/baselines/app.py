"""Serves the project's FastAPI app over one engine, with uvicorn and without Ray.

    python -m bench.baselines.app --config CONFIG.json --port 8101 --engine asyncllm
    python -m bench.baselines.app --config CONFIG.json --port 8102 --engine queue --workers 2
    python -m bench.baselines.app --config CONFIG.json --port 8103 --engine static

``asyncllm`` is journey step 3 (vLLM's AsyncLLM with continuous batching called straight from
FastAPI, one process); ``queue`` and ``static`` are the seeds' worker-process designs (steps
1 and 2). CONFIG is the app config (the serve config's ``args``) as JSON.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.engine.protocol import TranslationEngine
from serve_app.engine.vllm import VLLMEngine
from serve_app.translation.service import TranslationService


def make_engine(kind: str, config: AppConfig, workers: int) -> TranslationEngine:
    from bench.baselines.engines import QueueEngine

    if kind == "asyncllm":
        return VLLMEngine(config.engine)
    if kind == "queue":
        return QueueEngine(config.engine, workers=workers)
    # The seeds' static batching: 16 requests or a 50 ms window, whichever comes first.
    return QueueEngine(config.engine, workers=1, batch=16, window_s=0.05)


def build(kind: str, config: AppConfig, workers: int = 1) -> FastAPI:
    service = TranslationService(config, make_engine(kind, config, workers))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            service.shutdown()

    app = create_app(service)
    app.router.lifespan_context = lifespan
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--engine", choices=["asyncllm", "queue", "static"], required=True)
    parser.add_argument("--workers", type=int, default=1)
    ns = parser.parse_args()
    import uvicorn

    config = AppConfig.model_validate(json.loads(ns.config.read_text()))
    app = build(ns.engine, config, ns.workers)
    uvicorn.run(app, host="127.0.0.1", port=ns.port, log_level="warning")


if __name__ == "__main__":
    main()
