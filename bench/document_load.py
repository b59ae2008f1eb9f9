"""Live traffic with and without a large document being translated (issue 16).

Documents share the translator replicas with live requests: a replica's worker claims
segments only while it holds few live requests, and the engine serves document segments at a
lower vLLM priority (``engine.scheduling_policy: priority``). This measures what that costs
live traffic and what the documents get: N closed-loop users (the ``variable`` workload) in
alternating rounds WITHOUT and WITH a document translating (A B / B A ...), each round on
fresh texts; per round RPS, p50/p95; the median with/without p95 ratio and its range (the
goal: at most 1.10); and the document's translated tokens per second.

Document tokens: with the bench config every text's output is forced to its source's length
(``output_tokens_ratio`` 1, margin 0, EOS ignored), so the tokens a document generates are
its paragraphs' source tokens (counted with the model's tokenizer). During a window they are
``characters_done`` progress (from the job's status) times the document's tokens per
character; for a finished job, its tokens over its time from upload to done.

    python -m bench.document_load --url http://127.0.0.1:8000 --tokenizer MODEL_DIR \
        --users 25 --rounds 3 --requests 1000 --doc-paragraphs 200 --out DIR
    python -m bench.document_load --model MODEL_DIR --load-format dummy \
        --serve-config serve_config.yaml --scheduling fcfs --out DIR   # starts the service
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import signal
import statistics
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from bench.document_feed import (
    Document,
    DocumentKeeper,
    document_window,
    finished_jobs,
    make_document,
    translate_alone,
)
from bench.journey import machine
from bench.loadgen import run
from bench.report import markdown_table, plot_head_to_head
from bench.systems import ROOT, BenchContext, bench_app_config, describe, started
from bench.targets import NativeTarget
from bench.workloads import Item, make_workload, tokenizer_counter
from bench.workloads import word_count_estimate as estimate
from serve_app.core.config import AppConfig
from serve_app.tools.launcher import merge_config

Phase = Literal["without", "with"]
BRIEF = ("rps", "p50_s", "p95_s", "p99_s", "ok", "requests", "errors_by_status", "wall_s")


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    return {k: result.get(k) for k in BRIEF}


async def with_document(
    target: NativeTarget, items: list[Item], users: int, doc: Document, timing: dict[str, float]
) -> dict[str, Any]:
    """One live run while a document translates the whole time; then the document drained."""
    keeper = DocumentKeeper(target.client.http, doc)
    await keeper.started(timing["start_timeout_s"])
    before = keeper.characters_done()
    task = asyncio.create_task(keeper.keep())
    try:
        result = await run(target, items, concurrency=users)
    finally:
        keeper.stop()
        await task
    window = document_window(keeper, before, result["wall_s"])
    await keeper.drain(timing["drain_timeout_s"])
    return {**_brief(result), "document": window, "jobs": finished_jobs(keeper)}


async def rounds(
    target: NativeTarget, workloads: list[list[Item]], users: int, doc: Document,
    timing: dict[str, float], checkpoint: Callable[[list[dict[str, Any]]], None],
) -> list[dict[str, Any]]:  # fmt: skip
    """Alternated rounds: without then with, with then without, ... (``workloads``: two
    fresh lists of texts per round); ``checkpoint`` gets the rounds so far after each one (a
    run cut by a time limit keeps them)."""
    out = []
    for r in range(len(workloads) // 2):
        order: list[Phase] = ["without", "with"] if r % 2 == 0 else ["with", "without"]
        results: dict[str, Any] = {}
        for i, phase in enumerate(order):
            items = workloads[2 * r + i]
            if phase == "with":
                results[phase] = await with_document(target, items, users, doc, timing)
            else:
                results[phase] = _brief(await run(target, items, concurrency=users))
        out.append({"order": order, **results})
        checkpoint(out)
        print(f"  round {r + 1}: " + "  ".join(_line(p, results[p]) for p in order), flush=True)
    return out


def _line(phase: str, r: dict[str, Any]) -> str:
    extra = f", doc {r['document']['tokens_per_s']} tok/s" if "document" in r else ""
    return f"{phase} {r['rps']:.2f} RPS p95 {r['p95_s']}s ({r['ok']}/{r['requests']}{extra})"


def _spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "min": None, "max": None}
    return {k: round(f(values), 3) for k, f in (("median", statistics.median), ("min", min),
                                                 ("max", max))}  # fmt: skip


def _spread_text(spread: dict[str, float | None]) -> str:
    return f"median {spread['median']} ({spread['min']}-{spread['max']})"


def summarize(per_round: list[dict[str, Any]], replicas: int) -> dict[str, Any]:
    """The with/without ratios (median and range) and the documents' tokens per second."""
    p95 = [r["with"]["p95_s"] / r["without"]["p95_s"] for r in per_round if r["without"]["p95_s"]]
    rps = [r["with"]["rps"] / r["without"]["rps"] for r in per_round if r["without"]["rps"]]
    windows = [r["with"]["document"]["tokens_per_s"] for r in per_round]
    whole = [j["tokens_per_s"] for r in per_round for j in r["with"]["jobs"] if j["tokens_per_s"]]
    return {
        "p95_ratio_with_over_without": _spread(p95),
        "rps_ratio_with_over_without": _spread(rps),
        "goal_p95_ratio_at_most": 1.10,
        "document_tokens_per_s_during_live": _spread(windows),
        "document_tokens_per_s_per_replica_during_live": _spread([w / replicas for w in windows]),
        "document_tokens_per_s_upload_to_done": _spread(whole),
        "live_requests_lost": sum(
            r[p]["requests"] - r[p]["ok"] for r in per_round for p in ("with", "without")
        ),
    }


