"""PNG figures of a benchmark report (matplotlib, Agg backend), drawn from the report dict alone.

- `rwr.png`: the RWR heatmap (EoR paper, figure 1), annotated cells;
- `errors_rwr.png`: the four RWR_E heatmaps (figure 4);
- `upper_bound.png`: oracle accuracy by pool size as boxplots, best single member dashed (figure 5);
- `weights.png`: the learned retriever weights (figure 6), only when the report has weights;
- `error_rates.png`: per member (and EoR) stacked bars of the error partition of appendix B;
- `cost.png`: accuracy against mean cost per question (log x), with a cascade and (`--frontier`) the subset frontier.
- `selective.png`: the voter's P(right): reliability diagram and risk–coverage curve.
- `design.png`: a pool design's candidates, evaluated pools, frontier and path (with `eor bench --design`).

Heatmap rows and columns (eor.evaluation.writing.heatmaps draws them) are the members sorted by the report's metric,
best first (as in figure 4).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.formatting import fixed, significant
from eor.core.plotting import label_apart, plain_log_axis, pyplot
from eor.evaluation.writing.heatmaps import as_array, heatmap, heatmap_size
from eor.runs.costs import describe_rates

DPI = 120
ERROR_TITLES = {
    "retriever_error": "Retriever error $E_r$",
    "hallucination": "Hallucination $E_h$",
    "extraction_error": "Extraction error $E_e$ (both retrieved the gold)",
    "lucky_guess": "Lucky guess (both in the lucky-guess regime)",
}
DARK = {"#2e7d32"}  # segment colours that need white text
PARTITION_STYLE = {
    "correct": ("correct", "#2e7d32"),
    "lucky_guess": ("lucky guess", "#a5d6a7"),
    "extraction_error": ("extraction error", "#ffb74d"),
    "hallucination": ("hallucination (gold retrieved)", "#ba68c8"),
    "retriever_error": ("retriever error (wrong)", "#e57373"),
}
METRIC_LABELS = {"em": "EM", "f1": "F1", "contains": "containment", "semantic": "semantic equivalence", "bem": "BEM"}


def metric_label(metric: str) -> str:
    return METRIC_LABELS.get(metric, metric)


def _order(report: dict[str, Any]) -> list[int]:
    """Member indices sorted by the report's metric, best first (stable: ties keep record order)."""
    metric = report["metric"]
    values = [report["members"][name][metric] for name in report["names"]]
    return sorted(range(len(values)), key=lambda i: -(values[i] if values[i] is not None else -1.0))


def plot_rwr(report: dict[str, Any], path: Path) -> Path:
    """Figure 1: RWR(i, j), the share of column member j's failures that row member i answers correctly."""
    plt = pyplot()
    order = _order(report)
    names = [report["rwr"]["names"][i] for i in order]
    matrix = as_array(report["rwr"]["matrix"])[np.ix_(order, order)]
    side = heatmap_size(len(names))
    fig, ax = plt.subplots(figsize=(side + 1.2, side), layout="constrained")
    metric = metric_label(report["metric"])
    heatmap(
        ax,
        fig,
        matrix,
        names,
        f"Relative win ratio RWR(i, j) ({metric}, {report['questions']} questions)\n"
        "share of the column member's wrong answers that the row member gets right\n"
        f"members sorted by {metric}, best first; – undefined (the column member is never wrong)",
    )
    return _save(fig, path)


