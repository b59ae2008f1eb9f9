"""Manage the API keys kept in the store: ``python -m serve_app.tools.keys add|list|revoke``.

``add`` prints only the new key on stdout (so ``KEY=$(python -m serve_app.tools.keys add
...)`` captures it); it is shown once and stored as a digest only. ``list`` shows every key
with its limits and this month's usage; ``revoke`` stops a key at once, on every replica.

The store is the one the service uses: ``--url`` (or ``$SERVE_APP_STORE_URL``) or the
``store`` section of ``--config serve_config.yaml``. A SQLite store is a file on the head
node: run the command there (it writes alongside the running service; SQLite locks the file).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from serve_app.core.errors import ServiceError
from serve_app.core.store_config import StoreConfig
from serve_app.store.apikeys import digest, new_secret
from serve_app.store.factory import open_local_store
from serve_app.store.protocol import ApiKey, Store

URL_ENV = "SERVE_APP_STORE_URL"


def store_config(url: str | None, config_path: str | None) -> StoreConfig:
    """From ``--url``, else the ``store`` args of a serve config, else ``$SERVE_APP_STORE_URL``."""
    if url:
        return StoreConfig(url=url)
    if config_path:
        data = yaml.safe_load(Path(config_path).read_text(encoding="utf-8")) or {}
        for app in data.get("applications", [data]):
            store = (app.get("args") or {}).get("store")
            if store is not None:
                return StoreConfig.model_validate(store)
        return StoreConfig()
    if env := os.environ.get(URL_ENV):
        return StoreConfig(url=env)
    return StoreConfig()


def _limit(value: int | None) -> str:
    return "unlimited" if value is None else str(value)


async def _add(store: Store, args: argparse.Namespace) -> None:
    secret = new_secret()
    key = await store.create_key(
        args.name, digest(secret), args.chars_per_month, args.requests_per_minute
    )
    print(secret)
    print(
        f"added key {key.name!r} (id {key.id}; {_limit(key.chars_per_month)} characters a "
        f"month, {_limit(key.requests_per_minute)} requests a minute)",
        file=sys.stderr,
    )


def _row(key: ApiKey, characters: int) -> dict[str, Any]:
    revoked = key.revoked_at
    return {
        "id": key.id,
        "name": key.name,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(key.created_at)),
        "revoked": None
        if revoked is None
        else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(revoked)),
        "chars_per_month": key.chars_per_month,
        "requests_per_minute": key.requests_per_minute,
        "characters_this_month": characters,
    }


async def _list(store: Store, args: argparse.Namespace) -> None:
    rows = [_row(k, (await store.usage(k.id)).characters) for k in await store.list_keys()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'NAME':24} {'ID':36} {'CHARS/MONTH':>12} {'REQ/MIN':>8} {'USED':>12} STATE")
    for r in rows:
        state = "active" if r["revoked"] is None else f"revoked {r['revoked']}"
        print(
            f"{r['name'][:24]:24} {r['id']:36} {_limit(r['chars_per_month']):>12} "
            f"{_limit(r['requests_per_minute']):>8} {r['characters_this_month']:>12} {state}"
        )


async def _revoke(store: Store, args: argparse.Namespace) -> None:
    key = await store.revoke_key(args.name)
    print(f"revoked key {key.name!r} (id {key.id})", file=sys.stderr)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m serve_app.tools.keys", description=__doc__)
    p.add_argument("--url", help=f"store URL (default: ${URL_ENV} or the config's)")
    p.add_argument("--config", help="a serve config whose app args hold a 'store' section")
    sub = p.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="create a key and print it (only it) on stdout")
    add.add_argument("--name", required=True)
    add.add_argument("--chars-per-month", type=int, default=None, help="default: unlimited")
    add.add_argument("--requests-per-minute", type=int, default=None, help="default: unlimited")
    listing = sub.add_parser("list", help="every key with its limits and this month's usage")
    listing.add_argument("--json", action="store_true")
    revoke = sub.add_parser("revoke", help="revoke the active key of this name (or id)")
    revoke.add_argument("--name", required=True, help="the key's name or id")
    return p


_COMMANDS = {"add": _add, "list": _list, "revoke": _revoke}


async def run(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    for flag in ("chars_per_month", "requests_per_minute"):
        if (getattr(args, flag, None) or 0) < 0:
            print(f"error: --{flag.replace('_', '-')} must not be negative", file=sys.stderr)
            return 2
    store = await open_local_store(store_config(args.url, args.config))
    try:
        await _COMMANDS[args.command](store, args)
    except ServiceError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    finally:
        await store.close()
    return 0


def main() -> None:
    sys.exit(asyncio.run(run()))


if __name__ == "__main__":
    main()
