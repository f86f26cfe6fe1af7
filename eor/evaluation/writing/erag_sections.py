"""The sections of `erag.md` and `utility.md`, the Markdown of `eor erag` and `eor utility`, drawn from the JSON they
save (NaN appears as None, shown as `–`)."""

from __future__ import annotations

from typing import Any

from eor.core.formatting import fixed, markdown_table

LABELLINGS = {
    "erag": "eRAG",
    "containment": "containment",
    "provenance": "provenance",
}


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return fixed(value, digits)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    """The one Markdown table (eor.core.formatting), each body cell's `|` escaped and line breaks made spaces."""
    return markdown_table(header, [[cell.replace("|", "\\|").replace("\n", " ") for cell in row] for row in rows])


def _labels(values: list[float]) -> str:
    return " ".join(str(int(v)) if v in (0, 1) else fixed(v, 2) for v in values)


def _labellings(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    tables = {"erag": {"questions": data["questions"], "mean": data["mean"], "correlation": data["correlation"]}}
    tables.update(data.get("baselines", {}))
    return tables


def erag_header(data: dict[str, Any]) -> list[str]:
    s = data["settings"]
    e2e_values = [entry["e2e"] for entry in data["questions"] if entry["e2e"] is not None]
    e2e_mean = sum(e2e_values) / len(e2e_values) if e2e_values else None
    lines = [
        f"# eRAG: `{s['member']}` on `{s['data']}`",
        "",
        f"{s['questions']} questions"
        + (f" (`--limit {s['limit']}`)" if s.get("limit") else "")
        + f", {s['documents']} documents, k = {s['k']}; reader `{s['reader']}`; downstream metric "
        f"`{s['downstream_metric']}`; config `{s['config']}`.",
        f"End-to-end score (the reader with all k documents), mean: **{_f(e2e_mean)}**.",
        "",
        "Labels: **eRAG** = the downstream metric of the reader's answer with that document alone; "
        "**containment** = a gold answer occurs in the document; **provenance** = the document is a gold passage.",
    ]
    if s.get("provenance"):
        lines.append(f"Provenance baseline {s['provenance']}.")
    return lines


def mean_and_correlation(data: dict[str, Any]) -> list[str]:
    """The mean of each retrieval metric per labelling, and its correlation with the end-to-end score (the
    paper's table 1)."""
    tables, metrics = _labellings(data), list(data["mean"])
    names = list(tables)
    labels = [LABELLINGS.get(n, n) for n in names]
    lines = ["## Mean retrieval metrics", ""]
    lines += _table(["metric", *labels], [[m, *(_f(tables[n]["mean"].get(m)) for n in names)] for m in metrics])
    lines += ["", "## Correlation with the end-to-end score across questions (Kendall τ / Spearman ρ)", ""]
    header = ["metric", *(f"{label} {sign}" for label in labels for sign in ("τ", "ρ"))]
    rows = []
    for m in metrics:
        correlations = [tables[n]["correlation"].get(m, {}) for n in names]
        rows.append([m, *(_f(c.get(key)) for c in correlations for key in ("kendall_tau", "spearman_rho"))])
    lines += _table(header, rows)
    best = {n: _best(tables[n]["correlation"]) for n in names}
    found = [f"{LABELLINGS.get(n, n)} {m} {_f(v)}" for n, (m, v) in best.items() if m]
    lines += ["", "– = undefined: a constant column (e.g. every end-to-end score 0) has no rank order."]
    if found:
        lines.append("Best metric per labelling (Kendall τ): " + "; ".join(found) + ".")
    return lines


def by_cutoff(data: dict[str, Any]) -> list[str]:
    """Kendall's τ per cutoff (the paper's figure 1)."""
    table = data.get("by_cutoff")
    if not table:
        return []
    cutoffs = [str(c) for c in table["cutoffs"]]
    lines = [
        "## Correlation against the number of documents (Kendall τ; the paper's figure 1)",
        "",
        "At cutoff c: each metric@c on the first c labels of the same lists, against the end-to-end "
        "score of the reader given the top c documents.",
        "",
    ]
    rows = [["end-to-end mean", "", *(_f(table["e2e_mean"].get(c)) for c in cutoffs)]]
    for n, per_metric in table["correlation"].items():
        for base, values in per_metric.items():
            rows.append([LABELLINGS.get(n, n), base, *(_f(values.get(c, {}).get("kendall_tau")) for c in cutoffs)])
    return lines + _table(["labels", "metric", *(f"@{c}" for c in cutoffs)], rows)


def per_question(data: dict[str, Any]) -> list[str]:
    """Each question's labels of each labelling and its end-to-end score."""
    baselines = {n: {entry["id"]: entry for entry in t["questions"]} for n, t in data.get("baselines", {}).items()}
    rows = [
        [
            entry["id"],
            entry.get("question", ""),
            " / ".join(entry.get("gold_answers", [])[:3]),
            _labels(entry["labels"]),
            *(_labels(baselines[n][entry["id"]]["labels"]) for n in baselines),
            _f(entry["e2e"], 2),
            entry.get("e2e_answer") or "",
        ]
        for entry in data["questions"]
    ]
    header = ["id", "question", "gold", "eRAG labels", *(f"{n} labels" for n in baselines), "e2e", "e2e answer"]
    return ["## Per question", "", *_table(header, rows)]


def _best(correlation: dict[str, dict[str, Any]]) -> tuple[str | None, float | None]:
    scored = [(m, tau) for m, c in correlation.items() if (tau := c.get("kendall_tau")) is not None]
    return max(scored, key=lambda item: item[1]) if scored else (None, None)


EVALUATION_COLUMNS = (
    ("phase", None, None),
    ("prompts", "requests", None),
    ("distinct", "unique", None),
    ("cache hits", "cache_hits", None),
    ("generated", "generated", None),
    ("reader calls", "calls", None),
    ("seconds", "seconds", 1),
)
# (header, key of a measured configuration, digits); "per_question" is computed
MEASURED_COLUMNS = (
    ("configuration", None, None),
    ("calls", "calls", None),
    ("prompts", "prompts", None),
    ("batch", "batch_size", None),
    ("context window", "context_tokens", None),
    ("longest prompt (tokens)", "longest_prompt_tokens", None),
    ("seconds", "seconds", 1),
    ("s / question", "per_question", 2),
    ("CPU seconds", "cpu_seconds", 1),
    ("peak RSS MB", "peak_rss_mb", 0),
    ("reader RSS MB", "reader_rss_mb", 0),
    ("generation RSS MB", "generation_rss_mb", 1),
    ("Python heap peak MB", "python_heap_peak_mb", 2),
    ("GPU peak MB", "gpu_peak_mb", 0),
)


def _cost_rows(entries: dict[str, dict[str, Any]], columns: tuple[tuple[str, str | None, int | None], ...]) -> list:
    """One row per named entry: its name, then each column's value, formatted."""
    rows = []
    for name, entry in entries.items():
        cells = [_f(None if key is None else entry.get(key), 3 if d is None else d) for _, key, d in columns[1:]]
        rows.append([name, *cells])
    return _table([header for header, _, _ in columns], rows)


def cost(data: dict[str, Any]) -> list[str]:
    """What the run generated, and eRAG against end-to-end evaluation measured side by side (the paper's table 2)."""
    cost = data.get("cost", {})
    lines = ["## Cost (the paper's table 2)", ""]
    evaluation = cost.get("evaluation", {})
    if evaluation:
        lines += [
            "This run: `one_pass` generated every prompt once (per question the first document alone, then the "
            "end-to-end prompts with 2, 3, ... documents, each extending the previous one's prefix, which a reader "
            "with a prefix cache reuses); `erag` and `e2e` then read the generation cache. Not a fair comparison — see "
            "the measured table below.",
            "",
        ]
        lines += _cost_rows(evaluation, EVALUATION_COLUMNS)
    measured = cost.get("measured")
    if measured:
        questions = measured["questions"]
        lines += [
            "",
            f"Measured side by side on the first {questions} questions ({measured['documents']} "
            f"documents), each configuration in a fresh child process, no generation cache, max_tokens "
            f"{measured['max_tokens']}:",
            "",
        ]
        configurations = {
            name: {**c, "per_question": c["seconds"] / questions if questions else None}
            for name, c in measured["configurations"].items()
        }
        lines += _cost_rows(configurations, MEASURED_COLUMNS)
        lines += ["", f"Memory columns: {measured['memory_measure']}."]
        if not measured.get("window_sized_per_configuration"):
            lines.append("The reader has no tokenizer eor can reach, so every configuration kept the config's window.")
    return lines


def utility_header(data: dict[str, Any]) -> list[str]:
    """The settings: member, data, reader, similarity, the definition of U and the settings compared."""
    s = data["settings"]
    lines = [
        f"# Context utility: `{s['member']}` on `{s['data']}`",
        "",
        f"{s['questions']} questions"
        + (f" (`--limit {s['limit']}`)" if s.get("limit") else "")
        + f"; reader `{s['reader']}`; P = max similarity (`{s['similarity']}`) between the answer and the gold "
        f"{s['references']}; 0-shot mean P {_f(s['zero_shot_p'])}.",
        "U = (P(context) − P(0-shot)) / P(0-shot); undefined (left out) when P(0-shot) = 0"
        + (f", else divided by max(P(0-shot), {s['epsilon']})" if s.get("epsilon") else "")
        + ". Settings: `ordered` (top k in retrieval order), `reversed` (the same k, best last)"
        + (", `oracle` (the first k gold passages)" if "oracle" in data["mean"] else "")
        + ". nDCG@k uses provenance labels (gold passages).",
    ]
    if s.get("oracle"):
        found = s["oracle"]["questions_with_gold_in_corpus"]
        lines.append(f"Questions whose gold passages are in the corpus: {found}.")
    return lines


def _ks(data: dict[str, Any]) -> list[str]:
    return [str(k) for k in data["settings"]["ks"]]


def _per_setting(data: dict[str, Any], title: str, key: str) -> list[str]:
    """A table of one mean (`key`) per setting and k."""
    ks = _ks(data)
    rows = [[setting, *(_f(rows.get(k, {}).get(key)) for k in ks)] for setting, rows in data["mean"].items()]
    return [f"## {title}", "", *_table(["setting", *(f"k={k}" for k in ks)], rows)]


def mean_utility(data: dict[str, Any]) -> list[str]:
    return _per_setting(data, "Mean utility U", "utility")


def mean_p(data: dict[str, Any]) -> list[str]:
    return _per_setting(data, "Mean P", "p")


def mean_ndcg(data: dict[str, Any]) -> list[str]:
    return _per_setting(data, "Mean nDCG@k", "ndcg")


def undefined_utility(data: dict[str, Any]) -> list[str]:
    return _per_setting(data, "Questions with undefined U (P(0-shot) = 0)", "undefined")


def utility_correlation(data: dict[str, Any]) -> list[str]:
    """Pearson's r between nDCG@k and U per setting and k, with the pairs it used."""
    if not data.get("correlation"):
        return []
    ks = _ks(data)
    rows = []
    for setting, per_k in data["correlation"].items():
        cells = [f"{_f(per_k.get(k, {}).get('pearson_r'))} ({per_k.get(k, {}).get('n', 0)})" for k in ks]
        rows.append([setting, *cells])
    return ["## Pearson's r between nDCG@k and U (pairs used)", "", *_table(["setting", *(f"k={k}" for k in ks)], rows)]


def utility_per_question(data: dict[str, Any]) -> list[str]:
    """Each question's 0-shot answer and P, and U of the ordered contexts per k."""
    ks = _ks(data)
    rows = []
    for entry in data["questions"]:
        ordered = entry["contexts"].get("ordered", {})
        rows.append(
            [
                entry["id"],
                entry["question"],
                entry["zero_shot"]["answer"],
                _f(entry["zero_shot"]["p"]),
                *(_f(ordered.get(k, {}).get("utility")) for k in ks),
            ]
        )
    header = ["id", "question", "0-shot answer", "P(0-shot)", *(f"U k={k}" for k in ks)]
    return ["## Per question (U, ordered contexts)", "", *_table(header, rows)]


#: `erag.md`'s sections in order: settings, mean metrics and correlations (the paper's table 1), correlation per
#: cutoff (figure 1), cost (table 2), the per-question labels (eor.evaluation.writing.writer registers them)
ERAG_SECTIONS = {
    "settings": erag_header,
    "mean_and_correlation": mean_and_correlation,
    "by_cutoff": by_cutoff,
    "cost": cost,
    "per_question": per_question,
}

#: `utility.md`'s sections in order: settings, mean U / P / nDCG per setting and k, Pearson's r(nDCG@k, U), each
#: question's utilities
UTILITY_SECTIONS = {
    "settings": utility_header,
    "mean_utility": mean_utility,
    "mean_p": mean_p,
    "mean_ndcg": mean_ndcg,
    "undefined": undefined_utility,
    "correlation": utility_correlation,
    "per_question": utility_per_question,
}