def plot_error_rwr(report: dict[str, Any], path: Path) -> Path:
    """Figure 4: the RWR_E heatmap of each error type (the share of r_j's errors that r_i avoids)."""
    plt = pyplot()
    errors = report["errors"]
    order = _order(report)
    names = [errors["names"][i] for i in order]
    side = heatmap_size(len(names))
    fig, axes = plt.subplots(2, 2, figsize=(2 * (side + 1.2), 2 * side + 0.8), layout="constrained")
    for k, (ax, kind) in enumerate(zip(axes.flat, errors["types"], strict=True)):
        matrix = as_array(errors["rwr"][kind])[np.ix_(order, order)]
        heatmap(ax, fig, matrix, names, ERROR_TITLES.get(kind, kind), xlabel=k >= 2, ylabel=k % 2 == 0)
    fig.suptitle(
        f"Error relative win ratio RWR_E(i, j): share of column member's errors the row member avoids\n"
        f"{errors['questions']} questions after dropping {errors['filtered']} with an answer over "
        f"{errors['max_answer_words']} words; – undefined (the column member never makes the error "
        "under the condition)",
        fontsize=12,
    )
    return _save(fig, path)


def plot_upper_bound(report: dict[str, Any], path: Path) -> Path:
    """Figure 5: oracle accuracy of member subsets per pool size, best single member dashed, EoR dotted."""
    plt = pyplot()
    bound = report["upper_bound"]
    sizes = [entry["size"] for entry in bound["by_size"]]
    data = [[100 * a for a in entry["accuracies"]] for entry in bound["by_size"]]
    fig, ax = plt.subplots(figsize=(max(6.5, 0.55 * len(sizes) + 3.5), 5))
    ax.boxplot(
        data,
        positions=sizes,
        widths=0.6,
        patch_artist=True,
        boxprops={"facecolor": "#bbdefb", "edgecolor": "#1565c0"},
        medianprops={"color": "#0d47a1"},
        flierprops={"markersize": 3, "markerfacecolor": "#1565c0", "markeredgecolor": "none"},
    )
    metric = metric_label(report["metric"])
    if bound.get("best_single_accuracy") is not None:
        best = 100 * bound["best_single_accuracy"]
        ax.axhline(
            best,
            linestyle="--",
            color="#c62828",
            linewidth=1.5,
            label=f"best single member: {bound['best_single']} ({fixed(best, 1)})",
        )
    if bound.get("eor") is not None:
        eor = 100 * bound["eor"]
        ax.axhline(eor, linestyle=":", color="#2e7d32", linewidth=2, label=f"EoR ({fixed(eor, 1)})")
    ax.set_xlabel("pool size (number of members)")
    ax.set_ylabel(f"oracle {metric} (%)")
    ax.set_xticks(sizes, [str(s) for s in sizes])
    sampled = [str(e["size"]) for e in bound["by_size"] if not e["exhaustive"]]
    note = f"; sizes {', '.join(sampled)} sampled ({bound['max_subsets']} subsets)" if sampled else ""
    ax.set_title(f"Upper bound of an ensemble by pool size ({report['questions']} questions{note})", fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)
    return _save(fig, path)


def plot_weights(report: dict[str, Any], path: Path) -> Path | None:
    """Figure 6: learned retriever weights ω^r as circles (size and colour grow with the weight)."""
    weights = report.get("weights")
    if not weights or "retriever_weights" not in weights:  # a learned selector has no member weights
        return None
    plt = pyplot()
    names = list(weights["retriever_weights"])
    values = np.array([weights["retriever_weights"][name] for name in names], dtype=float)
    n = len(names)
    fig, ax = plt.subplots(figsize=(max(6.5, 0.75 * n + 2.5), 3.6))
    active = values > weights["member_threshold"]
    scatter = _weight_circles(ax, values, active)
    ax.set_xticks(np.arange(n), names, rotation=35, ha="right", rotation_mode="anchor", fontsize=10)
    ax.set_yticks([])
    ax.set_xlim(-0.7, n - 0.3)
    ax.set_ylim(-0.95, 0.55)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    ax.set_title(_weights_title(weights), fontsize=10)
    if active.any():
        fig.colorbar(scatter, ax=ax, fraction=0.03, pad=0.02, label="$\\omega^r$")
    return _save(fig, path)


