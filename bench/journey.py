"""The journey in one run: every system, the same model, workload and machine, side by side.

    python -m bench.journey --model MODEL_DIR --out bench/results/DATE-MACHINE \
        [--serve-config serve_config.yaml] [--load-format dummy] [--systems a,b,...] \
        [--requests 1000] [--slow-requests 200] [--concurrency 25] \
        [--head-to-head ray_serve,vllm_serve --rounds 3]

Each system is started, warmed up, measured on the uniform and the variable workload in a
closed loop of --concurrency users, and stopped, in turn. The seeds' slow designs (systems 1
and 2) get --slow-requests. ``--head-to-head A,B`` then keeps A and B up at once and
alternates them A B A B ... for --rounds rounds on the variable workload, and reports the
median of the per-round RPS ratios with their spread: single runs are too noisy to compare.
Writes journey.json, journey.md and journey.png to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from bench.loadgen import closed_loop, run, summarize
from bench.report import COLUMNS, markdown_table, plot_head_to_head, plot_journey
from bench.systems import (
    ALL_SYSTEMS,
    LABELS,
    ROOT,
    BenchContext,
    bench_app_config,
    describe,
    engine_memory,
    started,
    system_of,
)
from bench.targets import Sample, Target
from bench.workloads import Item, make_workload, tokenizer_counter

SLOW = {"mp_queue_1", "mp_queue_2", "static_batch"}
OURS = "ray_serve"
DESIGNS = ("abba", "alternate")


def machine() -> str:
    """The GPU's name, or the CPU's where there is none."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        if out:
            return out.replace("\n", " + ")
    except (OSError, subprocess.SubprocessError):
        pass
    return f"CPU {platform.processor() or platform.machine()} x{os.cpu_count()}"


