"""Autotune: sweep ``max_num_seqs`` at the expected concurrency and recommend engine settings.

    python -m bench.autotune --model MODEL_DIR --concurrency 25 --out DIR \
        [--values 1,2,4,8,16,32,64] [--p95-target 2.0] [--load-format dummy] [--resume]

For each value the engine (vLLM AsyncLLM, in-process, the serve config's other settings) is
started fresh, warmed up (--warmup requests on other texts) and driven with the variable-length
workload by --concurrency users. Recorded per
value: RPS, p50/p95 latency, and decode time per output token (the mean over requests of
(latency - time to first token) / (output tokens - 1), from vLLM's own request timings).

The rule that picks the recommendation, stated: among the values whose p95 latency meets
--p95-target (all values when no target is given), take the best RPS; then the smallest value
whose RPS is within --tolerance (5%) of it. Larger batches that buy less than that only add
latency and KV-cache memory. The recommended settings are written as a serve config derived
from --serve-config (``autotune.yaml``), with ``autotune.json`` and ``autotune.md`` beside it.
They are rewritten after every value, so a sweep cut short (a device call's time limit) keeps
what it measured, and ``--resume`` measures only the values still missing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from bench.loadgen import closed_loop, percentile, summarize
from bench.report import plot_sweep
from bench.systems import ROOT, bench_app_config
from bench.targets import EngineTarget
from bench.workloads import Item, make_workload, tokenizer_counter
from serve_app.core.config import AppConfig
from serve_app.tools.launcher import derive_config


async def _point(
    config: AppConfig, items: list[Item], concurrency: int, warmup: list[Item]
) -> dict[str, Any]:
    """One value of max_num_seqs: RPS, latency and decode time per token, measured after a
    warm-up on other texts (a fresh engine's first batches are slower)."""
    target = EngineTarget(f"max_num_seqs={config.engine.max_num_seqs}", config)
    await target.start(warmup + items)
    try:
        await closed_loop(target, warmup, concurrency)
        samples, wall = await closed_loop(target, items, concurrency)
    finally:
        await target.aclose()
    summary = summarize(samples, wall)
    # vLLM's own time to first token: the rest of the latency is decoding.
    decode = [
        (s.latency_s - s.ttft_s) / (s.output_tokens - 1)
        for s in samples
        if s.ok and s.ttft_s is not None and s.output_tokens > 1
    ]
    per_token = sum(decode) / len(decode) if decode else None
    return {
        "max_num_seqs": config.engine.max_num_seqs,
        **{k: summary[k] for k in ("rps", "p50_s", "p95_s", "p99_s", "output_tokens_per_s", "ok")},
        "decode_ms_per_token": round(per_token * 1000, 3) if per_token else None,
        "decode_p95_ms_per_token": round(1000 * (percentile(decode, 95) or 0), 3)
        if decode
        else None,
    }


def pick(
    points: list[dict[str, Any]], p95_target: float | None, tolerance: float
) -> dict[str, Any]:
    """The stated rule: best RPS under the p95 target, then the smallest value within
    ``tolerance`` of it."""
    eligible = [p for p in points if p95_target is None or (p["p95_s"] or 1e9) <= p95_target]
    if not eligible:
        eligible = [min(points, key=lambda p: p["p95_s"] or 1e9)]
    best = max(p["rps"] for p in eligible)
    near = [p for p in eligible if p["rps"] >= (1 - tolerance) * best]
    return min(near, key=lambda p: p["max_num_seqs"])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.autotune", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--serve-config", type=Path, default=ROOT / "serve_config.yaml")
    p.add_argument("--load-format")
    p.add_argument("--engine", default="{}", help="JSON: more engine settings")
    p.add_argument("--values", default="1,2,4,8,16,32,64")
    p.add_argument("--concurrency", type=int, default=25)
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--warmup", type=int, default=50, help="requests before each measurement")
    p.add_argument("--p95-target", type=float, help="seconds; none: no latency constraint")
    p.add_argument("--tolerance", type=float, default=0.05)
    p.add_argument("--resume", action="store_true", help="keep the values measured in --out")
    p.add_argument("--out", type=Path, required=True)
    return p


