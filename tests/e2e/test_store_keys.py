"""API keys kept in the store, through the real stack: `serve run` with 2 translator replicas
on each store backend (SQLite behind the store's deployment; a real PostgreSQL server that
every replica reaches through its own pool), keys managed with the keys command while the
service runs, quotas counted cluster-wide (exactly, under concurrent load spread over both
replicas), the DeepL client's quota error, and a store outage (the SQLite store's replica
killed; the PostgreSQL server restarted) answered with 503s, never a 500, without losing a key
or a count."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest

from bench.ports import free_port
from serve_app.tools.launcher import derive_config
from tests.conftest import ROOT
from tests.e2e.conftest import serve_cluster
from tests.e2e.replicas import ray_cli_env
from tests.postgres import PostgresServer, PostgresUnavailable, start_postgres

ENV_KEY = "e2e-env-key"
TEXT_CHARS = 27


@dataclass(frozen=True)
class KeyCluster:
    url: str
    store_url: str
    database: PostgresServer | None  # None: the SQLite store's deployment


@contextlib.contextmanager
def _store(backend: str, workdir: Path) -> Iterator[tuple[str, PostgresServer | None]]:
    if backend == "sqlite":
        yield f"sqlite:///{workdir}/store.db", None
        return
    try:
        with start_postgres() as server:
            server.psql("CREATE DATABASE keys_e2e")
            yield server.url("keys_e2e"), server
    except PostgresUnavailable as exc:
        pytest.skip(f"PostgreSQL could not be installed or started: {exc}")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def key_cluster(
    request: pytest.FixtureRequest, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KeyCluster]:
    workdir = tmp_path_factory.mktemp(f"store-keys-{request.param}")
    with (
        _store(request.param, workdir) as (store_url, database),
        _key_cluster(tiny_model_dir, workdir, store_url) as url,
    ):
        yield KeyCluster(url, store_url, database)


@contextlib.contextmanager
def _key_cluster(tiny_model_dir: Path, workdir: Path, store_url: str) -> Iterator[str]:
    port, gcs_port = free_port(), free_port()
    config = derive_config(
        ROOT / "serve_config.cpu.yaml",
        top={"http_options": {"port": port}},
        args={
            "engine": {"model": str(tiny_model_dir), "max_model_len": 2048},
            "prompt": {"family": "chat"},
            "limits": {"max_input_tokens": 512, "max_batch_items": 8},
            "security": {"store_keys": True, "api_keys_env": "E2E_KEYS"},
            "store": {"url": store_url},
        },
        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1", "E2E_KEYS": ENV_KEY}},
        deployment={"num_replicas": 2, "max_ongoing_requests": 24, "max_queued_requests": 64},
    )
    with serve_cluster(config, workdir, replicas=2, ray_args=[f"--port={gcs_port}"]) as url:
        yield url


def keys(cluster: KeyCluster, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "serve_app.tools.keys", "--url", cluster.store_url, *args],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def text(i: int) -> str:
    t = f"Sentence {i:04d} to translate."
    assert len(t) == TEXT_CHARS
    return t


def test_stored_keys_from_the_command_work_on_every_route(key_cluster: KeyCluster) -> None:
    secret = keys(key_cluster, "add", "--name", "alice")
    url = key_cluster.url
    item = {"text": "Hello world", "source_lang": "en", "target_lang": "de"}
    assert httpx.post(f"{url}/translate", json=item, headers=bearer(secret), timeout=120).is_success
    assert httpx.post(f"{url}/translate", json=item, timeout=60).status_code == 401
    assert (
        httpx.post(f"{url}/translate", json=item, headers=bearer("x"), timeout=60).status_code
        == 401
    )
    missing = httpx.get(f"{url}/v2/usage", timeout=60)  # DeepL's 403, DeepL's scheme
    assert missing.status_code == 403, missing.text
    assert missing.headers["www-authenticate"] == "DeepL-Auth-Key"
    assert "DeepL-Auth-Key <key>" in missing.json()["message"]
    env = httpx.post(f"{url}/translate", json=item, headers={"X-API-Key": ENV_KEY}, timeout=120)
    assert env.is_success  # keys from the environment keep working
    chat = {"messages": [{"role": "user", "content": "Hello world"}], "max_tokens": 4, "n": 2}
    two = httpx.post(f"{url}/v1/chat/completions", json=chat, headers=bearer(secret), timeout=120)
    assert len(two.json()["choices"]) == 2, two.text
    usage = httpx.get(f"{url}/usage", headers=bearer(secret), timeout=60).json()
    # The translation's characters, then the messages' once per choice.
    assert (usage["scope"], usage["characters"]) == ("key", 3 * len("Hello world"))
    keys(key_cluster, "revoke", "--name", "alice")
    revoked = httpx.post(f"{url}/translate", json=item, headers=bearer(secret), timeout=60)
    assert revoked.status_code == 401


async def _translate(client: httpx.AsyncClient, url: str, secret: str, i: int) -> httpx.Response:
    item = {"text": text(i), "source_lang": "en", "target_lang": "de"}
    return await client.post(f"{url}/translate", json=item, headers=bearer(secret))


async def _burst(url: str, secret: str, n: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=300) as client:
        return await asyncio.gather(*(_translate(client, url, secret, i) for i in range(n)))


def test_quota_exhaustion_across_two_replicas_adds_up_exactly(key_cluster: KeyCluster) -> None:
    """40 concurrent requests of 27 characters against a quota of 500: exactly 18 fit, the
    other 22 are refused (429 quota_exceeded), both replicas serve them, and the store's
    count is exactly what was accepted."""
    quota = 500
    secret = keys(key_cluster, "add", "--name", "burst", "--chars-per-month", str(quota))
    responses = asyncio.run(_burst(key_cluster.url, secret, 40))
    statuses = [r.status_code for r in responses]
    assert set(statuses) <= {200, 429}, statuses
    accepted = statuses.count(200)
    assert accepted == quota // TEXT_CHARS
    refused = [r for r in responses if r.status_code == 429]
    assert all(r.json()["error"]["code"] == "quota_exceeded" for r in refused)
    assert all(int(r.headers["Retry-After"]) > 0 for r in refused)
    assert len({r.headers["x-replica"] for r in responses}) == 2  # the load was spread
    usage = httpx.get(f"{key_cluster.url}/usage", headers=bearer(secret), timeout=60).json()
    assert usage["characters"] == accepted * TEXT_CHARS
    listed = json.loads(keys(key_cluster, "list", "--json"))
    assert (
        next(k for k in listed if k["name"] == "burst")["characters_this_month"]
        == usage["characters"]
    )


def test_requests_per_minute_across_replicas(key_cluster: KeyCluster) -> None:
    while time.time() % 60 > 45:  # one minute's window for the whole burst
        time.sleep(1)
    secret = keys(key_cluster, "add", "--name", "rpm", "--requests-per-minute", "5")

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=120) as client:
            url, headers = f"{key_cluster.url}/languages", bearer(secret)
            return await asyncio.gather(*(client.get(url, headers=headers) for _ in range(12)))

    statuses = [r.status_code for r in asyncio.run(burst())]
    assert statuses.count(200) == 5
    assert statuses.count(429) == 7


def test_deepl_client_reads_usage_and_gets_its_quota_error(key_cluster: KeyCluster) -> None:
    import deepl

    secret = keys(key_cluster, "add", "--name", "deepl", "--chars-per-month", "30")
    client = deepl.DeepLClient(secret, server_url=key_cluster.url)
    client.translate_text("Hello world", target_lang="DE", source_lang="EN")
    usage = client.get_usage()
    assert (usage.character.count, usage.character.limit) == (11, 30)
    with pytest.raises(deepl.QuotaExceededException):
        client.translate_text("Hello world, once more!", target_lang="DE", source_lang="EN")
    assert client.get_usage().character.count == 11


def _store_pid() -> int:
    ray_bin = str(Path(sys.executable).parent / "ray")
    out = subprocess.run(
        [ray_bin, "list", "actors", "--detail", "--format", "json", "--limit", "1000",
         "--filter", "state=ALIVE"],
        check=True, capture_output=True, text=True, timeout=120, env=ray_cli_env(),
    ).stdout  # fmt: skip
    [actor] = [a for a in json.loads(out) if "#Store#" in (a.get("name") or "")]
    return int(actor["pid"])


def _refused_while_down(url: str, secret: str, item: dict[str, str]) -> None:
    """With the PostgreSQL server down, a keyed request is a 503 in the API's own shape with
    Retry-After, at once: never a 500, never a wait for a server that is not there."""
    started = time.monotonic()
    r = httpx.post(f"{url}/translate", json=item, headers=bearer(secret), timeout=120)
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "store_unavailable", r.text
    assert int(r.headers["Retry-After"]) > 0
    assert time.monotonic() - started < 30


def _store_outage(cluster: KeyCluster, url: str, secret: str, item: dict[str, str]) -> None:
    """The store goes away: the SQLite store's replica is killed (Ray restarts it); the
    PostgreSQL server is shut down as an operator's restart would, asked while it is down,
    and started again (every replica's pool holds connections that died with it)."""
    if cluster.database is None:
        os.kill(_store_pid(), signal.SIGKILL)
        return
    cluster.database.stop()
    try:
        _refused_while_down(url, secret, item)
    finally:
        cluster.database.start()


def test_store_outage_loses_no_key(key_cluster: KeyCluster) -> None:
    secret = keys(key_cluster, "add", "--name", "survivor", "--chars-per-month", "1000")
    url, item = key_cluster.url, {"text": "Hello", "source_lang": "en", "target_lang": "de"}
    assert httpx.post(f"{url}/translate", json=item, headers=bearer(secret), timeout=120).is_success
    _store_outage(key_cluster, url, secret, item)
    deadline = time.monotonic() + 180
    statuses = []
    while time.monotonic() < deadline:
        r = httpx.post(f"{url}/translate", json=item, headers=bearer(secret), timeout=120)
        statuses.append(r.status_code)
        if r.status_code == 200:
            break
        assert r.status_code == 503, r.text  # while it restarts: retryable, never a 500
        time.sleep(2)
    assert statuses[-1] == 200, statuses
    after = asyncio.run(_burst_of(url, secret, item, 8))  # every replica's store is back
    assert [r.status_code for r in after] == [200] * 8, [r.text for r in after]
    assert len({r.headers["x-replica"] for r in after}) == 2
    usage = httpx.get(f"{url}/usage", headers=bearer(secret), timeout=60).json()
    assert usage["characters"] == 10 * len("Hello")  # the count survived too


async def _burst_of(url: str, secret: str, item: dict[str, str], n: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=120) as client:
        post = partial(client.post, f"{url}/translate", json=item, headers=bearer(secret))
        return await asyncio.gather(*(post() for _ in range(n)))