def phase(text: str) -> None:
    """Tells a watcher (``bench.cpu_profile``, through $BENCH_PHASE_FILE) which system is
    under measured load now ("" between runs). Replaced whole, never truncated in place: a
    watcher that read an empty file mid-write would end its window there."""
    if path := os.environ.get("BENCH_PHASE_FILE"):
        tmp = Path(f"{path}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)


async def measure(
    ctx: BenchContext,
    name: str,
    workloads: dict[str, list[Item]],
    concurrency: int,
    warmup: list[Item],
) -> list[dict[str, Any]]:
    """One system: start, warm up (on texts of its own: vLLM's prefix cache would otherwise
    favour the texts seen before), each workload once, stop."""
    everything = warmup + [item for items in workloads.values() for item in items]
    async with started(ctx, name, everything) as target:
        await run(target, warmup, concurrency=concurrency)
        memory = gpu_memory()
        results = []
        for workload, items in workloads.items():
            phase(f"{name} {workload}")
            result = await run(target, items, concurrency=concurrency)
            phase("")
            results.append({**result, "workload": workload, "label": LABELS[system_of(name)]})
            print(
                f"  {name:18s} {workload:8s} {result['rps']:8.2f} RPS  p95 {result['p95_s']}s  "
                f"ok {result['ok']}/{result['requests']}",
                flush=True,
            )
    log = ctx.workdir / f"{name}.log"
    logged = engine_memory(log.read_text(errors="replace")) if log.exists() else []
    return [{**r, "gpu_memory_used_mib": memory, "engine_memory": logged} for r in results]


async def head_to_head(
    ctx: BenchContext,
    names: list[str],
    rounds: list[list[Item]],
    concurrency: int,
    warmup: list[Item],
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    design: str = "abba",
) -> dict[str, Any]:
    """Systems up at once, alternated (``design``: see ``_alternate``); per-round ratios of
    the first to the others. Each round sends texts no system has seen (no prefix-cache hits
    across rounds). ``checkpoint`` gets the results so far after each round (a run cut short
    keeps them)."""
    everything = warmup + [item for items in rounds for item in items]

    def summary(per_round: list[dict[str, Any]]) -> dict[str, Any]:
        return _h2h(names, concurrency, len(rounds[0]), per_round, design)

    async with AsyncExitStack() as stack:
        targets = [await stack.enter_async_context(started(ctx, n, everything)) for n in names]
        for target in targets:
            await run(target, warmup, concurrency=concurrency)
        arms = [{t.name: (t, items) for t in targets} for items in rounds]
        per_round = await _alternate(arms, concurrency, summary, checkpoint, design)
    return summary(per_round)


async def workload_head_to_head(
    ctx: BenchContext,
    name: str,
    rounds: list[dict[str, list[Item]]],
    concurrency: int,
    warmup: list[Item],
    checkpoint: Callable[[dict[str, Any]], None] | None = None,
    design: str = "abba",
) -> dict[str, Any]:
    """One system up, its workloads alternated (``design``) on fresh texts each round:
    e.g. ``html`` against ``variable`` (does markup cost throughput?), as ratios per round."""
    kinds = list(rounds[0])
    everything = warmup + [i for per_kind in rounds for items in per_kind.values() for i in items]

    def summary(per_round: list[dict[str, Any]]) -> dict[str, Any]:
        requests = len(rounds[0][kinds[0]])
        return {"system": name, **_h2h(kinds, concurrency, requests, per_round, design)}

    async with started(ctx, name, everything) as target:
        await run(target, warmup, concurrency=concurrency)
        arms = [{k: (target, per_kind[k]) for k in kinds} for per_kind in rounds]
        per_round = await _alternate(arms, concurrency, summary, checkpoint, design)
    return summary(per_round)


async def _alternate(
    rounds: list[dict[str, tuple[Target, list[Item]]]],
    concurrency: int,
    summary: Callable[[list[dict[str, Any]]], dict[str, Any]],
    checkpoint: Callable[[dict[str, Any]], None] | None,
    design: str = "abba",
) -> list[dict[str, Any]]:
    """Runs each round's arms (label -> target and its texts) in turn; each run's summary by
    label, per round. ``alternate``: the arms in the order given, reversed every other round
    (A B, B A, ...). ``abba``: each arm's texts in two halves, run A B then B A within the
    round (A B B A, then B A A B): a drift of the machine's speed over the call, which
    favours whoever runs later, weighs on every arm alike within each round."""
    per_round: list[dict[str, Any]] = []
    for r, arms in enumerate(rounds):
        labels = list(arms)
        order = labels if r % 2 == 0 else labels[::-1]
        if design == "abba":
            results = await _abba_round(arms, order, concurrency)
        else:
            results = {}
            for a in order:
                phase(_arm_phase(arms[a][0].name, a))
                results[a] = await run(*arms[a], concurrency=concurrency)
                phase("")
        per_round.append({a: _brief(results[a]) for a in labels})
        if checkpoint is not None:
            checkpoint(summary(per_round))
        print(
            f"  round {r + 1}: " + "  ".join(f"{a} {results[a]['rps']:.2f} RPS" for a in labels),
            flush=True,
        )
    return per_round


async def _abba_round(
    arms: dict[str, tuple[Target, list[Item]]], order: list[str], concurrency: int
) -> dict[str, dict[str, Any]]:
    """One round as ``order`` on the first half of each arm's texts, then reversed on the
    second half; each arm's summary over both its halves (requests / the two runs' time)."""
    sequence = order + order[::-1]
    done: dict[str, tuple[list[Sample], float]] = {a: ([], 0.0) for a in order}
    halves: dict[str, list[float]] = {a: [] for a in order}  # each half's RPS, in run order
    for i, a in enumerate(sequence):
        target, items = arms[a]
        half = items[: len(items) // 2] if i < len(order) else items[len(items) // 2 :]
        phase(_arm_phase(target.name, a))
        samples, wall = await closed_loop(target, half, concurrency)
        phase("")
        done[a] = (done[a][0] + samples, done[a][1] + wall)
        halves[a].append(summarize(samples, wall)["rps"])
    return {a: summarize(*done[a]) | {"halves_rps": halves[a]} for a in order}


def _arm_phase(system: str, label: str) -> str:
    """What an arm's run tells a watcher: the system, and the workload when the arms are
    one system's workloads (``ray_serve html``), as ``measure`` does."""
    return system if label == system else f"{system} {label}"


def _h2h(
    names: list[str],
    concurrency: int,
    requests: int,
    per_round: list[dict[str, Any]],
    design: str = "abba",
) -> dict[str, Any]:
    return {
        "systems": names,
        "design": design,
        "concurrency": concurrency,
        "requests_per_run": requests,
        "rounds": per_round,
        "ratios": _ratios(per_round, names),
    }


def gpu_memory() -> list[int]:
    """MiB in use on each GPU now (empty without nvidia-smi)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [int(x) for x in out.split()]


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "rps",
        "p50_s",
        "p95_s",
        "p99_s",
        "ok",
        "requests",
        "errors_by_status",
        "output_tokens_per_s",
        "ttft_p50_s",
        "ttft_p95_s",
        "ttft_visible_p50_s",
        "ttft_visible_p95_s",
        "first_event_p50_s",
        "halves_rps",
    )
    return {k: result[k] for k in keys if k in result}


def _ratios(per_round: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    first, out = names[0], {}
    for other in names[1:]:
        rps = [r[first]["rps"] / r[other]["rps"] for r in per_round if r[other]["rps"]]
        p95 = [r[first]["p95_s"] / r[other]["p95_s"] for r in per_round if r[other]["p95_s"]]
        out[f"{first}/{other}"] = {
            "rps_ratio_median": round(statistics.median(rps), 3) if rps else None,
            "rps_ratio_min": round(min(rps), 3) if rps else None,
            "rps_ratio_max": round(max(rps), 3) if rps else None,
            "p95_ratio_median": round(statistics.median(p95), 3) if p95 else None,
            "p95_ratio_min": round(min(p95), 3) if p95 else None,
            "p95_ratio_max": round(max(p95), 3) if p95 else None,
        }
        for key in ("ttft_p50_s", "ttft_p95_s", "ttft_visible_p50_s", "ttft_visible_p95_s"):
            # Only where both sides timed it: the raw engine times its first token even for
            # whole answers, a server only when it streams.
            ttft = [
                r[first][key] / r[other][key]
                for r in per_round
                if r[first].get(key) is not None and r[other].get(key)
            ]
            if ttft:
                ratio = round(statistics.median(ttft), 3)
                out[f"{first}/{other}"][f"{key[:-2]}_ratio_median"] = ratio
    return out


def journey_ratios(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """This project's RPS over each other system's, per workload (from the sequential runs)."""
    out: dict[str, dict[str, float]] = {}
    for workload in sorted({r["workload"] for r in runs}):
        by = {r["system"]: r["rps"] for r in runs if r["workload"] == workload}
        if by.get(OURS):
            out[workload] = {
                f"{OURS}/{s}": round(by[OURS] / v, 3) for s, v in by.items() if s != OURS and v
            }
    return out


def write(out: Path, results: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "journey.json").write_text(json.dumps(results, indent=2))
    runs = results["runs"]
    lines = [
        f"# Journey on {results['machine']} ({results['date']})",
        "",
        f"Closed loop, {results['concurrency']} concurrent users; engine: "
        f"`{json.dumps(results['settings']['engine'])}`",
        "",
    ]
    if runs:
        lines += [markdown_table([{**r, "system": r["label"]} for r in runs], COLUMNS), ""]
        lines += ["## This project's RPS over each system's (sequential runs)", ""]
        for workload, ratios in results["ratios"].items():
            lines += [f"- {workload}: " + ", ".join(f"{k} = {v}" for k, v in ratios.items())]
        plot_journey(runs, out / "journey.png", f"Journey on {results['machine']}")
    for name, error in (results.get("failed") or {}).items():
        lines += ["", f"**{name} failed**: `{error.splitlines()[0][:300]}`"]
    if h2h := results.get("head_to_head"):
        title = f"Head to head on {results['machine']} ({h2h['concurrency']} users)"
        heading = f"Head to head, {_design(h2h)}, {len(h2h['rounds'])} rounds of "
        heading += f"{h2h['requests_per_run']} variable-length requests"
        lines += _alternated(h2h, heading, out / "head_to_head.png", title)
    if w2w := results.get("workload_head_to_head"):
        title = f"{w2w['system']}: workloads alternated on {results['machine']}"
        heading = f"{w2w['system']}: workloads {_design(w2w)}, {len(w2w['rounds'])} rounds of "
        heading += f"{w2w['requests_per_run']} requests each"
        lines += _alternated(w2w, heading, out / "workload_head_to_head.png", title)
    (out / "journey.md").write_text("\n".join(lines) + "\n")


def _design(h2h: dict[str, Any]) -> str:
    if h2h.get("design", "alternate") == "abba":
        return "A B B A / B A A B on each round's two halves"
    return "alternated"


def _alternated(h2h: dict[str, Any], heading: str, png: Path, title: str) -> list[str]:
    """The markdown section (and the plot) of alternated runs: each pair's median ratios."""
    plot_head_to_head(h2h, png, title)
    lines = ["", f"## {heading}", ""]
    for pair, ratio in h2h["ratios"].items():
        lines += [
            f"- {pair}: RPS ratio median {ratio['rps_ratio_median']} "
            f"(min {ratio['rps_ratio_min']}, max {ratio['rps_ratio_max']}); "
            f"p95 ratio median {ratio['p95_ratio_median']}"
        ]
        ttft = [k for k in ratio if k.startswith("ttft")]
        if ttft:  # streamed: time to the first text, and to the first visible text
            named = (f"{k.removesuffix('_ratio_median')} {ratio[k]}" for k in ttft)
            lines[-1] += "; " + ", ".join(named)
    return lines


def previous(out: Path) -> dict[str, Any]:
    """What an earlier invocation measured into ``out`` (``--append``): its runs and any
    head-to-head, so a journey too long for one command can be run in parts."""
    path = out / "journey.json"
    if not path.exists():
        return {}
    earlier = json.loads(path.read_text())
    return {k: earlier[k] for k in ("runs", "head_to_head", "failed") if k in earlier}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.journey", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="model folder (config.json + tokenizer)")
    p.add_argument("--serve-config", type=Path, default=ROOT / "serve_config.yaml")
    p.add_argument("--load-format", help="e.g. dummy: random weights of the model's shape")
    p.add_argument("--engine", default="{}", help="JSON: more engine settings for every system")
    p.add_argument(
        "--engine-for",
        action="append",
        default=[],
        metavar="LABEL=JSON",
        help="more engine settings for one system label only (an A/B of a setting)",
    )
    p.add_argument("--systems", default=",".join(ALL_SYSTEMS))
    p.add_argument("--workloads", default="uniform,variable")
    p.add_argument("--requests", type=int, default=1000)
    p.add_argument("--slow-requests", type=int, default=200)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--concurrency", type=int, default=25)
    p.add_argument("--head-to-head", default="", help="A,B[,C]: alternate these, A first")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--design",
        choices=DESIGNS,
        default="abba",
        help="abba: A B B A / B A A B on each round's two halves (cancels a drift over the "
        "call); alternate: A B / B A whole rounds (the design before 2026-11-24)",
    )
    p.add_argument(
        "--workload-rounds",
        type=int,
        default=0,
        help="N: the first of --systems alone, its --workloads alternated for N rounds",
    )
    p.add_argument("--stream", action="store_true", help="head-to-head streams: TTFT p50/p95")
    p.add_argument("--replicas", type=int, default=1, help="replicas of ray_serve")
    p.add_argument("--ray-serve-llm-pythonpath", help="a Ray whose serve.llm fits this vLLM")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--append", action="store_true", help="keep the runs already in --out")
    p.add_argument("--out", required=True, type=Path)
    return p


def context(ns: argparse.Namespace) -> BenchContext:
    engine = json.loads(ns.engine)
    if ns.load_format:
        engine["load_format"] = ns.load_format
    ns.out.mkdir(parents=True, exist_ok=True)
    workdir = ns.out / "logs"
    workdir.mkdir(exist_ok=True)
    config = bench_app_config(ns.serve_config, ns.model, engine)
    device = "gpu" if "num_gpus: 1" in ns.serve_config.read_text() else "cpu"
    return BenchContext(
        config,
        ns.serve_config.resolve(),
        workdir.resolve(),
        device=device,
        replicas=ns.replicas,
        ray_serve_llm_pythonpath=ns.ray_serve_llm_pythonpath,
        stream=ns.stream,
        # bench.scaling and bench.ramp share this context; their parsers take no --engine-for.
        engine_for=engine_for(getattr(ns, "engine_for", [])),
    )


def engine_for(pairs: list[str]) -> dict[str, dict[str, Any]]:
    """``--engine-for LABEL=JSON`` options as label -> engine settings."""
    parsed: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        label, sep, settings = pair.partition("=")
        if not sep or not label:
            raise SystemExit(f"--engine-for {pair!r}: expected LABEL=JSON")
        parsed[label] = json.loads(settings)
    return parsed


async def main_async(ns: argparse.Namespace) -> dict[str, Any]:
    ctx = context(ns)
    count = tokenizer_counter(ns.model)
    n_fast, n_slow = ns.requests, ns.slow_requests
    workloads = {
        w: make_workload(w, n_fast, seed=ns.seed, count_tokens=count)
        for w in ns.workloads.split(",")
        if w
    }
    results: dict[str, Any] = {
        "machine": machine(),
        "date": dt.date.today().isoformat(),
        "concurrency": ns.concurrency,
        "settings": describe(ctx),
        "runs": [],
        **(previous(ns.out) if ns.append else {}),
    }
    results["ratios"] = journey_ratios(results["runs"])
    warmup = make_workload("variable", ns.warmup, seed=ns.seed + 1000, count_tokens=count)
    for name in [s for s in ns.systems.split(",") if s and not ns.workload_rounds]:
        chosen = (
            {w: items[:n_slow] for w, items in workloads.items()} if name in SLOW else workloads
        )
        try:
            results["runs"] += await measure(ctx, name, chosen, ns.concurrency, warmup)
        except Exception as exc:  # one system failing must not lose the others' results
            print(f"  {name} FAILED: {exc}", flush=True)
            results.setdefault("failed", {})[name] = f"{type(exc).__name__}: {exc}"[-3000:]
        results["ratios"] = journey_ratios(results["runs"])
        write(ns.out, results)  # after each system: a run cut short keeps what it measured
    if ns.workload_rounds:
        kinds = list(workloads)
        per_round = [
            {
                k: make_workload(k, n_fast, seed=ns.seed + 100 * (r + 1) + i, count_tokens=count)
                for i, k in enumerate(kinds)
            }
            for r in range(ns.workload_rounds)
        ]
        system = ns.systems.split(",")[0]
        results["workload_head_to_head"] = await workload_head_to_head(
            ctx,
            system,
            per_round,
            ns.concurrency,
            warmup,
            lambda h2h: write(ns.out, {**results, "workload_head_to_head": h2h}),
            ns.design,
        )
        return results
    if ns.head_to_head:
        rounds = [
            make_workload("variable", n_fast, seed=ns.seed + 1 + r, count_tokens=count)
            for r in range(ns.rounds)
        ]
        names = ns.head_to_head.split(",")
        results["head_to_head"] = await head_to_head(
            ctx,
            names,
            rounds,
            ns.concurrency,
            warmup,
            lambda h2h: write(ns.out, {**results, "head_to_head": h2h}),
            ns.design,
        )
    return results


def main() -> None:
    ns = _parser().parse_args()
    # SIGTERM (a time limit) unwinds like Ctrl-C, so every started server is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = asyncio.run(main_async(ns))
    write(ns.out, results)
    print((ns.out / "journey.md").read_text())


if __name__ == "__main__":
    main()
