"""The SQLite store behind one deployment: a replica's ``RemoteStore`` gets the store's
values and its errors (with Retry-After) as if it were local, and a dead or slow
deployment is a 503, not a hang."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path
from typing import Any

import pytest

from serve_app.core.errors import GlossaryNotFound, QuotaExceeded, StoreUnavailable
from serve_app.store import GlossaryDictionary, StoreConfig, StoreLimits
from serve_app.store.apikeys import digest
from serve_app.store.deployment import RemoteStore, StoreDeployment
from serve_app.store.factory import store_for_replica

pytestmark = pytest.mark.unit


class _Method:
    def __init__(self, target: Any) -> None:
        self.target = target

    async def remote(self, *args: Any) -> Any:
        # What crosses Ray is pickled both ways.
        args = pickle.loads(pickle.dumps(args))
        return pickle.loads(pickle.dumps(await self.target(*args)))


class FakeHandle:
    """A deployment handle calling the deployment's object in-process."""

    def __init__(self, deployment: Any) -> None:
        self.call = _Method(deployment.call)


async def deployed(tmp_path: Path) -> tuple[Any, RemoteStore]:
    cls = StoreDeployment.func_or_class
    deployment = cls.__new__(cls)
    await deployment.__init__(StoreConfig(url=f"sqlite:///{tmp_path}/store.db"))
    return deployment, RemoteStore(FakeHandle(deployment))


async def test_values_and_errors_cross_the_handle(tmp_path: Path) -> None:
    deployment, remote = await deployed(tmp_path)
    try:
        glossary = await remote.create_glossary(
            "k", "g", [GlossaryDictionary("en", "de", (("a", "b"),))]
        )
        assert (await remote.get_glossary("k", glossary.id)).name == "g"
        with pytest.raises(GlossaryNotFound):
            await remote.get_glossary("other", glossary.id)
        key = await remote.create_key("n", digest("s"), chars_per_month=5)
        await remote.charge(key.id, 5)
        with pytest.raises(QuotaExceeded) as refused:
            await remote.charge(key.id, 1)
        assert refused.value.retry_after_s is not None
        assert refused.value.retry_after_s > 0
        await deployment.check_health()
    finally:
        deployment._cleaner.cancel()
        await deployment.store.close()


async def test_only_store_methods_are_callable(tmp_path: Path) -> None:
    deployment, _ = await deployed(tmp_path)
    try:
        with pytest.raises(ValueError, match="not a store method"):
            await deployment.call("close", (), {})
    finally:
        deployment._cleaner.cancel()
        await deployment.store.close()


class DeadHandle:
    class call:
        @staticmethod
        async def remote(*args: Any) -> Any:
            raise RuntimeError("ActorDiedError")


class SlowHandle:
    class call:
        @staticmethod
        async def remote(*args: Any) -> Any:
            await asyncio.sleep(10)


async def test_dead_or_slow_deployment_is_503() -> None:
    with pytest.raises(StoreUnavailable, match="unavailable"):
        await RemoteStore(DeadHandle()).usage("k")
    with pytest.raises(StoreUnavailable, match="in time"):
        await RemoteStore(SlowHandle(), timeout_s=0.05).usage("k")


async def test_a_replicas_remote_store_has_the_configured_limits(tmp_path: Path) -> None:
    """The API refuses a glossary of too many dictionaries by ``store.limits`` before
    reading it: a replica's ``RemoteStore`` holds the deployment's limits, not defaults."""
    limits = StoreLimits(max_glossary_dictionaries=3)
    config = StoreConfig(url=f"sqlite:///{tmp_path}/store.db", limits=limits)
    remote = await store_for_replica(config, handle=object())
    assert isinstance(remote, RemoteStore)
    assert remote.limits == limits
