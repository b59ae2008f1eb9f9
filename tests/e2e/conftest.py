"""Starts the app the way users do: `serve run` of the CPU config (tiny model swapped in)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import psutil
import pytest
import yaml

from bench.ports import free_port
from serve_app.tools.launcher import derive_config, ray_env, stop_orphaned_haproxies
from tests.conftest import ROOT
from tests.e2e.replicas import engine_cores

START_TIMEOUT_S = 420


def _serve_bin() -> str:
    return str(Path(sys.executable).parent / "serve")


def _replicas_answering(url: str, probes: int = 8) -> set[str]:
    """Replica ids seen on /readyz through the proxy (it routes only to running replicas)."""
    seen = set()
    for _ in range(probes):
        try:
            r = httpx.get(f"{url}/readyz", timeout=5)
        except httpx.HTTPError:
            continue
        if r.status_code == 200:
            seen.add(r.headers.get("x-replica", ""))
    return seen


def _wait_ready(proc: subprocess.Popen, url: str, replicas: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve run exited early with code {proc.returncode}")
        if len(_replicas_answering(url)) >= replicas:
            return
        time.sleep(1)
    raise RuntimeError(f"{replicas} replicas were not ready within {START_TIMEOUT_S}s")


def _engine_cores() -> list[psutil.Process]:
    """The vLLM engine cores under the local raylet (each a replica's child process)."""
    raylets = psutil.process_iter(["name"])
    return [c for r in raylets if r.info["name"] == "raylet" for c in engine_cores(r.pid)]


def _stop(proc: subprocess.Popen, env: dict[str, str]) -> None:
    """Stops `serve run` and the cluster, at once: a graceful stop waits out the HAProxy
    ingress's deregistration window (Ray's `RAY_SERVE_DIRECT_INGRESS_MIN_DRAINING_PERIOD_S`,
    30 s) for nothing after the module's last test (~35 s a cluster). `ray stop --force` kills
    the raylet before it has reaped its workers' children: engine cores still alive then
    outlived the cluster (seen after runs of one module, holding their memory for hours), so
    they are killed too, and so is the HAProxy of Ray's HAProxy ingress if the cluster left
    it (its ports)."""
    cores = _engine_cores()
    proc.kill()
    proc.wait()
    ray_bin = str(Path(sys.executable).parent / "ray")
    subprocess.run([ray_bin, "stop", "--force"], capture_output=True, env=env, timeout=120)
    for core in cores:
        with contextlib.suppress(psutil.Error):
            core.kill()
    stop_orphaned_haproxies()


def _ray(*args: str, env: dict[str, str]) -> None:
    ray_bin = str(Path(sys.executable).parent / "ray")
    subprocess.run([ray_bin, *args], check=True, capture_output=True, env=env, timeout=180)


def own_store(config: dict, workdir: Path) -> dict:
    """``config`` with a store of its own under ``workdir`` unless it names one: the default
    (``~/.serve_app/store.db``) is the user's, and its unfinished document jobs (uploads to
    the demo) were picked up by a test cluster and translated for minutes beside the tests."""
    args = config["applications"][0]["args"]
    args.setdefault("store", {"url": f"sqlite:///{workdir}/store.db"})
    return config


@dataclass(frozen=True)
class Cluster:
    url: str
    metrics_url: str
    logs: Path


@pytest.fixture(scope="session")
def cluster(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A Ray head (its metrics endpoint on a known port) and `serve run` of the CPU config:
    2 replicas of the tiny model behind Ray's proxy, logs in JSON."""
    port, metrics_port, gcs_port = free_port(), free_port(), free_port()
    config = derive_config(
        ROOT / "serve_config.cpu.yaml",
        top={"http_options": {"port": port}},
        app_options={"logging_config": {"encoding": "JSON"}},
        args={
            # Grouped admission on (serve_app/engine/grouped_admission.py): the whole suite's
            # deadlines, aborts, overload and draining run through its scheduler too.
            "engine": {
                "model": str(tiny_model_dir),
                "max_model_len": 2048,
                "admission_group": 2,
                "admission_max_hold_steps": 4,
            },
            # Greedy (not the chat family's sampling): the random model's answers repeat.
            "prompt": {"family": "chat", "sampling": {"temperature": 0.0}},
            "limits": {"max_input_tokens": 512, "max_batch_items": 8},
            # A body must arrive within 2 s (test_slow_requests.py): slow bodies cut quickly.
            "security": {"body_timeout_s": 2},
        },
        runtime_env={"env_vars": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
        # Room for the 20 requests of the disconnect test on one replica plus the probes.
        deployment={"num_replicas": 2, "max_ongoing_requests": 24, "max_queued_requests": 32},
    )
    workdir = tmp_path_factory.mktemp("serve")
    ray_args = [f"--port={gcs_port}", f"--metrics-export-port={metrics_port}"]
    with serve_cluster(config, workdir, replicas=2, ray_args=ray_args) as url:
        # Resolved now: clusters started later (the multi-node test's) move session_latest.
        logs = Path("/tmp/ray/session_latest/logs").resolve()
        yield Cluster(url, f"http://127.0.0.1:{metrics_port}/metrics", logs)


@contextmanager
def serve_cluster(
    config: dict,
    workdir: Path,
    replicas: int,
    ray_args: list[str],
    extra_env: dict[str, str] | None = None,
) -> Iterator[str]:
    """A fresh Ray head (2 CPUs; `ray stop --force` before and after) and `serve run` of
    ``config`` on it; yields the HTTP URL once ``replicas`` replicas answer."""
    path = workdir / "serve_config.e2e.yaml"
    path.write_text(yaml.safe_dump(own_store(config, workdir), sort_keys=False))
    env = {
        **os.environ,
        **ray_env(config),  # the proxy's header cleaning (serving/proxy_headers.py)
        **(extra_env or {}),
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    _ray("stop", "--force", env=env)
    stop_orphaned_haproxies()  # one left by a cluster before (the README demo's...) holds ports
    _ray("start", "--head", *ray_args, "--num-cpus=2", "--disable-usage-stats", env=env)
    log = (workdir / "serve.log").open("w")
    proc = subprocess.Popen(
        [_serve_bin(), "run", "--address", "auto", str(path)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{config['http_options']['port']}"
    try:
        _wait_ready(proc, url, replicas=replicas)
        yield url
    except RuntimeError:
        log.flush()
        print((workdir / "serve.log").read_text()[-20000:])
        raise
    finally:
        _stop(proc, env)
        log.close()


@pytest.fixture(scope="session")
def served(cluster: Cluster) -> str:
    """Base URL of the running service."""
    return cluster.url


@pytest.fixture(scope="session")
def openai_client(served: str) -> openai.OpenAI:
    """The official ``openai`` client of the running service (``/v1``)."""
    return openai.OpenAI(base_url=f"{served}/v1", api_key="any-key", timeout=300)


@pytest.fixture(scope="session")
def openai_model(openai_client: openai.OpenAI) -> str:
    """The one model the service serves, as ``GET /v1/models`` names it."""
    (only,) = list(openai_client.models.list())
    assert only.object == "model"
    return only.id