def _weight_circles(ax: Any, values: np.ndarray, active: np.ndarray) -> Any:
    """A circle per member, filled for the active and dashed for the dropped, its weight written below."""
    x = np.arange(len(values))
    top = max(float(values.max()), 1e-9)
    sizes = 60 + 1400 * (values / top)
    filled = {"c": values[active], "cmap": "Reds", "vmin": 0.0, "vmax": top, "edgecolors": "#7f0000"}
    scatter = ax.scatter(x[active], np.zeros(active.sum()), s=sizes[active], linewidths=0.8, zorder=3, **filled)
    dashed = {"facecolors": "none", "edgecolors": "#9e9e9e", "linestyle": "--"}
    ax.scatter(x[~active], np.zeros((~active).sum()), s=sizes[~active], linewidths=1.0, zorder=3, **dashed)
    for i, value in enumerate(values):
        label = fixed(value, 2) + ("" if active[i] else "\ndropped")
        color = "black" if active[i] else "#757575"
        ax.text(i, -0.5, label, ha="center", va="top", fontsize=9, color=color)
    return scatter


def _weights_title(weights: dict[str, Any]) -> str:
    metric_weights = ", ".join(f"{k} {fixed(v, 2)}" for k, v in weights["metric_weights"].items())
    if weights.get("grounding_weight") is not None:
        metric_weights += f"; grounding $\\omega^g$ {fixed(weights['grounding_weight'], 2)}"
    return (
        f"Learned retriever weights $\\omega^r$ (pooling {weights['pooling']}; members with "
        f"$\\omega^r \\leq$ {significant(weights['member_threshold'])} are dropped)\nmetric weights: {metric_weights}"
    )


def plot_error_rates(report: dict[str, Any], path: Path) -> Path:
    """Per member (and EoR) horizontal stacked bars: each question in exactly one error category."""
    plt = pyplot()
    errors = report["errors"]
    order = _order(report)
    names = [errors["names"][i] for i in order] + ["EoR"]
    rows = [errors["members"][name] for name in names[:-1]] + [errors["eor"]]
    total = errors["questions"]
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(names) + 2.2))
    y = np.arange(len(names))[::-1]
    left = np.zeros(len(names))
    for kind in errors["partition_types"]:
        label, color = PARTITION_STYLE.get(kind, (kind, None))
        shares = np.array([row["partition"][kind] / total if total else 0.0 for row in rows])
        ax.barh(y, 100 * shares, left=100 * left, color=color, label=label, edgecolor="white", height=0.7)
        for yi, share, start in zip(y, shares, left, strict=True):
            if share >= 0.06:
                ax.text(
                    100 * (start + share / 2),
                    yi,
                    fixed(100 * share, 0),
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if color in DARK else "black",
                )
        left += shares
    ax.set_yticks(y, names, fontsize=10)
    ax.get_yticklabels()[-1].set_fontweight("bold")
    ax.set_xlim(0, 100)
    ax.set_xlabel(f"share of the {total} questions kept (%)")
    ax.set_title(
        f"Answers by error type (appendix B; {metric_label(errors['metric'])}; {errors['filtered']} questions "
        f"with an answer over {errors['max_answer_words']} words dropped)",
        fontsize=10,
    )
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)
    return _save(fig, path)


def plot_cost(report: dict[str, Any], path: Path) -> Path | None:
    """Accuracy against mean cost per question (log x): members, Top R, EoR, the full pool's selector, the
    frontier of member subsets and a cascade's operating points; None without a `cost` section."""
    cost = report.get("cost")
    if not cost:
        return None
    plt = pyplot()
    metric = report["metric"]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    points = {name: (entry["seconds"], 100 * entry[metric]) for name, entry in cost["members"].items()}
    for seconds, accuracy in points.values():
        ax.scatter(seconds, accuracy, color="#90a4ae", zorder=3)
    label_apart(ax, points, fontsize=8)
    top = report["top_r"]
    ax.scatter(
        cost["members"][top["member"]]["seconds"],
        100 * top[metric],
        s=90,
        facecolors="none",
        edgecolors="#c62828",
        linewidths=1.5,
        zorder=4,
        label=f"Top R ({top['member']})",
    )
    _frontier(ax, cost)
    _cascade_points(ax, cost.get("cascade"))
    ax.scatter(
        cost["eor_seconds"],
        100 * report["eor"][metric],
        marker="D",
        s=70,
        color="#2e7d32",
        zorder=5,
        label=f"EoR ({report['eor'].get('kind', 'voter')})",
    )
    _cost_axes(ax, report, cost)
    return _save(fig, path)


