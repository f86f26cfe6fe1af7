"""Figures of `eor erag` (correlation against the number of documents, like the eRAG paper's figure 1) and
`eor utility` (mean utility and Pearson's r against k), drawn with matplotlib's Agg backend from the JSON
the commands save."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from eor.core.plotting import pyplot
from eor.evaluation.writing.erag_sections import LABELLINGS

COLOURS = {"erag": "#1f77b4", "containment": "#ff7f0e", "provenance": "#2ca02c"}
SETTING_COLOURS = {"ordered": "#1f77b4", "reversed": "#d62728", "oracle": "#2ca02c"}
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def _value(value: Any) -> float:
    return math.nan if value is None else float(value)


def _best_metric(per_metric: dict[str, dict[str, Any]], cutoff: str) -> str | None:
    scored = [
        (base, values[cutoff]["kendall_tau"])
        for base, values in per_metric.items()
        if values.get(cutoff, {}).get("kendall_tau") is not None
    ]
    return max(scored, key=lambda item: item[1])[0] if scored else None


def _finish(ax: Any, xs: list[int], labels: list[str], xlabel: str) -> None:
    ax.set_xticks(xs, labels)
    ax.set_xlabel(xlabel)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    finite = [y for line in ax.get_lines() for y in line.get_ydata() if not math.isnan(y)]
    if not finite:
        ax.text(
            0.5, 0.5, "undefined\n(constant scores)", transform=ax.transAxes, ha="center", va="center", color="grey"
        )


def plot_erag(data: dict[str, Any], path: Path) -> Path:
    """Kendall's τ with the end-to-end score against the cutoff: a first panel with each labelling's best
    metric at the full k (as the paper's figure 1), then one panel per labelling with all its metrics."""
    plt = pyplot()
    table = data["by_cutoff"]
    cutoffs = [str(c) for c in table["cutoffs"]]
    xs = list(range(len(cutoffs)))
    labellings = table["correlation"]
    panels = 1 + len(labellings)
    columns = 2 if panels > 2 else panels
    rows = math.ceil(panels / columns)
    fig, grid = plt.subplots(rows, columns, figsize=(6.2 * columns, 4.4 * rows), sharey=True, squeeze=False)
    axes = list(grid.flat)
    for extra in axes[panels:]:
        extra.set_visible(False)
    full = cutoffs[-1]

    ax = axes[0]
    for name, per_metric in labellings.items():
        base = _best_metric(per_metric, full)
        if base is None:
            continue
        ys = [_value(per_metric[base].get(c, {}).get("kendall_tau")) for c in cutoffs]
        label = f"{LABELLINGS.get(name, name)} ({base})"
        ax.plot(xs, ys, marker="o", linewidth=2.4, markersize=7, color=COLOURS.get(name), label=label)
    ax.set_title(f"best metric per labelling (chosen at @{full})")

    for ax, (name, per_metric) in zip(axes[1:panels], labellings.items(), strict=True):
        for index, (base, values) in enumerate(per_metric.items()):
            ys = [_value(values.get(c, {}).get("kendall_tau")) for c in cutoffs]
            ax.plot(xs, ys, marker=MARKERS[index % len(MARKERS)], linewidth=1.5, label=base, alpha=0.85)
        ax.set_title(f"{LABELLINGS.get(name, name)} labels, every metric")

    values = [y for ax in axes[:panels] for line in ax.get_lines() for y in line.get_ydata() if not math.isnan(y)]
    for index, ax in enumerate(axes[:panels]):
        _finish(ax, xs, [f"@{c}" for c in cutoffs], "documents given to the reader (cutoff c)")
        if index % columns == 0:
            ax.set_ylabel("Kendall τ: metric@c vs end-to-end@c")
    axes[0].set_ylim(min([-0.1, *values]) - 0.05, 1.05)
    s = data["settings"]
    fig.suptitle(
        f"Correlation with end-to-end quality: {s['member']}, {s['questions']} questions, reader {s['reader']}, "
        f"metric {s['downstream_metric']}",
        fontsize=12,
    )
    return _save(plt, fig, path, dpi=110)


def plot_utility(data: dict[str, Any], path: Path) -> Path:
    """Two panels against k: mean utility U per setting, and Pearson's r between nDCG@k and U."""
    plt = pyplot()
    ks = [str(k) for k in data["settings"]["ks"]]
    xs = list(range(len(ks)))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2))
    for setting, rows in data["mean"].items():
        ys = [_value(rows.get(k, {}).get("utility")) for k in ks]
        axes[0].plot(xs, ys, marker="o", color=SETTING_COLOURS.get(setting), label=setting)
    axes[0].set_title("mean utility U")
    axes[0].set_ylabel("U = (P(context) − P(0-shot)) / P(0-shot)")
    for setting, per_k in data.get("correlation", {}).items():
        ys = [_value(per_k.get(k, {}).get("pearson_r")) for k in ks]
        axes[1].plot(xs, ys, marker="o", color=SETTING_COLOURS.get(setting), label=setting)
    axes[1].set_title("Pearson r(nDCG@k, U)")
    axes[1].set_ylim(-1.05, 1.05)
    for ax in axes:
        _finish(ax, xs, [f"k={k}" for k in ks], "documents in the context (k)")
    s = data["settings"]
    fig.suptitle(
        f"Context utility: {s['member']}, {s['questions']} questions, reader {s['reader']}, "
        f"P = {s['similarity']} vs gold {s['references']}",
        fontsize=11,
    )
    return _save(plt, fig, path, dpi=120)


def _save(plt: Any, fig: Any, path: Path, dpi: int) -> Path:
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
