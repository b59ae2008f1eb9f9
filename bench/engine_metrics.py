"""CPU per engine step of vLLM's stat logger through Ray's metrics API, unbuffered and buffered.

vLLM calls its stat loggers once per engine step on the replica's event loop; a py-spy
profile under load on an H100 put 11% of the replica's samples in vLLM's
``RayPrometheusStatLogger`` (bench/results/2026-11-24-h100-cpu-profile/). This benchmark
builds that logger and ours (``serve_app.engine.metrics``) inside a local ``ray.init()``,
feeds both the same synthetic steps, built with vLLM's own stats classes (``--running``
requests decoding one token each, ``--finished`` finishing and as many starting per step),
and reports the microseconds of CPU (process time) per engine step, the buffered loggers'
flushes (one every ``--steps-per-flush`` steps: 1 s at 100 steps a second) included: exact,
and with the per-token histogram sampled (``--token-sample`` values per flush).

    python -m bench.engine_metrics --steps 5000
    python -m bench.engine_metrics --stall --steps-per-flush 200

``--stall`` measures instead how long a timed flush (the one the replica's event loop runs
every ``engine_metrics_flush_s``) holds the loop: the longest gap between the turns of a
task running beside it, with the histograms' values sent ``SEND_CHUNK`` per turn (the
default) and all at once (as before 2026-11-27), in alternated rounds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
import types
from collections.abc import Callable
from typing import Any


def vllm_config(model: str = "bench-model", max_model_len: int = 4096) -> Any:
    """A vLLM config with the model fields the stat loggers read (no model is loaded)."""
    from vllm.config import VllmConfig

    config = VllmConfig()
    model_config = types.SimpleNamespace(
        served_model_name=model, max_model_len=max_model_len, is_diffusion=False
    )
    object.__setattr__(config, "model_config", model_config)
    return config


def synthetic_steps(n: int, running: int, finished: int, seed: int = 0) -> list[tuple[Any, Any]]:
    """``n`` (SchedulerStats, IterationStats) pairs of a decoding batch of ``running``
    requests: one token each per step, ``finished`` finishing and as many starting."""
    from vllm.v1.engine import FinishReason
    from vllm.v1.metrics.stats import (
        FinishedRequestStats,
        IterationStats,
        PrefixCacheStats,
        SchedulerStats,
    )

    rng = random.Random(seed)
    steps = []
    for _ in range(n):
        prompt = rng.randint(30, 300) * finished
        scheduler = SchedulerStats(
            num_running_reqs=running,
            num_waiting_reqs=rng.randint(0, 3),
            kv_cache_usage=rng.random(),
            prefix_cache_stats=PrefixCacheStats(queries=prompt, hits=prompt // 3, requests=1),
        )
        iteration = IterationStats()
        iteration.num_generation_tokens = running
        iteration.prompt_token_stats.computed = prompt
        iteration.prompt_token_stats.total = prompt
        iteration.time_to_first_tokens_iter = [rng.uniform(0.02, 0.2) for _ in range(finished)]
        iteration.max_num_generation_tokens_iter = [rng.randint(20, 200) for _ in range(finished)]
        iteration.n_params_iter = [1] * finished
        iteration.inter_token_latencies_iter = [
            rng.uniform(0.005, 0.03) for _ in range(running - finished)
        ]
        iteration.finished_requests = [_finished(rng, FinishReason, FinishedRequestStats)]
        iteration.finished_requests *= finished
        steps.append((scheduler, iteration))
    return steps


def _finished(rng: random.Random, reason: Any, stats: Any) -> Any:
    tokens = rng.randint(10, 200)
    decode = tokens * rng.uniform(0.005, 0.03)
    return stats(
        finish_reason=reason.STOP,
        e2e_latency=decode + 0.1,
        num_prompt_tokens=rng.randint(30, 300),
        num_generation_tokens=tokens,
        max_tokens_param=512,
        queued_time=rng.uniform(0, 0.05),
        prefill_time=rng.uniform(0.01, 0.05),
        inference_time=decode + 0.05,
        decode_time=decode,
        mean_time_per_output_token=decode / tokens,
    )


def cpu_us_per_step(
    stat_logger: Any, steps: list[tuple[Any, Any]], flush: Callable[[], None] | None, every: int
) -> float:
    """Process-time microseconds per ``record()`` (and, every ``every`` steps, ``flush``)."""
    start = time.process_time()
    for i, (scheduler, iteration) in enumerate(steps, 1):
        stat_logger.record(scheduler, iteration, engine_idx=0)
        if flush is not None and i % every == 0:
            flush()
    if flush is not None:
        flush()
    return (time.process_time() - start) / len(steps) * 1e6


async def longest_stall_ms(stat_logger: Any, steps: list[tuple[Any, Any]]) -> dict[str, float]:
    """The steps recorded, then one timed flush on this loop beside a task that notes the
    time of each of its turns: the longest gap between turns and the flush's whole time."""
    import asyncio

    for scheduler, iteration in steps:
        stat_logger.record(scheduler, iteration, engine_idx=0)
    buffer = stat_logger.metric_buffer
    turns: list[float] = []

    async def beside() -> None:
        while True:
            turns.append(time.perf_counter())
            await asyncio.sleep(0)

    task = asyncio.create_task(beside())
    await asyncio.sleep(0)
    start = time.perf_counter()
    buffer._flush_in_turns()
    while buffer._outbox or buffer._sending:  # noqa: ASYNC110 (a turn of the loop each)
        await asyncio.sleep(0)
    took = time.perf_counter() - start
    for _ in range(2):  # the task's first turn after the flush ends the last gap
        await asyncio.sleep(0)
    task.cancel()
    gaps = [b - a for a, b in itertools.pairwise(turns)]
    return {"longest_stall_ms": round(max(gaps) * 1e3, 2), "flush_ms": round(took * 1e3, 2)}


