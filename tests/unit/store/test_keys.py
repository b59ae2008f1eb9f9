"""API keys and usage counters: digests only, revocation, atomic charges that add up
exactly under concurrency, on both backends."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from serve_app.core.errors import KeyNotFound, NameTaken, QuotaExceeded, RateLimited, Unauthorized
from serve_app.store import Store
from tests.unit.store.conftest import FakeClock, StoreFactory

pytestmark = pytest.mark.unit


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


async def test_key_is_found_by_digest_until_revoked(store: Store) -> None:
    key = await store.create_key("alice", digest("s3cret"), 1000, 10)
    assert (key.chars_per_month, key.requests_per_minute, key.active) == (1000, 10, True)
    assert await store.find_key(digest("s3cret")) == key
    assert await store.find_key(digest("other")) is None
    revoked = await store.revoke_key("alice")
    assert revoked.id == key.id
    assert revoked.revoked_at is not None
    assert await store.find_key(digest("s3cret")) is None
    assert [k.active for k in await store.list_keys()] == [False]


async def test_revoke_by_id_and_unknown_key(store: Store) -> None:
    key = await store.create_key("bob", digest("b"))
    assert (await store.revoke_key(key.id)).name == "bob"
    with pytest.raises(KeyNotFound):
        await store.revoke_key("bob")


async def test_active_names_are_unique_but_reusable_after_revoke(store: Store) -> None:
    await store.create_key("carol", digest("c1"))
    with pytest.raises(NameTaken):
        await store.create_key("carol", digest("c2"))
    await store.revoke_key("carol")
    again = await store.create_key("carol", digest("c2"))
    assert await store.find_key(digest("c2")) == again
    assert len(await store.list_keys()) == 2


async def test_the_secret_itself_is_never_stored(store: Store) -> None:
    await store.create_key("dave", digest("plain-secret-value"))
    keys = await store.list_keys()
    assert "plain-secret-value" not in repr(keys)
    assert not hasattr(keys[0], "digest")


async def test_charge_counts_month_characters_and_minute_requests(
    store: Store, clock: FakeClock
) -> None:
    key = await store.create_key("eve", digest("e"), chars_per_month=100, requests_per_minute=3)
    usage = await store.charge(key.id, 40)
    assert (usage.characters, usage.minute_requests, usage.month) == (40, 1, "2026-11")
    assert (usage.character_limit, usage.requests_per_minute) == (100, 3)
    await store.charge(key.id, 60)
    assert (await store.usage(key.id)).characters == 100
    with pytest.raises(QuotaExceeded) as refused:
        await store.charge(key.id, 1)
    # Until 2026-12-01 00:00:00 UTC, from 2026-11-15 12:00:30.
    assert refused.value.retry_after_s == 15 * 86400 + 11 * 3600 + 59 * 60 + 30
    assert (await store.usage(key.id)).minute_requests == 2  # the refused one is not counted
    await store.charge(key.id, 0)  # a request with no characters still fits


async def test_minute_window_refuses_with_retry_after_then_reopens(
    store: Store, clock: FakeClock
) -> None:
    key = await store.create_key("frank", digest("f"), requests_per_minute=2)
    await store.charge(key.id, 1)
    await store.charge(key.id, 1)
    with pytest.raises(RateLimited) as refused:
        await store.charge(key.id, 1)
    assert refused.value.retry_after_s == 30
    assert (await store.usage(key.id)).characters == 2  # refused: no characters either
    clock.advance(30)
    assert (await store.charge(key.id, 1)).minute_requests == 1


async def test_month_rolls_over(store: Store, clock: FakeClock) -> None:
    key = await store.create_key("gina", digest("g"), chars_per_month=10)
    usage = await store.charge(key.id, 10)
    clock.advance(16 * 86400)
    assert (await store.usage(key.id)).characters == 0
    assert (await store.charge(key.id, 10)).month == "2026-12"
    await store.refund(key.id, 4, usage.month)  # a refund goes to the month charged
    assert (await store.usage(key.id)).characters == 10


async def test_refund_gives_characters_back_never_below_zero(store: Store) -> None:
    key = await store.create_key("hank", digest("h"), chars_per_month=10)
    usage = await store.charge(key.id, 10)
    await store.refund(key.id, 7, usage.month)
    assert (await store.charge(key.id, 7)).characters == 10
    await store.refund(key.id, 1000, usage.month)
    assert (await store.usage(key.id)).characters == 0


async def test_revoked_key_cannot_be_charged(store: Store) -> None:
    key = await store.create_key("ivy", digest("i"))
    await store.revoke_key(key.id)
    with pytest.raises(Unauthorized, match="revoked"):
        await store.charge(key.id, 1)


async def test_keys_without_a_record_are_counted_without_limits(store: Store) -> None:
    for _ in range(5):
        await store.charge("env-0123abcd", 1000)
    usage = await store.usage("env-0123abcd")
    assert (usage.characters, usage.minute_requests, usage.character_limit) == (5000, 5, None)
    assert (await store.usage("never-charged")).characters == 0


async def test_usage_is_per_key(store: Store) -> None:
    a = await store.create_key("a", digest("a"), chars_per_month=50)
    b = await store.create_key("b", digest("b"), chars_per_month=50)
    await store.charge(a.id, 50)
    assert (await store.usage(b.id)).characters == 0
    await store.charge(b.id, 50)


async def test_concurrent_charges_from_two_replicas_add_up_exactly(
    store_factory: StoreFactory,
) -> None:
    """Two stores on one database are two replicas; 80 charges of 30 characters race for
    1000 characters and 60 requests a minute: exactly 33 fit, and the counters say so."""
    first, second = await store_factory(), await store_factory()
    key = await first.create_key("race", digest("r"), chars_per_month=1000, requests_per_minute=60)

    async def one(store: Store) -> str:
        try:
            await store.charge(key.id, 30)
        except QuotaExceeded:
            return "quota"
        except RateLimited:
            return "rate"
        return "ok"

    outcomes = await asyncio.gather(*(one((first, second)[n % 2]) for n in range(80)))
    assert outcomes.count("ok") == 33
    usage = await second.usage(key.id)
    assert usage.characters == 33 * 30
    # Quota refusals roll their request back: the window holds the accepted ones only,
    # unless the window filled first (60 requests), which 33 + rate refusals cannot pass.
    assert usage.minute_requests == 33
    assert outcomes.count("quota") == 80 - 33


async def test_concurrent_requests_per_minute_are_exact(store_factory: StoreFactory) -> None:
    first, second = await store_factory(), await store_factory()
    key = await first.create_key("rpm", digest("q"), requests_per_minute=25)
    results = await asyncio.gather(
        *((first, second)[n % 2].charge(key.id, 1) for n in range(60)), return_exceptions=True
    )
    assert sum(not isinstance(r, BaseException) for r in results) == 25
    assert all(isinstance(r, RateLimited) for r in results if isinstance(r, BaseException))
    assert (await first.usage(key.id)).minute_requests == 25


async def test_cleanup_drops_past_minute_windows_only(store: Store, clock: FakeClock) -> None:
    await store.charge("k", 1)
    clock.advance(60)
    await store.charge("k", 1)
    clock.advance(120)
    await store.charge("k", 1)
    report = await store.cleanup()
    assert report.usage_windows == 2
    assert (await store.usage("k")).minute_requests == 1
    assert (await store.usage("k")).characters == 3


async def test_characters_alone_do_not_count_a_request(store: Store) -> None:
    key = await store.create_key("jo", digest("j"), chars_per_month=100, requests_per_minute=1)
    await store.charge(key.id, 0)  # the request (a middleware counts it)
    usage = await store.charge(key.id, 30, requests=0)  # its text (the route counts it)
    assert (usage.characters, usage.minute_requests) == (30, 1)
    with pytest.raises(RateLimited):
        await store.charge(key.id, 0)
