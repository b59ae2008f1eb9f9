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


def _plot_grouped_bars(
    path: Path,
    title: str,
    groups: Sequence[str],
    series: dict[str, Sequence[dict[str, Any] | None]],
    *,
    figsize: tuple[float, float],
    tick_style: dict[str, Any],
) -> None:
    """RPS and p95 latency side by side: one bar group per ``groups`` entry, one bar per
    series in each (``series`` maps a legend label to its results, aligned with ``groups``)."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=figsize)
    width = 0.8 / max(1, len(series))
    for s_i, (label, results) in enumerate(series.items()):
        xs = [g_i + s_i * width for g_i in range(len(groups))]
        for ax, key in zip(axes, ("rps", "p95_s"), strict=True):
            ax.bar(xs, [(r or {}).get(key) or 0 for r in results], width, label=label)
    for ax, label in zip(axes, ("requests per second", "p95 latency (s)"), strict=True):
        ax.set_xticks([g_i + width * (len(series) - 1) / 2 for g_i in range(len(groups))])
        ax.set_xticklabels(groups, **tick_style)
        ax.set_ylabel(label)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_journey(runs: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """RPS and p95 latency of every system, one bar group per system, a bar per workload."""
    systems = list(dict.fromkeys(r["system"] for r in runs))
    series: dict[str, Sequence[dict[str, Any] | None]] = {}
    for workload in sorted({r["workload"] for r in runs}):
        by_system = {r["system"]: r for r in runs if r["workload"] == workload}
        series[workload] = [by_system.get(s) for s in systems]
    tick_style = {"rotation": 30, "ha": "right", "fontsize": 8}
    _plot_grouped_bars(path, title, systems, series, figsize=(12, 4.5), tick_style=tick_style)


def plot_head_to_head(h2h: dict[str, Any], path: Path, title: str) -> None:
    """RPS and p95 latency of each system in each alternated round, side by side."""
    rounds = h2h["rounds"]
    groups = [f"round {r_i + 1}" for r_i in range(len(rounds))]
    series: dict[str, Sequence[dict[str, Any] | None]] = {
        system: [r[system] for r in rounds] for system in h2h["systems"]
    }
    _plot_grouped_bars(path, title, groups, series, figsize=(11, 4), tick_style={})


def plot_ratios(result: dict[str, Any], metrics: Sequence[str], path: Path, title: str) -> None:
    """Each round's ratio per metric, a column per call, the median marked; 1.0 is parity.

    ``result`` is ``bench.h2h_ratios``' (``runs`` of ``rounds`` and ``medians``).
    """
    plt = _pyplot()
    runs = result["runs"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        for x, run in enumerate(runs.values()):
            values = [r[metric] for r in run["rounds"] if r.get(metric) is not None]
            ax.scatter([x] * len(values), values, color="tab:blue", alpha=0.7, s=22)
            median = run["medians"].get(metric)
            if median:
                ax.scatter([x], [median["median"]], marker="_", s=500, color="tab:red")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xticks(range(len(runs)), list(runs), fontsize=8, rotation=20)
        ax.set_xlim(-0.6, len(runs) - 0.4)
        ax.set_title(metric, fontsize=10)
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


def plot_cpu_profile(results: dict[str, Any], path: Path, title: str) -> None:
    """CPU microseconds per request of each serving process (``bench.cpu_profile``)."""
    plt = _pyplot()
    labels, values = [], []
    for system, result in results.items():
        for role, us in (result.get("cpu_us_per_request") or {}).items():
            labels.append(f"{system}\n{role}")
            values.append(us / 1000)
    fig, ax = plt.subplots(figsize=(9, 4))
    bars = ax.bar(range(len(values)), values, color="tab:blue")
    ax.bar_label(bars, fmt="%.1f")
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_ylabel("CPU ms per request")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