def stalls(args: argparse.Namespace, config: Any) -> dict[str, Any]:
    """``--stall``: a timed flush's longest hold of the loop, chunked and at once."""
    import asyncio

    from serve_app.engine import metrics

    steps = synthetic_steps(args.steps_per_flush, args.running, args.finished)
    result: dict[str, Any] = {"steps_per_flush": args.steps_per_flush, "running": args.running}
    default = metrics.SEND_CHUNK
    for _ in range(args.rounds):
        for name, chunk in ((f"chunks of {default}", default), ("at once", 10**9)):
            metrics.SEND_CHUNK = chunk
            stat_logger = metrics.buffered_ray_stat_logger(flush_s=1e9)(config, [0])
            result.setdefault(name, []).append(asyncio.run(longest_stall_ms(stat_logger, steps)))
    metrics.SEND_CHUNK = default
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    import ray
    from vllm.v1.metrics.ray_wrappers import RayPrometheusStatLogger

    from serve_app.engine.metrics import buffered_ray_stat_logger

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        config = vllm_config()
        if args.stall:
            return stalls(args, config)
        steps = synthetic_steps(args.steps, args.running, args.finished)
        # A flush interval no step reaches: the benchmark flushes by step count instead.
        loggers = {
            "ray (vLLM's RayPrometheusStatLogger)": (RayPrometheusStatLogger(config, [0]), None),
        }
        buffered = buffered_ray_stat_logger(flush_s=1e9)(config, [0])
        loggers["buffered (serve_app.engine.metrics)"] = (buffered, buffered.flush)
        sampled = buffered_ray_stat_logger(1e9, args.token_sample)(config, [0])
        loggers[f"buffered, token_sample={args.token_sample}"] = (sampled, sampled.flush)
        result: dict[str, Any] = {"steps": args.steps, "running": args.running}
        result["finished_per_step"] = args.finished
        result["steps_per_flush"] = args.steps_per_flush
        for _ in range(args.rounds):  # alternated rounds: the machine's noise shows
            for name, (stat_logger, flush) in loggers.items():
                us = cpu_us_per_step(stat_logger, steps, flush, args.steps_per_flush)
                result.setdefault(name, []).append(round(us, 1))
        return result
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--running", type=int, default=25)
    parser.add_argument("--finished", type=int, default=1)
    parser.add_argument("--steps-per-flush", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--token-sample", type=int, default=100, help="per flush")
    parser.add_argument("--stall", action="store_true", help="a timed flush's hold of the loop")
    print(json.dumps(run(parser.parse_args()), indent=2))


if __name__ == "__main__":
    main()
