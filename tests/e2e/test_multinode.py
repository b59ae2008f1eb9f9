"""Multi-node on one machine: a Ray head and three worker nodes, the app deployed with
`serve deploy`, real vLLM engines (tiny model) and HTTP through Ray Serve's ingress (Ray's
proxies; HAProxy on the head when the config turns it on).

Each worker node offers one ``gpu_slot`` and each replica asks for one, as a GPU node offers
one GPU and a replica asks for ``num_gpus: 1`` in serve_config.yaml: so one replica lands per
worker node and none on the head. Two replicas run on two of the three workers; the third is
the spare a lost replica is rescheduled on. The test shows the replicas on different nodes,
requests through the ingress served by both, then removes a replica's node under load: with the
project's retrying client every request is answered, and the replica comes back on the spare.

It takes about 3 minutes on a 2-core machine (three engine starts: ~95 s to deploy two, ~60 s
for the removal and the rescheduled replica), in its own cluster, which is gone before the
other e2e modules (sorted after this one) start theirs.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bench.ports import free_port
from serve_app.client import Outcome, RetryPolicy, TranslationClient
from serve_app.tools.launcher import derive_config, ray_env, stop_orphaned_haproxies
from tests.conftest import ROOT
from tests.texts import texts

START_TIMEOUT_S = 420
ITEM = {"source_lang": "en", "target_lang": "de"}
RETRY = RetryPolicy(max_attempts=10, backoff_s=0.5, max_backoff_s=4.0)


@dataclass
class MultiNode:
    """The running cluster: Ray's test cluster object, the URL of the proxies, worker nodes."""

    ray_cluster: Any
    url: str
    dashboard: str
    workers: dict[str, Any] = field(default_factory=dict)  # node id -> ray node handle
    haproxy: bool = False  # the HAProxy ingress (on the head only) instead of Ray's proxies

    def details(self) -> dict[str, Any]:
        """Serve's own view of the cluster (applications, replicas, proxies), from its REST API
        on the dashboard: what `serve status` shows."""
        r = httpx.get(f"{self.dashboard}/api/serve/applications/", timeout=10)
        r.raise_for_status()
        return dict(r.json())

    def replicas(self) -> dict[str, str]:
        """Running translator replicas (their X-Replica id) and the node each one is on
        (RUNNING: the replica's engine has started)."""
        app = self.details()["applications"].get("translator") or {}
        deployment = app.get("deployments", {}).get("Translator", {})
        running = [x for x in deployment.get("replicas", []) if x["state"] == "RUNNING"]
        return {x["replica_id"]: x["node_id"] for x in running}


def _haproxy(config: dict[str, Any]) -> bool:
    """Whether the config turns Ray Serve's HAProxy ingress on."""
    return ray_env(config).get("RAY_SERVE_ENABLE_HA_PROXY") == "1"


def _serve_config(tiny_model_dir: Path, port: int) -> dict[str, Any]:
    config = derive_config(
        ROOT / "serve_config.cpu.yaml",
        top={"http_options": {"port": port}},
        args={
            "engine": {"model": str(tiny_model_dir), "max_model_len": 2048},
            "prompt": {"family": "chat"},
            "limits": {"max_input_tokens": 512},
        },
        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
        # The stand-in for num_gpus: 1: one slot per worker node, one replica per slot.
        deployment={
            "num_replicas": 2,
            "ray_actor_options": {"num_cpus": 1, "resources": {"gpu_slot": 1}},
            "max_ongoing_requests": 16,
        },
    )
    if _haproxy(config):
        # One ingress, the head's: each node's HAProxy binds the same ports (HTTP, stats,
        # metrics), which nodes on one machine cannot share; on a real cluster every node
        # runs its own (EveryNode, the config's).
        config["proxy_location"] = "HeadOnly"
    return config


