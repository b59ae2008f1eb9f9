"""The load generator: closed loop (N concurrent users) or open loop (Poisson arrivals).

Usage (against a running service):
    python -m bench.loadgen --url http://127.0.0.1:8000 --tokenizer MODEL_DIR \
        --workload variable --requests 1000 --concurrency 25 --out results/run1
    python -m bench.loadgen --url ... --rate 20 --requests 600       # open loop, 20 req/s
    python -m bench.loadgen --url ... --api openai --model NAME      # a vLLM / OpenAI server
It prints a summary and writes ``results.json``, ``results.md`` and ``results.png`` to --out.
With ``--retries N`` it retries retryable answers (503, 429, 5xx, dropped connections) with
backoff and reports, per request, how many attempts it took: the project's client at work.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.targets import NativeTarget, OpenAITarget, Sample, Target
from bench.workloads import Item, make_workload, tokenizer_counter
from serve_app.client import NO_RETRY, RetryPolicy
from serve_app.core.config import PromptConfig


def _progress(total: int, label: str, enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=label, unit="req", disable=not enabled, leave=False)


async def closed_loop(
    target: Target, items: Sequence[Item], concurrency: int, progress: bool = False
) -> tuple[list[Sample], float]:
    """``concurrency`` users, each sending its next request as soon as the last returns."""
    queue = list(reversed(items))
    samples: list[Sample] = []
    bar = _progress(len(items), target.name, progress)
    start = time.perf_counter()

    async def user() -> None:
        while queue:
            sample = await target.send(queue.pop())
            samples.append(sample)
            bar.update(1)

    await asyncio.gather(*(user() for _ in range(min(concurrency, len(items)))))
    wall = time.perf_counter() - start
    bar.close()
    return _relative(samples, start), wall


async def open_loop(
    target: Target, items: Sequence[Item], rate: float, seed: int = 0, progress: bool = False
) -> tuple[list[Sample], float]:
    """Requests arrive as a Poisson process of ``rate`` per second, whatever the latency."""
    rng = random.Random(seed)
    bar = _progress(len(items), target.name, progress)
    start = time.perf_counter()
    next_at = start
    tasks = []

    async def one(item: Item) -> Sample:
        sample = await target.send(item)
        bar.update(1)
        return sample

    for item in items:
        next_at += rng.expovariate(rate)
        await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        tasks.append(asyncio.create_task(one(item)))
    samples = list(await asyncio.gather(*tasks))
    wall = time.perf_counter() - start
    bar.close()
    return _relative(samples, start), wall


def _relative(samples: list[Sample], start: float) -> list[Sample]:
    for s in samples:
        s.start_s = s.start_s - start
    return samples


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def timeline(samples: Sequence[Sample]) -> list[dict[str, int]]:
    """Per second of the run: requests completed, errors, output tokens, and requests open."""
    if not samples:
        return []
    seconds = math.ceil(max(s.start_s + s.latency_s for s in samples)) or 1
    rows = [
        {"t": t, "ok": 0, "errors": 0, "output_tokens": 0, "in_flight": 0} for t in range(seconds)
    ]
    for s in samples:
        first, last = max(0, int(s.start_s)), min(int(s.start_s + s.latency_s), seconds - 1)
        row = rows[max(0, last)]
        row["ok" if s.ok else "errors"] += 1
        row["output_tokens"] += s.output_tokens
        for t in range(first, last + 1):
            rows[t]["in_flight"] += 1
    return rows


def summarize(samples: Sequence[Sample], wall_s: float) -> dict[str, Any]:
    """RPS, latency percentiles, token rates and errors by status of one run."""
    ok = [s for s in samples if s.ok]
    lat = [s.latency_s for s in ok]
    ttfts = [s.ttft_s for s in ok if s.ttft_s is not None]
    visible = [s.ttft_visible_s for s in ok if s.ttft_visible_s is not None]
    firsts = [s.first_event_s for s in ok if s.first_event_s is not None]
    statuses = Counter("no_answer" if s.status is None else str(s.status) for s in samples)

    def r(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    return {
        "requests": len(samples),
        "ok": len(ok),
        "errors_by_status": {k: v for k, v in sorted(statuses.items()) if k != "200"},
        "wall_s": round(wall_s, 3),
        "rps": round(len(ok) / wall_s, 3) if wall_s > 0 else 0.0,
        "p50_s": r(percentile(lat, 50)),
        "p95_s": r(percentile(lat, 95)),
        "p99_s": r(percentile(lat, 99)),
        "mean_s": r(sum(lat) / len(lat)) if lat else None,
        # Streamed requests only (--stream); otherwise the whole translation is one answer.
        "ttft_p50_s": r(percentile(ttfts, 50)),
        "ttft_p95_s": r(percentile(ttfts, 95)),
        "ttft_visible_p50_s": r(percentile(visible, 50)),
        "ttft_visible_p95_s": r(percentile(visible, 95)),
        "first_event_p50_s": r(percentile(firsts, 50)),
        "input_tokens": sum(s.input_tokens for s in ok),
        "output_tokens": sum(s.output_tokens for s in ok),
        "output_tokens_per_s": round(sum(s.output_tokens for s in ok) / wall_s, 1),
        "retried_requests": sum(1 for s in samples if s.attempts > 1),
        "max_attempts": max((s.attempts for s in samples), default=0),
        "by_replica": by_replica(ok),
    }


def by_replica(ok: Sequence[Sample]) -> dict[str, dict[str, Any]]:
    """Answers and mean latency per replica that answered (X-Replica; empty for a server
    that names none): how evenly the ingress spread the load over replicas."""
    groups: dict[str, list[float]] = {}
    for s in ok:
        if s.replica is not None:
            groups.setdefault(s.replica, []).append(s.latency_s)
    return {
        name: {"ok": len(lat), "mean_s": round(sum(lat) / len(lat), 4)}
        for name, lat in sorted(groups.items())
    }


async def run(
    target: Target,
    items: Sequence[Item],
    *,
    concurrency: int | None = 25,
    rate: float | None = None,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """One run against ``target``: the summary plus its per-second timeline."""
    if rate:
        samples, wall = await open_loop(target, items, rate, seed, progress)
        mode = {"mode": "open", "rate": rate}
    else:
        samples, wall = await closed_loop(target, items, concurrency or 1, progress)
        mode = {"mode": "closed", "concurrency": concurrency}
    return {
        "system": target.name,
        **mode,
        **summarize(samples, wall),
        "timeline": timeline(samples),
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.loadgen", description=__doc__.split("\n")[0])
    p.add_argument("--url", required=True, help="base URL of the service")
    p.add_argument("--api", choices=["native", "openai"], default="native")
    p.add_argument("--model", default="bench", help="model name (openai API)")
    p.add_argument("--tokenizer", help="tokenizer folder: exact token counts (default: estimate)")
    p.add_argument("--workload", choices=["uniform", "variable", "html"], default="variable")
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=25, help="closed loop: concurrent users")
    p.add_argument("--rate", type=float, help="open loop: Poisson arrivals per second")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--retries", type=int, default=0, help="retries of retryable answers")
    p.add_argument("--stream", action="store_true", help="stream (/translate/stream), measure TTFT")
    p.add_argument("--out", help="folder for results.json / .md / .png")
    p.add_argument("--no-progress", action="store_true")
    return p


async def _main(ns: argparse.Namespace) -> dict[str, Any]:
    count = tokenizer_counter(ns.tokenizer) if ns.tokenizer else None
    items = make_workload(ns.workload, ns.requests, seed=ns.seed, count_tokens=count)
    retry = RetryPolicy(max_attempts=ns.retries + 1) if ns.retries else NO_RETRY
    target: Target
    if ns.api == "openai":
        prompt = PromptConfig(family="chat")
        target = OpenAITarget(ns.api, ns.url, ns.model, prompt, retry=retry, stream=ns.stream)
    else:
        target = NativeTarget(ns.api, ns.url, retry=retry, stream=ns.stream)
    try:
        result = await run(
            target,
            items,
            concurrency=ns.concurrency,
            rate=ns.rate,
            seed=ns.seed,
            progress=not ns.no_progress,
        )
    finally:
        await target.aclose()
    return {**result, "workload": ns.workload}


def main(argv: Sequence[str] | None = None) -> None:
    ns = _parser().parse_args(argv)
    result = asyncio.run(_main(ns))
    if ns.out:
        from bench.report import write_run

        write_run(Path(ns.out), result)
    print(json.dumps({k: v for k, v in result.items() if k != "timeline"}, indent=2))


if __name__ == "__main__":
    main()
