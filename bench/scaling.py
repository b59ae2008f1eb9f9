"""Scaling across GPUs: this project with 1 replica, then 2 (one per GPU), same load per replica.

    python -m bench.scaling --model MODEL_DIR --out DIR [--load-format dummy] \
        [--concurrency-per-replica 25] [--requests-per-replica 1000] [--rounds 2]

Each replica count is served by ``serve run`` (Ray's proxy in front), offered
--concurrency-per-replica users per replica on the variable workload, --rounds times. Reports
RPS, p95, the scaling ratio RPS(2) / RPS(1) (2.0 is linear) and each replica's GPU memory as
vLLM logged it (weights, KV cache). Writes scaling.json, scaling.md and scaling.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
from pathlib import Path
from typing import Any

from bench.journey import context, machine
from bench.loadgen import run
from bench.report import plot_journey
from bench.systems import BenchContext, engine_memory, started
from bench.workloads import make_workload, tokenizer_counter


async def one(ctx: BenchContext, replicas: int, ns: argparse.Namespace) -> dict[str, Any]:
    ctx.replicas = replicas
    users = ns.concurrency_per_replica * replicas
    count = tokenizer_counter(ns.model)
    items = make_workload(
        "variable", ns.requests_per_replica * replicas, seed=5, count_tokens=count
    )
    rounds = []
    async with started(ctx, "ray_serve", items) as target:
        await run(target, items[: 2 * users], concurrency=users)  # warm-up
        for _ in range(ns.rounds):
            result = await run(target, items, concurrency=users)
            rounds.append({**result, "workload": f"{replicas} replica(s)", "system": "ray_serve"})
            print(f"  {replicas} replica(s), {users} users: {result['rps']} RPS", flush=True)
    log = (ctx.workdir / "ray_serve.log").read_text(errors="replace")
    return {"replicas": replicas, "users": users, "runs": rounds, "memory": engine_memory(log)}


async def main_async(ns: argparse.Namespace) -> dict[str, Any]:
    ns.systems, ns.replicas, ns.ray_serve_llm_pythonpath = "ray_serve", 1, None
    ctx = context(ns)
    results = [await one(ctx, n, ns) for n in (1, 2)]
    rps = {r["replicas"]: statistics.median(x["rps"] for x in r["runs"]) for r in results}
    return {
        "machine": machine(),
        "settings": {"engine": json.loads(ctx.config.engine.model_dump_json())},
        "results": results,
        "median_rps": rps,
        "scaling_ratio": round(rps[2] / rps[1], 3) if rps[1] else None,
    }


def write(out: Path, result: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(result, indent=2))
    runs = [run for r in result["results"] for run in r["runs"]]
    plot_journey(runs, out / "scaling.png", f"1 vs 2 replicas on {result['machine']}")
    lines = [f"# Scaling on {result['machine']}", "", "| replicas | users | RPS (median) | p95 s |"]
    lines.append("|---|---|---|---|")
    for r in result["results"]:
        p95 = statistics.median(x["p95_s"] for x in r["runs"])
        lines.append(
            f"| {r['replicas']} | {r['users']} | {result['median_rps'][r['replicas']]} | {p95} |"
        )
    lines += ["", f"Scaling ratio RPS(2)/RPS(1): **{result['scaling_ratio']}** (2.0 = linear)", ""]
    lines += ["GPU memory per replica as vLLM logged it:", ""]
    for r in result["results"]:
        lines.append(f"- {r['replicas']} replica(s): {r['memory']}")
    (out / "scaling.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--serve-config", type=Path, default=Path("serve_config.yaml").resolve())
    p.add_argument("--load-format")
    p.add_argument("--engine", default="{}")
    p.add_argument("--concurrency-per-replica", type=int, default=25)
    p.add_argument("--requests-per-replica", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", type=Path, required=True)
    ns = p.parse_args()
    result = asyncio.run(main_async(ns))
    write(ns.out, result)
    print((ns.out / "scaling.md").read_text())


if __name__ == "__main__":
    main()