async def sweep(ns: argparse.Namespace) -> dict[str, Any]:
    engine = json.loads(ns.engine)
    if ns.load_format:
        engine["load_format"] = ns.load_format
    count = tokenizer_counter(ns.model)
    items = make_workload("variable", ns.requests, seed=3, count_tokens=count)
    warmup = make_workload("variable", ns.warmup, seed=4, count_tokens=count)
    points = measured(ns.out) if ns.resume else []
    done = {p["max_num_seqs"] for p in points}
    for value in (int(v) for v in ns.values.split(",") if int(v) not in done):
        config = bench_app_config(ns.serve_config, ns.model, {**engine, "max_num_seqs": value})
        point = await _point(config, items, ns.concurrency, warmup)
        points = sorted([*points, point], key=lambda p: p["max_num_seqs"])
        print(json.dumps(point), flush=True)
        write(ns, result(ns, points))
    return result(ns, points)


def measured(out: Path) -> list[dict[str, Any]]:
    """The points an earlier (cut short) sweep wrote to ``out``."""
    path = out / "autotune.json"
    return list(json.loads(path.read_text())["points"]) if path.exists() else []


def tuned_engine(ns: argparse.Namespace) -> dict[str, Any]:
    """The --engine settings that the swept engines ran with and a deployment should keep
    (random weights are for the benchmark only)."""
    return {k: v for k, v in json.loads(ns.engine).items() if k != "load_format"}


def result(ns: argparse.Namespace, points: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "engine": tuned_engine(ns),
        "concurrency": ns.concurrency,
        "requests": ns.requests,
        "warmup": ns.warmup,
        "p95_target_s": ns.p95_target,
        "tolerance": ns.tolerance,
        "points": points,
        "recommended": pick(points, ns.p95_target, ns.tolerance),
    }


def write(ns: argparse.Namespace, result: dict[str, Any]) -> None:
    ns.out.mkdir(parents=True, exist_ok=True)
    (ns.out / "autotune.json").write_text(json.dumps(result, indent=2))
    value = result["recommended"]["max_num_seqs"]
    engine = {**tuned_engine(ns), "max_num_seqs": value}
    config = derive_config(ns.serve_config, args={"engine": engine})
    header = (
        f"# Written by bench.autotune: max_num_seqs={value} gave "
        f"{result['recommended']['rps']} RPS, p95 {result['recommended']['p95_s']} s at "
        f"{result['concurrency']} concurrent requests (rule: see bench/autotune.py).\n"
    )
    (ns.out / "autotune.yaml").write_text(header + yaml.safe_dump(config, sort_keys=False))
    rows = [
        "| max_num_seqs | RPS | p50 s | p95 s | decode ms/token | out tok/s |",
        "|---|---|---|---|---|---|",
    ]
    for p in result["points"]:
        mark = (
            " **(recommended)**" if p is result["recommended"] or p == result["recommended"] else ""
        )
        rows.append(
            f"| {p['max_num_seqs']}{mark} | {p['rps']} | {p['p50_s']} | {p['p95_s']} | "
            f"{p['decode_ms_per_token']} | {p['output_tokens_per_s']} |"
        )
    (ns.out / "autotune.md").write_text("\n".join(rows) + "\n")
    plot_sweep(
        result["points"],
        ns.out / "autotune.png",
        f"max_num_seqs sweep at {result['concurrency']} users",
    )


def main() -> None:
    ns = _parser().parse_args()
    result = asyncio.run(sweep(ns))
    write(ns, result)
    print((ns.out / "autotune.md").read_text())


if __name__ == "__main__":
    main()