def _serve(*args: str) -> None:
    serve_bin = str(Path(sys.executable).parent / "serve")
    done = subprocess.run([serve_bin, *args], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"serve {args[0]} failed:\n{done.stdout}\n{done.stderr}"


def _wait_for(predicate: Any, timeout_s: float, what: str) -> Any:
    """Polls ``predicate`` until it returns something truthy (HTTP errors count as no)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        time.sleep(2)
    raise AssertionError(f"not within {timeout_s:.0f}s: {what}")


@pytest.fixture(scope="module")
def multinode(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[MultiNode]:
    from ray.cluster_utils import Cluster

    port, dashboard_port = free_port(), free_port()
    config = _serve_config(tiny_model_dir, port)
    # The config's Ray Serve settings (RAY_SERVE_ENABLE_HA_PROXY...) reach Ray's controller and
    # proxies through the environment they start in, as serve.sh and the cluster configs do.
    env = ray_env(config)
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,  # the app's build task; no gpu_slot, so no replica
            "include_dashboard": True,
            "dashboard_port": dashboard_port,
        },
    )
    try:
        workers = {}
        for _ in range(3):
            node = cluster.add_node(num_cpus=1, resources={"gpu_slot": 1})
            workers[node.node_id] = node
        cluster.wait_for_nodes()
        dashboard = f"http://127.0.0.1:{dashboard_port}"
        state = MultiNode(
            cluster,
            f"http://127.0.0.1:{port}",
            dashboard,
            workers,
            haproxy=env.get("RAY_SERVE_ENABLE_HA_PROXY") == "1",
        )
        path = tmp_path_factory.mktemp("multinode") / "serve_config.multinode.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        _wait_for(lambda: httpx.get(f"{dashboard}/api/version").is_success, 60, "dashboard")
        _serve("deploy", "--address", dashboard, str(path))
        _wait_for(lambda: len(state.replicas()) == 2, START_TIMEOUT_S, "2 replicas running")
        yield state
    finally:
        cluster.shutdown()
        stop_orphaned_haproxies()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


async def _send(
    url: str, bodies: list[dict[str, Any]], concurrency: int, done: Counter[str] | None = None
) -> list[Outcome]:
    """Posts every body with the retrying client; ``done`` counts answers per replica."""
    limit = asyncio.Semaphore(concurrency)
    async with TranslationClient(url, retry=RETRY, timeout_s=120) as client:

        async def one(body: dict[str, Any]) -> Outcome:
            async with limit:
                outcome = await client.post("/translate", body)
            if done is not None and outcome.ok:
                done[outcome.headers["x-replica"]] += 1
            return outcome

        return list(await asyncio.gather(*(one(b) for b in bodies)))


def _bodies(n: int, seed: int) -> list[dict[str, Any]]:
    return [{**ITEM, "text": t} for t in texts(n, 3, 40, seed=seed)]


def test_one_replica_per_worker_node_and_none_on_the_head(multinode: MultiNode) -> None:
    placement = multinode.replicas()
    nodes = list(placement.values())
    assert len(placement) == 2
    assert len(set(nodes)) == 2, placement  # on different nodes
    assert set(nodes) <= set(multinode.workers), "a replica on the head node"
    # Ray's proxy runs on the head and on every node with a replica (EveryNode); the HAProxy
    # ingress, when the config turns it on, on the head only (HeadOnly, above).
    proxies = multinode.details()["proxies"]
    healthy = {node for node, proxy in proxies.items() if proxy["status"] == "HEALTHY"}
    head = multinode.ray_cluster.head_node.node_id
    print(f"proxies: { {n[:8]: p['status'] for n, p in proxies.items()} }, head {head[:8]}")
    expected = {head} if multinode.haproxy else {head, *nodes}
    assert expected <= healthy, proxies


def test_requests_through_the_proxy_are_served_by_every_replica(multinode: MultiNode) -> None:
    outcomes = asyncio.run(_send(multinode.url, _bodies(16, seed=21), concurrency=8))
    assert [o.status for o in outcomes] == [200] * 16, [o.error for o in outcomes if not o.ok]
    served_by = Counter(o.headers["x-replica"] for o in outcomes)
    assert set(served_by) == set(multinode.replicas()), served_by


async def _load_while_removing(state: MultiNode, victim: str) -> list[Outcome]:
    """40 requests, 6 at a time; the victim replica's node is removed once that replica has
    answered a few of them (so it is busy with more) and most are still to come."""
    done: Counter[str] = Counter()
    task = asyncio.create_task(_send(state.url, _bodies(40, seed=33), 6, done))
    async with asyncio.timeout(180):
        while done[victim] < 2:
            assert not task.done(), f"load ended before the victim was busy: {done}"
            await asyncio.sleep(0.1)
    assert sum(done.values()) < 30, f"too late to remove the node under load: {done}"
    node = state.workers.pop(state.replicas()[victim])
    await asyncio.to_thread(state.ray_cluster.remove_node, node, False)
    return await task


def test_removing_a_node_under_load_loses_no_request(multinode: MultiNode) -> None:
    before = multinode.replicas()
    victim, victim_node = next(iter(before.items()))
    spare = set(multinode.workers) - set(before.values())
    start = time.monotonic()
    outcomes = asyncio.run(_load_while_removing(multinode, victim))

    assert [o.status for o in outcomes] == [200] * 40, [o.error for o in outcomes if not o.ok]
    retried = [o for o in outcomes if o.attempts > 1]
    assert retried, "no request was in flight on the removed node"
    survivors = {o.headers["x-replica"] for o in retried}
    assert victim not in survivors  # a retried request was answered by another replica

    # Serve replaces the lost replica on the spare node (its only free gpu_slot).
    def rescheduled() -> dict[str, str] | None:
        replicas = multinode.replicas()
        return replicas if len(replicas) == 2 and victim not in replicas else None

    after = _wait_for(rescheduled, START_TIMEOUT_S, "the lost replica rescheduled")
    attempts = Counter(o.attempts for o in outcomes)
    elapsed = time.monotonic() - start
    print(f"node removed under load: attempts {dict(attempts)}, replica back after {elapsed:.0f}s")
    assert victim_node not in after.values()
    assert set(after.values()) == (set(before.values()) - {victim_node}) | spare
    final = asyncio.run(_send(multinode.url, _bodies(12, seed=45), concurrency=6))
    assert [o.status for o in final] == [200] * 12
    assert {o.headers["x-replica"] for o in final} == set(after)
