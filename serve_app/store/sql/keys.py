"""API keys and their usage counters in SQL.

A charge is one transaction of two conditional upserts: this minute's request count, then
this month's characters, each ``INSERT ... ON CONFLICT DO UPDATE ... WHERE count + n <=
limit``. The upsert locks the counter's row, so concurrent charges from every replica are
applied one after another and a refused charge writes nothing (the transaction rolls
back): counts add up exactly and never pass a limit.
"""

from __future__ import annotations

import calendar
import math
import time
import uuid

from serve_app.core.errors import KeyNotFound, NameTaken, QuotaExceeded, RateLimited, Unauthorized
from serve_app.store.protocol import ApiKey, Usage
from serve_app.store.sql.database import Database, Row, Tx
from serve_app.store.validation import check_name

UNLIMITED = 1 << 62
_KEY_COLUMNS = "id, name, created_at, revoked_at, chars_per_month, requests_per_minute"


def month_of(now: float) -> str:
    return time.strftime("%Y-%m", time.gmtime(now))


def seconds_to_next_month(now: float) -> int:
    t = time.gmtime(now)
    year, month = (t.tm_year + 1, 1) if t.tm_mon == 12 else (t.tm_year, t.tm_mon + 1)
    return max(1, math.ceil(calendar.timegm((year, month, 1, 0, 0, 0)) - now))


def _key(row: Row) -> ApiKey:
    key_id, name, created, revoked, chars, requests = row
    return ApiKey(
        key_id,
        name,
        float(created),
        None if revoked is None else float(revoked),
        None if chars is None else int(chars),
        None if requests is None else int(requests),
    )


def _check_limit(value: int | None, what: str) -> None:
    if value is not None and not 0 <= value < UNLIMITED:
        raise ValueError(f"{what} must be between 0 and {UNLIMITED - 1}")


async def create(
    db: Database, name: str, digest: bytes, chars_per_month: int | None, rpm: int | None
) -> ApiKey:
    name = check_name(name, db.limits, "key")
    _check_limit(chars_per_month, "chars_per_month")
    _check_limit(rpm, "requests_per_minute")
    key = ApiKey(str(uuid.uuid4()), name, db.now(), None, chars_per_month, rpm)
    async with db.tx() as tx:
        await db.lock(tx, "keys")
        taken = await tx.fetchrow(
            "SELECT 1 FROM api_keys WHERE name = ? AND revoked_at IS NULL", name
        )
        if taken is not None:
            raise NameTaken(f"An active key is named {name!r} already; revoke it first.")
        await tx.execute(
            f"INSERT INTO api_keys ({_KEY_COLUMNS}, digest) VALUES (?, ?, ?, ?, ?, ?, ?)",
            key.id,
            key.name,
            key.created_at,
            None,
            chars_per_month,
            rpm,
            bytes(digest),
        )
    return key


async def find(db: Database, digest: bytes) -> ApiKey | None:
    async with db.tx() as tx:
        row = await tx.fetchrow(
            f"SELECT {_KEY_COLUMNS} FROM api_keys WHERE digest = ? AND revoked_at IS NULL",
            bytes(digest),
        )
    return None if row is None else _key(row)


async def list_all(db: Database) -> list[ApiKey]:
    async with db.tx() as tx:
        rows = await tx.fetch(f"SELECT {_KEY_COLUMNS} FROM api_keys ORDER BY created_at, id")
    return [_key(row) for row in rows]


async def revoke(db: Database, name_or_id: str) -> ApiKey:
    async with db.tx() as tx:
        for column in ("id", "name"):
            row = await tx.fetchrow(
                f"UPDATE api_keys SET revoked_at = ? WHERE {column} = ? AND revoked_at IS NULL "
                f"RETURNING {_KEY_COLUMNS}",
                db.now(),
                name_or_id,
            )
            if row is not None:
                return _key(row)
    raise KeyNotFound(f"No active key has the name or id {name_or_id[:100]!r}.")


async def _limits(tx: Tx, key_id: str) -> tuple[int | None, int | None]:
    row = await tx.fetchrow(
        "SELECT revoked_at, chars_per_month, requests_per_minute FROM api_keys WHERE id = ?",
        key_id,
    )
    if row is None:
        return None, None
    if row[0] is not None:
        raise Unauthorized("This API key has been revoked.")
    return row[1], row[2]


