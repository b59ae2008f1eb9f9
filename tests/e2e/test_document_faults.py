"""What is accepted is never lost: document jobs survive kills mid-job, through the real stack
(`serve run`, 2 replicas of the tiny model on vLLM (CPU), the SQLite store's deployment,
HTTP through Ray's proxy).

Each test uploads a long document, waits until its translation is under way, then kills one
piece of the fleet: a translator replica with ``ray.kill`` of its actor, the store's
deployment with ``kill -9`` of its process, or a document worker with ``kill -9`` of its
replica's process (the worker runs inside the replica). Actors are found through Ray's state
API. Each test then checks that the job completes with every segment translated (the store's
own rows: no segment without a translation) and the file rebuilt with every paragraph; the
replica kills also check what became of the segments the victim's worker held: a ``kill -9``
leaves them to be claimed again once their leases expire; after Ray 2.60's ``ray.kill`` the
victim's worker was seen (in CI and here) to finish what it held and claim nothing more before
it went, which loses nothing either.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

from bench.ports import free_port
from serve_app.tools.launcher import derive_config
from tests.conftest import ROOT
from tests.e2e.conftest import serve_cluster
from tests.e2e.replicas import (
    REPLICA_NAME,
    engine_cores,
    ray_cli_env,
    replica_processes,
    wait_for_replicas,
)

PARAGRAPHS = 120  # ~80 s of translation on two replicas: kills land mid-job with room to spare
LEASE_S = 15
DONE_TIMEOUT_S = 900
RECOVERY_TIMEOUT_S = 420


@dataclass(frozen=True)
class DocCluster:
    url: str
    db: Path


@pytest.fixture(scope="module")
def doc_cluster(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DocCluster]:
    port, gcs_port = free_port(), free_port()
    workdir = tmp_path_factory.mktemp("doc-faults")
    db = workdir / "store.db"
    config = derive_config(
        ROOT / "serve_config.cpu.yaml",
        top={"http_options": {"port": port}},
        args={
            "engine": {"model": str(tiny_model_dir), "max_model_len": 2048},
            "prompt": {"family": "chat"},
            # Random weights rarely stop: each segment decodes ~60 tokens, long enough for
            # a kill to land while a worker is translating (not storing) its segments.
            "limits": {
                "max_input_tokens": 512,
                "output_tokens_ratio": 2.0,
                "output_tokens_margin": 32,
            },
            "store": {"url": f"sqlite:///{db}"},
            "documents": {
                "poll_interval_s": 0.2,
                "worker_concurrency": 2,
                "idle_in_flight": 16,
                "lease_s": LEASE_S,
            },
        },
        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
        deployment={"num_replicas": 2, "max_ongoing_requests": 24, "max_queued_requests": 64},
    )
    with serve_cluster(config, workdir, replicas=2, ray_args=[f"--port={gcs_port}"]) as url:
        yield DocCluster(url, db)


def _document(seed: int) -> bytes:
    words = ["river", "light", "stone", "window", "garden", "morning", "paper", "bridge"]
    paras = [
        " ".join(words[(i * 7 + j * 3 + seed) % len(words)] for j in range(12)).capitalize() + "."
        for i in range(PARAGRAPHS)
    ]
    return "\n\n".join(paras).encode()


def _upload(url: str, seed: int, timeout_s: float = 180) -> str:
    """Uploads a document; a store being restarted answers 503, which is retried (a 201
    is the acceptance that must never be lost)."""
    deadline = time.monotonic() + timeout_s
    files = {"file": (f"doc{seed}.txt", _document(seed))}
    form = {"target_lang": "de", "source_lang": "en"}
    while True:
        r = httpx.post(f"{url}/documents", files=files, data=form, timeout=120)
        if r.status_code == 201:
            return str(r.json()["id"])
        assert r.status_code == 503, r.text
        assert time.monotonic() < deadline, r.text
        time.sleep(2)


def _status(url: str, doc: str) -> dict | None:
    """The job's status, or None while the service cannot answer (a kill in progress)."""
    try:
        r = httpx.get(f"{url}/documents/{doc}", timeout=30)
    except httpx.HTTPError:
        return None
    if r.status_code != 200:
        assert r.status_code == 503, r.text  # retryable while the store restarts; never 404
        return None
    return dict(r.json())


def _wait_under_way(url: str, doc: str) -> dict:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = _status(url, doc)
        if status and status["segments_done"] >= 4:
            assert status["status"] == "translating", status
            return status
        time.sleep(0.2)
    raise AssertionError(f"document {doc} did not start: {status}")


def _wait_done(url: str, doc: str) -> dict:
    deadline = time.monotonic() + DONE_TIMEOUT_S
    status = None
    while time.monotonic() < deadline:
        status = _status(url, doc)
        if status and status["status"] in ("done", "error"):
            return status
        time.sleep(1)
    raise AssertionError(f"document {doc} not done in {DONE_TIMEOUT_S}s: {status}")


def _check_complete(cluster: DocCluster, doc: str) -> dict:
    """Done, every segment translated in the store, the file rebuilt with every paragraph;
    the segments' claim counts, by attempt."""
    status = _wait_done(cluster.url, doc)
    assert status["status"] == "done", status
    assert status["segments_done"] == status["segments_total"] == PARAGRAPHS
    r = httpx.get(f"{cluster.url}/documents/{doc}/result", timeout=60)
    assert r.status_code == 200
    assert len(r.content.decode().split("\n\n")) == PARAGRAPHS
    with sqlite3.connect(cluster.db) as db:
        states = dict(
            db.execute(
                "SELECT state, COUNT(*) FROM document_segments WHERE document_id = ? "
                "AND translation IS NOT NULL GROUP BY state",
                (doc,),
            ).fetchall()
        )
        attempts = dict(
            db.execute(
                "SELECT attempts, COUNT(*) FROM document_segments WHERE document_id = ? "
                "GROUP BY attempts",
                (doc,),
            ).fetchall()
        )
    assert states == {"done": PARAGRAPHS}, states
    return {int(k): int(v) for k, v in attempts.items()}


