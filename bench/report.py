"""Benchmark reports: JSON (everything), a markdown table and a PNG plot (matplotlib)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

COLUMNS = [
    ("system", "system"),
    ("workload", "workload"),
    ("ok", "ok"),
    ("requests", "sent"),
    ("rps", "RPS"),
    ("p50_s", "p50 s"),
    ("p95_s", "p95 s"),
    ("p99_s", "p99 s"),
    ("output_tokens_per_s", "out tok/s"),
    ("errors_by_status", "errors"),
]


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or "0"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def markdown_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str]] = COLUMNS
) -> str:
    header = "| " + " | ".join(title for _, title in columns) + " |"
    rule = "|" + "---|" * len(columns)
    body = ["| " + " | ".join(_cell(row.get(key)) for key, _ in columns) + " |" for row in rows]
    return "\n".join([header, rule, *body]) + "\n"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def plot_run(result: dict[str, Any], path: Path) -> None:
    """Per-second completions and requests in flight over one run."""
    plt = _pyplot()
    rows = result.get("timeline") or []
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot([r["t"] for r in rows], [r["ok"] for r in rows], label="completed / s")
    ax.plot([r["t"] for r in rows], [r["errors"] for r in rows], label="errors / s")
    ax.plot([r["t"] for r in rows], [r["in_flight"] for r in rows], label="in flight", ls="--")
    ax.set_xlabel("seconds")
    ax.set_title(f"{result.get('system')}: {result.get('rps')} RPS, p95 {result.get('p95_s')} s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_run(out: Path, result: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=2))
    (out / "results.md").write_text(markdown_table([result]))
    plot_run(result, out / "results.png")


def plot_journey(runs: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """RPS and p95 latency of every system, one bar group per workload."""
    plt = _pyplot()
    workloads = sorted({r["workload"] for r in runs})
    systems = list(dict.fromkeys(r["system"] for r in runs))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / max(1, len(workloads))
    for w_i, workload in enumerate(workloads):
        by_system = {r["system"]: r for r in runs if r["workload"] == workload}
        xs = [i + w_i * width for i in range(len(systems))]
        for ax, key in zip(axes, ("rps", "p95_s"), strict=True):
            ax.bar(
                xs, [(by_system.get(s) or {}).get(key) or 0 for s in systems], width, label=workload
            )
    for ax, label in zip(axes, ("requests per second", "p95 latency (s)"), strict=True):
        ax.set_xticks([i + width * (len(workloads) - 1) / 2 for i in range(len(systems))])
        ax.set_xticklabels(systems, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_head_to_head(h2h: dict[str, Any], path: Path, title: str) -> None:
    """RPS and p95 latency of each system in each alternated round, side by side."""
    plt = _pyplot()
    rounds, systems = h2h["rounds"], h2h["systems"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(systems)
    for s_i, system in enumerate(systems):
        xs = [r_i + s_i * width for r_i in range(len(rounds))]
        for ax, key in zip(axes, ("rps", "p95_s"), strict=True):
            ax.bar(xs, [r[system][key] or 0 for r in rounds], width, label=system)
    for ax, label in zip(axes, ("requests per second", "p95 latency (s)"), strict=True):
        ax.set_xticks([r_i + width * (len(systems) - 1) / 2 for r_i in range(len(rounds))])
        ax.set_xticklabels([f"round {r_i + 1}" for r_i in range(len(rounds))])
        ax.set_ylabel(label)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweep(points: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """RPS and p95 latency against max_num_seqs (log2 axis)."""
    plt = _pyplot()
    xs = [p["max_num_seqs"] for p in points]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(xs, [p["rps"] for p in points], marker="o", label="RPS")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("max_num_seqs")
    ax.set_ylabel("requests per second")
    right = ax.twinx()
    right.plot(xs, [p["p95_s"] for p in points], marker="s", color="tab:red", label="p95 s")
    right.set_ylabel("p95 latency (s)")
    fig.legend(loc="center left", bbox_to_anchor=(0.1, 0.5))
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
