"""Helpers of the reliability e2e tests: find replica processes, load the service, wait.

Replica processes are found through Ray's state API (`ray list actors`), which names each
replica actor after its replica id (the `X-Replica` header) and gives its PID; the engine core
is the replica's child process titled `VLLM::EngineCore`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from bench.process import descendants
from serve_app.client import Outcome, TranslationClient

ITEM = {"text": "Hello world, how are you?", "source_lang": "en", "target_lang": "de"}
REPLICA_NAME = "SERVE_REPLICA::translator#Translator#"  # + the replica id


@dataclass(frozen=True)
class ReplicaProcess:
    replica_id: str
    pid: int

    def engine_core_pid(self) -> int:
        for core in engine_cores(self.pid):
            return core.pid
        raise LookupError(f"no engine core process under replica {self.replica_id}")


def engine_cores(pid: int) -> list[psutil.Process]:
    """The vLLM engine cores (``VLLM::EngineCore``) among ``pid``'s descendants; none if it
    is gone."""
    cores = []
    for child in descendants(pid):
        with contextlib.suppress(psutil.Error):  # a child that ended meanwhile
            if "EngineCore" in " ".join(child.cmdline()):
                cores.append(child)
    return cores


def ray_cli_env() -> dict[str, str]:
    """Environment for Ray's CLIs (`ray list`, `serve deploy`): the venv's, and the dashboard
    token when ``~/.ray/auth_token`` exists (Ray 2.60's dashboard then requires it, and the
    CLIs only send it with ``RAY_AUTH_MODE=token``)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    if (Path.home() / ".ray" / "auth_token").exists():
        env["RAY_AUTH_MODE"] = "token"
    return env


def replica_processes() -> list[ReplicaProcess]:
    """Alive translator replicas of the local Ray cluster, with their PIDs."""
    ray_bin = str(Path(sys.executable).parent / "ray")
    out = subprocess.run(
        [ray_bin, "list", "actors", "--detail", "--format", "json", "--limit", "1000",
         "--filter", "state=ALIVE"],
        check=True, capture_output=True, text=True, timeout=120,
        env=ray_cli_env(),
    ).stdout  # fmt: skip
    actors = [a for a in json.loads(out) if (a.get("name") or "").startswith(REPLICA_NAME)]
    return [ReplicaProcess(a["name"].removeprefix(REPLICA_NAME), int(a["pid"])) for a in actors]


async def replicas_answering(client: httpx.AsyncClient, url: str, probes: int = 12) -> set[str]:
    """Replica ids that answered /readyz with 200 through the proxy."""
    seen = set()
    for _ in range(probes):
        try:
            r = await client.get(f"{url}/readyz", timeout=10)
        except httpx.HTTPError:
            continue
        if r.status_code == 200:
            seen.add(r.headers["x-replica"])
    return seen


async def wait_for_replicas(url: str, count: int, exclude: set[str], timeout_s: float) -> set[str]:
    """Waits (bounded) until ``count`` replicas answer, none of them in ``exclude``."""
    async with httpx.AsyncClient() as client, asyncio.timeout(timeout_s):
        while True:
            seen = await replicas_answering(client, url)
            if len(seen) >= count and not seen & exclude:
                return seen
            await asyncio.sleep(1)


@dataclass
class LoadRun:
    """N requests sent by the project's retrying client, ``concurrency`` at a time."""

    outcomes: list[Outcome] = field(default_factory=list)
    done_at: list[float] = field(default_factory=list)

    async def run(self, client: TranslationClient, bodies: list[dict], concurrency: int) -> None:
        gate = asyncio.Semaphore(concurrency)

        async def one(body: dict) -> None:
            async with gate:
                outcome = await client.post("/translate", body)
            self.outcomes.append(outcome)
            self.done_at.append(time.monotonic())

        await asyncio.gather(*(one(b) for b in bodies))

    def completed_after(self, moment: float) -> int:
        return sum(
            1 for t, o in zip(self.done_at, self.outcomes, strict=True) if t > moment and o.ok
        )


class RecordingTransport(httpx.AsyncHTTPTransport):
    """Notes every attempt's status (None: no HTTP answer) and duration, retries included."""

    def __init__(self) -> None:
        super().__init__()
        self.attempts: list[tuple[int | None, float]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        start = time.monotonic()
        try:
            response = await super().handle_async_request(request)
        except httpx.HTTPError:
            self.attempts.append((None, time.monotonic() - start))
            raise
        self.attempts.append((response.status_code, time.monotonic() - start))
        return response


def save_report(name: str, data: dict) -> None:
    """Writes a measured result as JSON where ``RELIABILITY_OUT`` points (the README's
    figures come from there); printed either way (``pytest -s`` shows it)."""
    print(f"{name}: {json.dumps(data)}")
    out = os.environ.get("RELIABILITY_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