def _actors(marker: str) -> list[dict]:
    ray_bin = str(Path(sys.executable).parent / "ray")
    out = subprocess.run(
        [ray_bin, "list", "actors", "--detail", "--format", "json", "--limit", "1000",
         "--filter", "state=ALIVE"],
        check=True, capture_output=True, text=True, timeout=120, env=ray_cli_env(),
    ).stdout  # fmt: skip
    return [a for a in json.loads(out) if marker in (a.get("name") or "")]


def _ray_kill(actor_name: str) -> None:
    """``ray.kill`` of a Serve actor, from a driver of its own (not this test's process)."""
    code = (
        "import ray; ray.init(address='auto', logging_level='ERROR'); "
        f"ray.kill(ray.get_actor({actor_name!r}, namespace='serve'))"
    )
    subprocess.run(
        [sys.executable, "-c", code], check=True, timeout=120, env=ray_cli_env(), cwd=ROOT
    )


def _reap(pids: list[int]) -> None:
    """Kills engine cores that outlived their killed replica (they would hold memory)."""
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()


def _leases(cluster: DocCluster, doc: str) -> dict[str, list[int]]:
    """The segments of ``doc`` claimed in the last second, by worker (a worker is named
    after its replica): segments being translated, not ones whose result is on its way."""
    with sqlite3.connect(cluster.db) as db:
        rows = db.execute(
            "SELECT worker, idx FROM document_segments WHERE document_id = ? "
            "AND state = 'leased' AND lease_expires_at > ?",
            (doc, time.time() + LEASE_S - 1),
        ).fetchall()
    held: dict[str, list[int]] = {}
    for worker, idx in rows:
        held.setdefault(str(worker), []).append(int(idx))
    return held


def _kill_replica(cluster: DocCluster, doc: str, how: str) -> tuple[str, list[int]]:
    """Kills a replica whose worker holds leases on ``doc``; its worker and the segments
    it held."""
    replicas = {r.replica_id: r for r in replica_processes()}
    deadline = time.monotonic() + 120
    while True:
        held = {w: idx for w, idx in _leases(cluster, doc).items() if w in replicas}
        if held or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert held, "no replica held a lease on the document"
    worker, segments = next(iter(held.items()))
    victim = replicas[worker]
    cores = [core.pid for core in engine_cores(victim.pid)]
    if how == "ray.kill":
        _ray_kill(REPLICA_NAME + victim.replica_id)
    else:
        os.kill(victim.pid, signal.SIGKILL)
    time.sleep(5)
    _reap(cores)
    asyncio.run(wait_for_replicas(cluster.url, 2, {victim.replica_id}, RECOVERY_TIMEOUT_S))
    return worker, segments


def _final_claims(cluster: DocCluster, doc: str, segments: list[int]) -> dict[int, tuple[str, int]]:
    """The worker that completed each of ``segments`` and how many claims it took."""
    with sqlite3.connect(cluster.db) as db:
        rows = db.execute(
            "SELECT idx, worker, attempts FROM document_segments WHERE document_id = ? "
            f"AND idx IN ({','.join('?' * len(segments))})",
            (doc, *segments),
        ).fetchall()
    return {int(idx): (str(worker), int(attempts)) for idx, worker, attempts in rows}


@pytest.mark.parametrize("how", ["ray.kill", "kill -9"])
def test_translator_replica_killed_mid_job_loses_no_segment(
    doc_cluster: DocCluster, how: str
) -> None:
    """The victim's worker held leases when it was killed: each of those segments ends done,
    finished by the victim before it went or claimed again by another worker once its lease
    expired; after a ``kill -9`` at least one was claimed again."""
    doc = _upload(doc_cluster.url, seed=1 if how == "ray.kill" else 2)
    before = _wait_under_way(doc_cluster.url, doc)
    victim, held = _kill_replica(doc_cluster, doc, how)
    attempts = _check_complete(doc_cluster, doc)
    final = _final_claims(doc_cluster, doc, held)
    done = before["segments_done"]
    print(f"{how}: killed at {done}/{PARAGRAPHS} holding {held} ({victim}); claims "
          f"{attempts}; held segments (worker, claims) {final}")  # fmt: skip
    assert before["segments_done"] < PARAGRAPHS
    assert held
    assert sorted(final) == sorted(held)
    for worker, claims in final.values():
        assert (worker == victim and claims == 1) or (worker != victim and claims >= 2), final
    if how == "kill -9":  # no window: what the victim held was claimed again
        assert any(claims >= 2 for _, claims in final.values()), final


def test_store_deployment_killed_mid_job_loses_nothing(doc_cluster: DocCluster) -> None:
    """The store's process dies with a job under way and another being uploaded: Serve
    restarts it on the same SQLite file, the workers carry on, both jobs complete."""
    doc = _upload(doc_cluster.url, seed=3)
    before = _wait_under_way(doc_cluster.url, doc)
    [store] = _actors("#Store#")
    os.kill(int(store["pid"]), signal.SIGKILL)
    second = _upload(doc_cluster.url, seed=4)  # accepted once the store is back
    attempts = _check_complete(doc_cluster, doc)
    print(f"store killed at {before['segments_done']}/{PARAGRAPHS}; claims {attempts}")
    assert before["segments_done"] < PARAGRAPHS
    _check_complete(doc_cluster, second)
    assert _actors("#Store#")[0]["pid"] != store["pid"]