def _frontier(ax: Any, cost: dict[str, Any]) -> None:
    """The frontier of member subsets and the full pool's selector, where the report computed them."""
    frontier = cost.get("frontier")
    if frontier is None:
        return
    ax.plot(
        [e["seconds"] for e in frontier],
        [100 * e["accuracy"] for e in frontier],
        "-",
        color="#1565c0",
        marker=".",
        label="frontier of member subsets (selector cross-validated within these records: descriptive)",
    )
    full = cost["full_selector"]
    ax.scatter(
        full["seconds"],
        100 * full["accuracy"],
        marker="*",
        s=160,
        color="#1565c0",
        zorder=4,
        label="selector, every member (cross-validated)",
    )


def _cost_axes(ax: Any, report: dict[str, Any], cost: dict[str, Any]) -> None:
    """cost.png's axes: x on a log scale where every member has a measured cost (records without times keep a
    linear one), labelled with the cost's unit; the title, the grid and the legend."""
    positive = min(entry["seconds"] for entry in cost["members"].values()) > 0
    if positive:  # records with no measured time (all zero) keep a linear axis
        plain_log_axis(ax)
    rates = cost.get("rates")
    unit = "seconds" if cost["unit"] == "seconds" or not rates else f"seconds from tokens at {describe_rates(rates)}"
    ax.set_xlabel(f"mean cost per question ({unit}{', log scale' if positive else ''})")
    ax.set_ylabel(f"{metric_label(report['metric'])} (%)")
    ax.set_title(f"Accuracy against cost ({report['questions']} questions)", fontsize=11)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="center right", fontsize=8)  # the lower right holds the members that seldom answer right


def _cascade_points(ax: Any, cascade: dict[str, Any] | None) -> None:
    """A cascade's operating points, one per tolerance, joined (none without a cascade)."""
    if not cascade:
        return
    points = cascade["points"]
    ax.plot(
        [p["seconds"] for p in points],
        [100 * p["accuracy"] for p in points],
        "-o",
        color="#2e7d32",
        label="cascade at max loss " + ", ".join(significant(p["max_loss"]) for p in points),
    )


def plot_design(report: dict[str, Any], path: Path) -> Path | None:
    """A pool design (`eor design`'s design.json, the report's `design`): exact match against reader seconds per
    question (log x) of every candidate alone, every pool the passes evaluated, their frontier and the path;
    None without a design."""
    design = report.get("design")
    if not design:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 6))
    _candidate_points(ax, design["candidates"])
    pools = design["evaluated"]
    ax.scatter(
        [p["cost"] for p in pools],
        [100 * p["accuracy"] for p in pools],
        s=8,
        color="#bbdefb",
        zorder=2,
        label="pools the passes evaluated (selector, cross-validated)",
    )
    frontier = design["frontier"]
    ax.plot(
        [p["cost"] for p in frontier],
        [100 * p["accuracy"] for p in frontier],
        "-",
        color="#1565c0",
        label="their frontier",
    )
    path_steps = [step for step in design["steps"] if step["action"] in ("add", "drop")]
    ax.plot(
        [s["cost"] for s in path_steps],
        [100 * s["accuracy"] for s in path_steps],
        "-o",
        color="#e65100",
        zorder=4,
        label="the design path",
    )
    for step in path_steps:
        sign = "+" if step["action"] == "add" else "−"
        ax.annotate(
            f"{sign}{step['member']}",
            (step["cost"], 100 * step["accuracy"]),
            fontsize=7,
            color="#e65100",
            xytext=(4, -9),
            textcoords="offset points",
        )
    ax.set_xscale("log")
    rates = (design.get("settings") or {}).get("rates")
    at = describe_rates(rates) if rates else "tokens"
    ax.set_xlabel(f"reader seconds per question ({at}, prefix reuse replayed; log scale)")
    ax.set_ylabel("exact match (%)")
    ax.set_title("Pool design: candidates alone and designed pools on the training questions", fontsize=11)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right", fontsize=8)
    return _save(fig, path)


