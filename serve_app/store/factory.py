"""Opens the configured store: the backend is chosen by the URL's scheme.

``open_local_store`` opens the database itself (the ``StoreDeployment`` for SQLite, each
replica for PostgreSQL, the keys command, tests). ``store_for_replica`` is what a
translator replica uses: the ``StoreDeployment``'s handle when the store is SQLite, its
own pool when it is PostgreSQL.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from serve_app.core.store_config import StoreConfig
from serve_app.store.protocol import Store
from serve_app.store.sql.database import Clock

logger = logging.getLogger("ray.serve.store")


async def open_local_store(config: StoreConfig, clock: Clock = time.time) -> Store:
    if config.backend == "sqlite":
        from serve_app.store.sqlite import open_sqlite

        return await open_sqlite(config.sqlite_path(), config.limits, clock)
    from serve_app.store.postgres import open_postgres

    return await open_postgres(config.postgres_dsn(), config.limits, config.pool_size, clock)


def needs_deployment(config: StoreConfig) -> bool:
    """True when replicas must share the store through one ``StoreDeployment``."""
    return config.backend == "sqlite"


async def store_for_replica(config: StoreConfig, handle: Any | None) -> Store:
    if needs_deployment(config):
        if handle is None:
            raise ValueError("a SQLite store is reached through the StoreDeployment's handle")
        from serve_app.store.deployment import RemoteStore

        return RemoteStore(handle, config.limits)
    return await open_local_store(config)


async def clean_periodically(store: Store, period_s: float = 60.0) -> None:
    """Deletes expired documents and past usage windows every ``period_s`` (safe to run in
    every replica at once)."""
    while True:
        await asyncio.sleep(period_s)
        try:
            report = await store.cleanup()
            if report.documents:
                logger.info("store cleanup: %d expired documents deleted", report.documents)
        except Exception:
            logger.exception("store cleanup failed")
