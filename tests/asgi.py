"""The app of one replica over the fake engine, as an in-process HTTP client.

Unit tests of the HTTP layer need the same three steps (a service over the engine, started;
its FastAPI app; an httpx client on it through ASGI, app exceptions answered as the server
answers them, a 500): written once here rather than in each test module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from serve_app.api.app import create_app
from serve_app.core.config import AppConfig
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine


@asynccontextmanager
async def chat_app_client(engine: FakeEngine, **args: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app with the ``chat`` prompt family over ``engine``; ``args`` are
    more of the config's sections (``limits={...}``)."""
    config = AppConfig.model_validate({"prompt": {"family": "chat"}, **args})
    service = TranslationService(config, engine)
    await service.start()
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        yield client