def _candidate_points(ax: Any, candidates: list[dict[str, Any]]) -> None:
    """Every candidate alone, named beside its point unless the name would fall on an earlier one (within
    0.08 decade of seconds and 2 points of exact match)."""
    labelled: list[tuple[float, float]] = []
    for row in candidates:
        ax.scatter(row["seconds"], 100 * row["em"], color="#90a4ae", zorder=3)
        where = (math.log10(max(row["seconds"], 1e-9)), 100 * row["em"])
        if any(abs(where[0] - x) < 0.08 and abs(where[1] - y) < 2.0 for x, y in labelled):
            continue  # a label over another one would hide both: the table of design.json names every candidate
        labelled.append(where)
        ax.annotate(
            row["member"], (row["seconds"], 100 * row["em"]), fontsize=7, xytext=(3, 2), textcoords="offset points"
        )


def plot_selective(report: dict[str, Any], path: Path) -> Path | None:
    """The voter's P(right): its reliability diagram (equal-mass bins against the diagonal) and its
    risk–coverage curve beside a constant P's; None without a `selective` section."""
    sel = report.get("selective")
    if not sel:
        return None
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.8))
    bins = sel["reliability"]
    left.plot([0, 1], [0, 1], color="#90a4ae", linestyle="--", label="perfect calibration")
    left.plot(
        [b["probability"] for b in bins], [b["right"] for b in bins], marker="o", color="#1565c0", label="P(right)"
    )
    left.set_xlim(0, 1)
    left.set_ylim(0, 1)
    left.set_xlabel("mean P(right) in the bin")
    left.set_ylabel(f"share right ({metric_label(sel['metric'])})")
    left.set_title(f"Reliability, {len(bins)} equal-mass bins (ECE {fixed(sel['ece'], 3)})", fontsize=11)
    left.legend(loc="upper left", fontsize=8)
    curve = sel["risk_coverage"]
    right.plot(curve["coverage"], curve["risk"], color="#1565c0", label=f"P(right) (AURC {fixed(sel['aurc'], 3)})")
    right.axhline(
        1 - sel["accuracy"], color="#90a4ae", linestyle="--", label=f"a constant P ({fixed(sel['aurc_constant'], 3)})"
    )
    for row in sel["risk_levels"]:
        if row["error"] is not None and row["alpha"] in (0.2, 0.3, 0.4):
            right.scatter(row["coverage"], row["error"], color="#c62828", zorder=3)
            right.annotate(
                f"α {significant(row['alpha'])}",
                (row["coverage"], row["error"]),
                fontsize=8,
                xytext=(4, -10),
                textcoords="offset points",
            )
    right.set_xlim(0, 1)
    right.set_ylim(0, 1)
    right.set_xlabel("coverage (share of questions answered, most probable first)")
    right.set_ylabel("error among answered")
    right.set_title("Risk against coverage", fontsize=11)
    right.legend(loc="upper left", fontsize=8)
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    pyplot().close(fig)
    return path


FIGURES = {
    "rwr.png": plot_rwr,
    "errors_rwr.png": plot_error_rwr,
    "upper_bound.png": plot_upper_bound,
    "weights.png": plot_weights,
    "error_rates.png": plot_error_rates,
    "cost.png": plot_cost,
    "design.png": plot_design,
    "selective.png": plot_selective,
}
