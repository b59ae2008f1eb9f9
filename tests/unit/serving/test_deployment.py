"""The replica's engine watchdog: a dead engine ends the replica, a shutdown does not."""

from __future__ import annotations

import asyncio

from serve_app.core.config import AppConfig
from serve_app.serving.deployment import exit_when_engine_dies
from serve_app.translation.service import TranslationService
from tests.fakes import FakeEngine


async def started(engine: FakeEngine) -> TranslationService:
    service = TranslationService(AppConfig(), engine)
    await service.start()
    return service


async def test_dead_engine_ends_the_replica() -> None:
    engine = FakeEngine()
    service = await started(engine)
    exits: list[int] = []
    watchdog = asyncio.create_task(exit_when_engine_dies(service, 0.01, exits.append))
    await asyncio.sleep(0.05)
    assert exits == []  # healthy: it keeps watching
    assert not watchdog.done()
    engine.healthy = False
    async with asyncio.timeout(5):
        await watchdog
    assert exits == [1]


async def test_shutdown_is_not_a_death() -> None:
    service = await started(FakeEngine())
    exits: list[int] = []
    watchdog = asyncio.create_task(exit_when_engine_dies(service, 0.01, exits.append))
    await asyncio.sleep(0.03)
    service.shutdown()
    async with asyncio.timeout(5):
        await watchdog
    assert exits == []