async def _count_request(tx: Tx, key_id: str, minute: int, n: int, limit: int | None) -> int:
    row = await tx.fetchrow(
        "INSERT INTO usage_minute (key_id, minute, requests) VALUES (?, ?, ?) "
        "ON CONFLICT (key_id, minute) DO UPDATE SET requests = usage_minute.requests + "
        "excluded.requests WHERE usage_minute.requests + excluded.requests <= ? "
        "RETURNING requests",
        key_id,
        minute,
        n,
        UNLIMITED if limit is None else limit,
    )
    return -1 if row is None else int(row[0])


async def _minute_requests(tx: Tx, key_id: str, minute: int) -> int:
    row = await tx.fetchrow(
        "SELECT requests FROM usage_minute WHERE key_id = ? AND minute = ?", key_id, minute
    )
    return int(row[0]) if row else 0


async def _count_chars(
    tx: Tx, key_id: str, month: str, n: tuple[int, int], limit: int | None
) -> int:
    characters, requests = n
    row = await tx.fetchrow(
        "INSERT INTO usage_monthly (key_id, month, characters, requests) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (key_id, month) DO UPDATE SET characters = usage_monthly.characters + "
        "excluded.characters, requests = usage_monthly.requests + excluded.requests "
        "WHERE usage_monthly.characters + excluded.characters <= ? RETURNING characters",
        key_id,
        month,
        characters,
        requests,
        UNLIMITED if limit is None else limit,
    )
    return -1 if row is None else int(row[0])


async def charge(db: Database, key_id: str, characters: int, requests: int) -> Usage:
    if characters < 0 or requests < 0:
        raise ValueError("characters and requests must not be negative")
    now = db.now()
    minute, month = int(now // 60), month_of(now)
    async with db.tx() as tx:
        char_limit, rpm = await _limits(tx, key_id)
        minute_requests = -1
        if requests == 0:  # a charge of characters alone: no write to the minute's window
            minute_requests = await _minute_requests(tx, key_id, minute)
        elif rpm is None or requests <= rpm:
            minute_requests = await _count_request(tx, key_id, minute, requests, rpm)
        if minute_requests < 0:
            raise RateLimited(
                f"Too many requests: this key may send {rpm} a minute.",
                retry_after_s=max(1, math.ceil((minute + 1) * 60 - now)),
            )
        used = -1
        if char_limit is None or characters <= char_limit:
            used = await _count_chars(tx, key_id, month, (characters, requests), char_limit)
        if used < 0:  # raising rolls the minute's count back too
            raise QuotaExceeded(
                f"Quota exceeded: this key may translate {char_limit} characters a month.",
                retry_after_s=seconds_to_next_month(now),
            )
    return Usage(key_id, month, used, char_limit, minute_requests, rpm)


async def refund(db: Database, key_id: str, characters: int, month: str) -> None:
    if characters <= 0:
        return
    async with db.tx() as tx:
        await tx.execute(
            "UPDATE usage_monthly SET characters = CASE WHEN characters > ? "
            "THEN characters - ? ELSE 0 END WHERE key_id = ? AND month = ?",
            characters,
            characters,
            key_id,
            month,
        )


async def usage(db: Database, key_id: str) -> Usage:
    now = db.now()
    minute, month = int(now // 60), month_of(now)
    async with db.tx() as tx:
        row = await tx.fetchrow(
            "SELECT chars_per_month, requests_per_minute FROM api_keys WHERE id = ?", key_id
        )
        limits = (None, None) if row is None else (row[0], row[1])
        chars = await tx.fetchrow(
            "SELECT characters FROM usage_monthly WHERE key_id = ? AND month = ?", key_id, month
        )
        requests = await tx.fetchrow(
            "SELECT requests FROM usage_minute WHERE key_id = ? AND minute = ?", key_id, minute
        )
    return Usage(
        key_id,
        month,
        int(chars[0]) if chars else 0,
        None if limits[0] is None else int(limits[0]),
        int(requests[0]) if requests else 0,
        None if limits[1] is None else int(limits[1]),
    )


async def cleanup(db: Database) -> int:
    """Deletes the request windows of minutes before the last one."""
    async with db.tx() as tx:
        rows = await tx.fetch(
            "DELETE FROM usage_minute WHERE minute < ? RETURNING 1", int(db.now() // 60) - 1
        )
    return len(rows)
