"""Scaling across GPUs: this project with 1 replica, then 2 (one per GPU), same load per replica.

    python -m bench.scaling --model MODEL_DIR --out DIR [--load-format dummy] \
        [--concurrency-per-replica 25] [--requests-per-replica 1000] [--rounds 2] \
        [--replicas 1,2] [--append]

On a fresh GPU machine both replica counts do not fit one 10-minute device call (the first
start unpacks and compiles): run ``--replicas 1``, then ``--replicas 2 --append``, which keeps
the replica counts already in DIR/scaling.json and writes the ratio once both are there.
``--replicas 1,2,1,2`` alternates the counts (each started anew), so that a drift of the
machine weighs on both; the rounds of a count measured more than once are pooled.

Each replica count is served by ``serve run`` (Ray's proxy in front), offered
--concurrency-per-replica users per replica on the variable workload, --rounds times. Reports
RPS, p95, the scaling ratio RPS(2) / RPS(1) (2.0 is linear) and each replica's GPU memory as
vLLM logged it (weights, KV cache). Writes scaling.json, scaling.md and scaling.png.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.journey import context, gpu_memory, machine
from bench.loadgen import run
from bench.report import plot_journey
from bench.systems import BenchContext, started
from bench.workloads import make_workload, tokenizer_counter


async def one(ctx: BenchContext, replicas: int, ns: argparse.Namespace) -> dict[str, Any]:
    ctx.replicas = replicas
    users = ns.concurrency_per_replica * replicas
    count = tokenizer_counter(ns.model)
    n = ns.requests_per_replica * replicas
    # Fresh texts for the warm-up and each round: no prefix-cache hits on texts seen before.
    warmup = make_workload("variable", 4 * users, seed=99, count_tokens=count)
    rounds = [
        make_workload("variable", n, seed=5 + r, count_tokens=count) for r in range(ns.rounds)
    ]
    runs = []
    async with started(ctx, "ray_serve", warmup + [i for r in rounds for i in r]) as target:
        await run(target, warmup, concurrency=users)
        memory = gpu_memory()
        for items in rounds:
            result = await run(target, items, concurrency=users)
            runs.append({**result, "workload": f"{replicas} replica(s)", "system": "ray_serve"})
            print(f"  {replicas} replica(s), {users} users: {result['rps']} RPS", flush=True)
    return {"replicas": replicas, "users": users, "runs": runs, "gpu_memory_used_mib": memory}


def earlier(out: Path, append: bool) -> tuple[list[dict[str, Any]], list[int]]:
    """The replica counts of an earlier part in ``out`` (``--append``) and the order they were
    measured in, else none."""
    path = out / "scaling.json"
    if not append or not path.exists():
        return [], []
    data = json.loads(path.read_text())
    results = list(data["results"])
    return results, list(data.get("order", [r["replicas"] for r in results]))


def assemble(
    machine_name: str,
    engine: dict[str, Any],
    new: list[dict[str, Any]],
    earlier: Sequence[dict[str, Any]] = (),
    earlier_order: Sequence[int] = (),
) -> dict[str, Any]:
    """The report of every replica count measured, by count: a count measured again (``1,2,1,2``
    or ``--append``) adds its rounds to the earlier ones, so alternated counts share the
    machine's drift; ``order`` keeps the counts as they were measured (``earlier``, read back
    from an earlier part, is already pooled: ``earlier_order`` is its order). The ratio of
    the median RPS once 1 and 2 replicas are both there."""
    by_count: dict[int, dict[str, Any]] = {}
    for r in [*earlier, *new]:
        n = r["replicas"]
        if n in by_count:
            merged = by_count[n]
            merged["runs"] = merged["runs"] + r["runs"]
            merged["gpu_memory_used_mib"] = r["gpu_memory_used_mib"]
        else:
            by_count[n] = dict(r)
    order = [*earlier_order, *(r["replicas"] for r in new)]
    ordered = [by_count[n] for n in sorted(by_count)]
    rps = {r["replicas"]: statistics.median(x["rps"] for x in r["runs"]) for r in ordered}
    ratio = round(rps[2] / rps[1], 3) if rps.get(1) and 2 in rps else None
    return {
        "machine": machine_name,
        "settings": {"engine": engine},
        "order": order,
        "results": ordered,
        "median_rps": rps,
        "scaling_ratio": ratio,
    }


async def main_async(ns: argparse.Namespace) -> dict[str, Any]:
    ns.systems, ns.replicas, ns.ray_serve_llm_pythonpath = "ray_serve", 1, None
    ns.stream = False
    before, before_order = earlier(ns.out, ns.append)
    ctx = context(ns)
    engine = json.loads(ctx.config.engine.model_dump_json())
    results: list[dict[str, Any]] = []
    for n in ns.replica_counts:
        results.append(await one(ctx, n, ns))
        # Written after each count: a call cut by its time limit keeps the counts it measured.
        write(ns.out, assemble(machine(), engine, results, before, before_order))
    return assemble(machine(), engine, results, before, before_order)


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
            f"| {r['replicas']} | {r['users']} | {result['median_rps'][r['replicas']]:.1f} "
            f"| {p95:.3f} |"
        )
    ratio = result["scaling_ratio"]
    said = (
        f"**{ratio}** (2.0 = linear)" if ratio is not None else "not yet (1 and 2 replicas needed)"
    )
    lines += ["", f"Scaling ratio RPS(2)/RPS(1): {said}", ""]
    lines += ["Answers per replica, each round (X-Replica: answers, mean latency):", ""]
    for r in result["results"]:
        for i, measured in enumerate(r["runs"], 1):
            spread = ", ".join(
                f"{name[-8:]} {v['ok']} / {v['mean_s']:.3f} s"
                for name, v in measured.get("by_replica", {}).items()
            )
            lines.append(f"- {r['replicas']} replica(s), round {i}: {spread or 'not named'}")
    lines += ["", "GPU memory in use (MiB per GPU, nvidia-smi, replicas up):", ""]
    for r in result["results"]:
        lines.append(f"- {r['replicas']} replica(s): {r['gpu_memory_used_mib']}")
    (out / "scaling.md").write_text("\n".join(lines) + "\n")


def replica_counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",")]
    if not counts or any(n not in (1, 2) for n in counts):
        raise argparse.ArgumentTypeError("replica counts are 1 or 2, e.g. 1,2 or 1,2,1,2")
    return counts


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--serve-config", type=Path, default=Path("serve_config.yaml").resolve())
    p.add_argument("--load-format")
    p.add_argument("--engine", default="{}")
    p.add_argument("--concurrency-per-replica", type=int, default=25)
    p.add_argument("--requests-per-replica", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--replicas", dest="replica_counts", type=replica_counts, default=[1, 2])
    p.add_argument("--append", action="store_true", help="keep the counts already in --out")
    p.add_argument("--out", type=Path, required=True)
    return p


def main() -> None:
    ns = parser().parse_args()
    # SIGTERM (a time limit) unwinds like Ctrl-C, so the started `serve run` is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    result = asyncio.run(main_async(ns))
    write(ns.out, result)
    print((ns.out / "scaling.md").read_text())


if __name__ == "__main__":
    main()