COLUMNS = [("round", "round"), ("phase", "phase"), ("ok", "ok"), ("requests", "sent"),
           ("rps", "RPS"), ("p50_s", "p50 s"), ("p95_s", "p95 s"),
           ("doc_tokens_per_s", "doc tok/s"), ("errors_by_status", "errors")]  # fmt: skip


def write(out: Path, results: dict[str, Any]) -> None:
    """document_load.json (everything), .md (a row per run, the ratios) and .png."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "document_load.json").write_text(json.dumps(results, indent=2))
    rows = [
        {**r[p], "round": i + 1, "phase": p,
         "doc_tokens_per_s": r[p].get("document", {}).get("tokens_per_s")}
        for i, r in enumerate(results["rounds"]) for p in r["order"]
    ]  # fmt: skip
    s = results["summary"]
    p95 = s["p95_ratio_with_over_without"]
    text = (
        f"# Live traffic with and without a document ({results['machine']}, {results['date']})"
        f"\n\n{results['users']} users, scheduling_policy "
        f"{results['settings'].get('scheduling_policy')}\n\n{markdown_table(rows, COLUMNS)}\n"
        f"p95 with/without: {_spread_text(p95)}, goal <= "
        f"{s['goal_p95_ratio_at_most']}; document tokens/s during live traffic (per replica): "
        f"{_spread_text(s['document_tokens_per_s_per_replica_during_live'])}; lost live requests: "
        f"{s['live_requests_lost']}; document alone (no live traffic), tokens/s per replica: "
        f"{results.get('document_alone', {}).get('tokens_per_s_per_replica')}\n"
    )
    (out / "document_load.md").write_text(text)
    h2h = {"systems": ["without", "with"], "rounds": results["rounds"]}
    title = f"{results['users']} users, {results['settings'].get('scheduling_policy')}"
    plot_head_to_head(h2h, out / "document_load.png", f"live traffic without / with a document: "
                      f"{title}")  # fmt: skip


@asynccontextmanager
async def service(ns: argparse.Namespace) -> AsyncIterator[tuple[NativeTarget, dict[str, Any]]]:
    """The service at ``--url``, or this project started from ``--model`` (and stopped)."""
    if ns.url:
        target = NativeTarget("ray_serve", ns.url)
        try:
            settings = {"url": ns.url, "scheduling_policy": ns.scheduling}
            yield target, {**settings, "replicas": ns.replicas}
        finally:
            await target.aclose()
        return
    ctx = context(ns)
    async with started(ctx, "ray_serve", []) as started_target:
        assert isinstance(started_target, NativeTarget)
        settings = {**describe(ctx), "documents": ctx.config.documents.model_dump(mode="json")}
        yield started_target, {**settings, "scheduling_policy": ctx.config.engine.scheduling_policy}


def app_config(ns: argparse.Namespace, store: Path) -> AppConfig:
    """The bench config (forced output lengths), its store in ``store``, the chosen engine
    scheduling and document settings."""
    engine = {**json.loads(ns.engine), "scheduling_policy": ns.scheduling or "priority"}
    if ns.load_format:
        engine["load_format"] = ns.load_format
    base = bench_app_config(ns.serve_config, ns.model, engine).model_dump(mode="json")
    overrides = {"store": {"url": f"sqlite:///{store}"}, "documents": json.loads(ns.documents)}
    return AppConfig.model_validate(merge_config(base, overrides))


def context(ns: argparse.Namespace) -> BenchContext:
    workdir = (ns.out / "logs").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    config = app_config(ns, workdir / "store.db")
    device = "gpu" if "num_gpus: 1" in ns.serve_config.read_text() else "cpu"
    return BenchContext(
        config, ns.serve_config.resolve(), workdir, device=device, replicas=ns.replicas
    )


async def main_async(ns: argparse.Namespace) -> dict[str, Any]:
    tokenizer = ns.tokenizer or ns.model
    count = tokenizer_counter(tokenizer) if tokenizer else estimate
    doc = make_document(ns.doc_paragraphs, ns.doc_paragraph_tokens, count, ns.seed)
    workloads = [
        make_workload("variable", ns.requests, seed=ns.seed + 1 + i, count_tokens=count)
        for i in range(2 * ns.rounds)
    ]
    warmup = make_workload("variable", ns.warmup, seed=ns.seed + 1000, count_tokens=count)
    timing = {"start_timeout_s": ns.doc_start_timeout, "drain_timeout_s": ns.drain_timeout}
    async with service(ns) as (target, settings):
        head = {
            "machine": machine(), "date": dt.date.today().isoformat(), "users": ns.users,
            "settings": settings, "workload": "variable", "requests_per_run": ns.requests,
            "document": {"format": "txt", "paragraphs": len(doc.paragraphs),
                         "tokens": doc.tokens, "characters": doc.characters,
                         "tokenizer": tokenizer or "estimate"},
        }  # fmt: skip

        def report(per_round: list[dict[str, Any]]) -> dict[str, Any]:
            summary = summarize(per_round, settings["replicas"])
            return {**head, "rounds": per_round, "summary": summary}

        await run(target, warmup, concurrency=ns.users)
        alone = await translate_alone(target.client.http, doc, ns.drain_timeout, ns.replicas)
        head["document_alone"] = alone
        print(f"  document alone: {alone}", flush=True)
        per_round = await rounds(
            target, workloads, ns.users, doc, timing, lambda pr: write(ns.out, report(pr))
        )
    return report(per_round)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.document_load", description=__doc__)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="a running service (native API)")
    where.add_argument("--model", help="start this project with this model folder")
    p.add_argument("--tokenizer", help="with --url: tokenizer folder (default: estimate)")
    p.add_argument("--serve-config", type=Path, default=ROOT / "serve_config.yaml")
    p.add_argument("--load-format", help="e.g. dummy: random weights of the model's shape")
    p.add_argument("--engine", default="{}", help="JSON: more engine settings")
    p.add_argument("--documents", default="{}", help="JSON: documents settings (app config)")
    p.add_argument("--scheduling", choices=["priority", "fcfs"], help="engine scheduling_policy")
    p.add_argument("--replicas", type=int, default=1, help="translator replicas (per-replica "
                   "document tokens/s; with --model: how many to start)")  # fmt: skip
    p.add_argument("--users", type=int, default=25)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--requests", type=int, default=1000, help="live requests per run")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--doc-paragraphs", type=int, default=200)
    p.add_argument("--doc-paragraph-tokens", type=int, default=100)
    p.add_argument("--doc-start-timeout", type=float, default=120)
    p.add_argument("--drain-timeout", type=float, default=600)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True)
    return p


def main(argv: list[str] | None = None) -> None:
    ns = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a time limit stops the service
    results = asyncio.run(main_async(ns))
    write(ns.out, results)
    print((ns.out / "document_load.md").read_text())


if __name__ == "__main__":
    main()
