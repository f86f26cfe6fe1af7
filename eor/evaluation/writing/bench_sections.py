"""The sections of `report.md`, `eor bench`'s report as readable Markdown tables, in order (`SECTIONS`; the writer,
eor.evaluation.writing.writer, links the figures after them)."""

from __future__ import annotations

from typing import Any

from eor.core.formatting import DASH, fixed, markdown_table, pct, ratio, signed, significant
from eor.evaluation.writing.figures import metric_label
from eor.runs.costs import describe_rates, unit_label


def with_ci(figures: dict[str, Any], measure: str) -> str:
    value = figures.get(measure)
    interval = (figures.get("ci") or {}).get(measure)
    if value is None:
        return DASH
    if not interval or interval[0] is None:
        return pct(value)
    return f"{pct(value)} [{pct(interval[0])}, {pct(interval[1])}]"


def _escape(name: str) -> str:
    return name.replace("|", "\\|")


def accuracy_section(report: dict[str, Any]) -> list[str]:
    measures = report["measures"]
    header = ["system", *(metric_label(m) for m in measures), "MRWR", "MRLR"]

    def row(label: str, figures: dict[str, Any]) -> list[str]:
        return [label, *(with_ci(figures, m) for m in measures), ratio(figures.get("mrwr")), ratio(figures.get("mrlr"))]

    rows = [row(_escape(name), report["members"][name]) for name in report["names"]]
    top = report["top_r"]
    train = report.get("top_r_train")
    same = bool(train and train.get("member") == top["member"])
    if same:
        rows.append(row(f"**Top R** ({_escape(top['member'])}: best here and on the training records)", top))
    else:
        rows.append(row(f"**Top R** (best here: {_escape(top['member'])})", top))
        if train and train.get("in_records", True):
            rows.append(row(f"**Top R (train)** ({_escape(train['member'])})", train))
    rows.append(row(f"**EoR** ({_voter_label(report['eor'])})", report["eor"]))
    oracle = {**report["oracle"], "mrwr": None, "mrlr": None}
    rows.append(row("**Oracle** (any member right)", oracle))
    lines = [
        "## Accuracy (EoR paper, table 1)",
        "",
        f"Percentages with bootstrap {pct(report['bootstrap']['confidence'], 0)}% intervals "
        f"({report['bootstrap']['resamples']} resamples of the questions, seed {report['seed']}). "
        f"MRWR / MRLR on {metric_label(report['metric'])}: the mean share of the other members' failures this "
        "one answers right / of this one's failures the others answer right (lower MRLR is better). "
        "Top R is the best member on these very questions (optimistic); Top R (train) is the member best "
        "on the training records, the fair baseline.",
        "",
        *markdown_table(header, rows),
    ]
    if train and not train.get("in_records", True):
        lines += ["", f"Top R (train) {train['member']} is not among these records' members."]
    return lines


def _voter_label(eor: dict[str, Any]) -> str:
    """What chose EoR's answer: the voter kind and where its weights come from."""
    kind = eor.get("kind") or "voter"
    return f"{kind}, uniform weights" if eor.get("voter") == "uniform" else f"{kind}, trained"


def provenance_section(report: dict[str, Any]) -> list[str]:
    """Where the figures come from: records, questions, pool, reader and model digest, config, voter."""
    origin = report.get("provenance") or {}
    unknown = "not recorded"
    members = origin.get("members") or report["names"]
    lines = [
        f"- records: `{report['records']}`, {report['questions']} questions with gold answers",
        f"- pool: {len(members)} members ({', '.join(map(_escape, members))}); config "
        f"{origin.get('config') or unknown}",
        f"- reader: {origin.get('reader') or unknown}",
        f"- corpus: {origin.get('corpus') or unknown}",
        f"- EoR's voter: {_voter_label(report['eor'])}"
        + (f" (`{report['eor']['weights_file']}`)" if report["eor"].get("weights_file") else ""),
    ]
    return lines


def significance_section(report: dict[str, Any]) -> list[str]:
    metric = metric_label(report["significance"]["metric"])
    lines = ["## EoR against Top R", ""]
    for key, label in (("top_r", "Top R"), ("top_r_train", "Top R (train)")):
        test = report["significance"].get(key)
        if not test:
            continue
        member = test["against"]
        text = (
            f"- **{label}** ({member}): {metric} difference EoR − {member} = {pct(test['difference'])} points "
            f"[{pct(test['ci'][0])}, {pct(test['ci'][1])}] (paired bootstrap)"
        )
        if test["test"] == "mcnemar_exact":
            m = test["mcnemar"]
            text += (
                f"; exact McNemar: EoR alone right on {m['a_only']}, {member} alone right on {m['b_only']} "
                f"questions, p = {significant(test['p_value'], 3)}"
            )
        else:
            text += f"; paired bootstrap p = {ratio(test['p_value'])}"
        verdict = test["significant"]
        if verdict is not None:
            text += f" ({'significant' if verdict else 'not significant'} at α = {test['alpha']})."
        lines.append(text)
    oracle = report["oracle"]
    metric_key = report["metric"]
    lines += [
        "",
        f"Oracle {metric}: {pct(oracle[metric_key])}; gap to EoR {pct(oracle['gap']['eor'])} points, to Top R "
        f"{pct(oracle['gap']['top_r'])} points.",
        "",
        "EoR chose: " + ", ".join(f"{_escape(n)} {c}" for n, c in report["eor"]["chosen"].items() if c) + ".",
    ]
    return lines


def rwr_section(report: dict[str, Any]) -> list[str]:
    names = report["rwr"]["names"]
    rows = [
        [f"**{_escape(name)}**", *(ratio(v) for v in values)]
        for name, values in zip(names, report["rwr"]["matrix"], strict=True)
    ]
    return [
        "## Retriever inconsistency: RWR(i, j) (eq. 1, figure 1)",
        "",
        "Row i, column j: the share of questions member j gets wrong that member i gets right; "
        f"{DASH} undefined (j never wrong).",
        "",
        *markdown_table(["i \\ j", *(_escape(n) for n in names)], rows),
    ]


def errors_section(report: dict[str, Any]) -> list[str]:
    errors = report["errors"]
    kinds = [*errors["types"], "correct"]
    labels = {
        "retriever_error": "retriever error",
        "hallucination": "hallucination",
        "extraction_error": "extraction error",
        "lucky_guess": "lucky guess",
        "correct": "correct",
    }

    def cells(entry: dict[str, Any]) -> list[str]:
        return [f"{entry['counts'][k]} ({pct(entry['rates'][k], 0)}%)" for k in kinds]

    rows = [[_escape(name), *cells(errors["members"][name])] for name in errors["names"]]
    rows.append(["**EoR**", *cells(errors["eor"])])
    return [
        "## Error breakdown (appendix B, figure 4)",
        "",
        f"{errors['questions']} questions kept; {errors['filtered']} filtered (some member's answer is longer "
        f"than {errors['max_answer_words']} words). An answer is correct when its {metric_label(errors['metric'])} "
        f"score is at least {significant(errors['correct_at'])}. Counts (rate over the kept questions). The types "
        "overlap: "
        "extraction error = gold and answer retrieved but wrong; lucky guess = right with neither retrieved. "
        "RWR_E heatmaps: `errors_rwr.png`; the numbers are in `report.json` under `errors.rwr`.",
        "",
        *markdown_table(["member", *(labels.get(k, k) for k in kinds)], rows),
    ]


def upper_bound_section(report: dict[str, Any]) -> list[str]:
    bound = report["upper_bound"]
    rows = [
        [
            str(e["size"]),
            f"{len(e['accuracies'])}" + ("" if e["exhaustive"] else f" of {e['total_subsets']}"),
            pct(e["min"]),
            pct(e["median"]),
            pct(e["max"]),
            ", ".join(_escape(n) for n in e["best_subset"]),
        ]
        for e in bound["by_size"]
    ]
    return [
        "## Upper bound by pool size (figure 5)",
        "",
        f"Oracle {metric_label(report['metric'])} of member subsets; best single member "
        f"{bound['best_single']} ({pct(bound['best_single_accuracy'])}), EoR {pct(bound['eor'])}.",
        "",
        *markdown_table(["pool size", "subsets", "min", "median", "max", "best subset"], rows),
    ]


def weights_section(report: dict[str, Any]) -> list[str]:
    weights = report.get("weights")
    if not weights:
        return []
    if weights.get("voter") == "cascade":
        return cascade_section(weights)
    if "coefficients" in weights:
        return selector_section(weights)
    active = set(weights["active"])
    rows = [
        [_escape(n), fixed(w, 3), "yes" if n in active else "dropped"] for n, w in weights["retriever_weights"].items()
    ]
    meta = weights.get("meta", {})
    details = [f"pooling {weights['pooling']}", f"threshold t = {significant(weights['member_threshold'])}"]
    details.append("metric weights " + ", ".join(f"{k} {fixed(v, 3)}" for k, v in weights["metric_weights"].items()))
    if weights.get("grounding_weight") is not None:
        details.append(f"grounding weight ω^g {fixed(weights['grounding_weight'], 3)}")
    if meta.get("objective"):
        details.append(f"objective {meta['objective']}")
    if weights.get("train_score") is not None:
        details.append(f"train score {fixed(weights['train_score'], 4)}")
    return [
        "## Learned retriever weights (figure 6)",
        "",
        f"From `{weights['file']}`: " + "; ".join(details) + ".",
        "",
        *markdown_table(["member", "ω^r", "votes"], rows),
    ]


def selector_section(weights: dict[str, Any]) -> list[str]:
    """The learned answer selector's logistic-regression coefficients (on standardised features)."""
    rows = [
        [_escape(name), signed(value, 3)]
        for name, value in sorted(weights["coefficients"].items(), key=lambda item: -abs(item[1]))
    ]
    details = [f"metrics {', '.join(weights['metrics'])}", f"C = {significant(weights['C'])}"]
    if weights.get("train_score") is not None:
        details.append(f"train score {fixed(weights['train_score'], 4)}")
    return [
        "## Learned answer selector",
        "",
        f"From `{weights['file']}`: " + "; ".join(details) + ". Coefficients on standardised features, "
        "largest first (positive: the candidate is more likely right).",
        "",
        *markdown_table(["feature", "coefficient"], rows),
    ]


def cascade_section(weights: dict[str, Any]) -> list[str]:
    """The learned cascade: its order, each step's calibration, and the threshold."""
    threshold = weights.get("threshold")
    rule = "never stops early" if threshold is None else f"stops at the first step with P ≥ {fixed(threshold, 3)}"
    rows = [
        [
            str(j + 1),
            _escape(step["members"][-1]),
            signed(step["calibration"]["intercept"], 3),
            signed(step["calibration"]["top"], 3),
            signed(step["calibration"]["margin"], 3),
        ]
        for j, step in enumerate(weights["steps"])
    ]
    return [
        "## Learned cascade",
        "",
        f"From `{weights['file']}`: members run in this order and the cascade {rule}, where P = σ(a + b·z + "
        "c·min(δ, 10)) of the step's leading candidate (z its log-odds under the step's selector, δ its margin "
        "over the best candidate with another answer).",
        "",
        *markdown_table(["step", "adds", "a", "b (z)", "c (δ)"], rows),
    ]


def _frontier_lines(cost: dict[str, Any], metric: str) -> list[str]:
    """The frontier of member subsets, or how to compute it (`eor bench --frontier`)."""
    if cost.get("frontier") is None:
        return ["Frontier of member subsets: not computed (`eor bench --frontier`)."]
    cv = cost["selector_cv"]
    return [
        f"Frontier of member subsets ({cv['search']}; an answer selector's {cv['folds']}-fold cross-validated "
        f"{metric_label(metric)} within these records):",
        "",
        *markdown_table(
            ["members", metric_label(metric), "cost"],
            [
                [", ".join(map(_escape, e["members"])), pct(e["accuracy"]), fixed(e["seconds"], 2)]
                for e in cost["frontier"]
            ],
        ),
    ]


def cost_section(report: dict[str, Any]) -> list[str]:
    """Accuracy against cost: members, EoR, the frontier of member subsets, a cascade's operating points."""
    cost = report.get("cost")
    if not cost:
        return []
    metric = report["metric"]
    unit = unit_label(cost["unit"], cost.get("rates"))
    if cost.get("rates_from"):
        unit += f", fitted on {cost['rates_from']}"
    rows = [[_escape(name), pct(entry[metric]), fixed(entry["seconds"], 2)] for name, entry in cost["members"].items()]
    rows.append(["**EoR**", pct(report["eor"][metric]), fixed(cost["eor_seconds"], 2)])
    lines = [
        "## Accuracy against cost",
        "",
        f"Mean cost per question in {unit}: running every member costs {fixed(cost['pool_seconds'], 2)}; EoR's voter "
        "ran "
        f"{fixed(cost['members_run'], 2)} members for {fixed(cost['eor_seconds'], 2)} (90th percentile "
        f"{fixed(cost['eor_seconds_p90'], 2)})."
        + (
            " The cascade's members are charged as it runs them: each right after the member before it in its own "
            "order, keeping the prompt prefix the reader keeps."
            if cost.get("charged") == "cascade order"
            else ""
        ),
        "",
        *markdown_table(["member", metric_label(metric), "cost"], rows),
        "",
        *_frontier_lines(cost, metric),
    ]
    cascade = cost.get("cascade")
    if cascade:
        lines += [
            "",
            f"The cascade ({' > '.join(map(_escape, cascade['order']))}) replayed on these records at the threshold "
            "each tolerance chose on held-out training questions:",
            "",
            *markdown_table(
                ["max loss (points)", "threshold", metric_label(metric), "cost", "p90", "members run"],
                [
                    [
                        significant(p["max_loss"]),
                        "inf" if p["threshold"] is None else fixed(p["threshold"], 3),
                        pct(p["accuracy"]),
                        fixed(p["seconds"], 2),
                        fixed(p["seconds_p90"], 2),
                        fixed(p["members_run"], 2),
                    ]
                    for p in cascade["points"]
                ],
            ),
        ]
    return lines


def selective_section(report: dict[str, Any]) -> list[str]:
    """The voter's P(right): calibration, risk–coverage and the weights file's error rates
    (eor.evaluation.bench.probability)."""
    sel = report.get("selective")
    if not sel:
        return []
    label = metric_label(sel["metric"])
    skill = "–" if sel["brier_skill"] is None else fixed(sel["brier_skill"], 3)
    accuracy = ", ".join(f"{fixed(100 * float(c), 0)}%: {pct(v)}" for c, v in sel["selective_accuracy"].items())
    noise = sel["ece_noise"]
    lines = [
        "## P(right) and abstention",
        "",
        f"The voter's probability that its answer is right (calibrated on the training records for "
        f"{metric_label(sel['calibrated_on'])}), judged here by {label} on {sel['questions']} questions "
        f"({pct(sel['accuracy'])} right), {_fits_used(sel.get('fits'))}:",
        "",
        *markdown_table(
            ["figure", "P(right)", "a constant P"],
            [
                ["ECE (10 equal-mass bins)", fixed(sel["ece"], 3), "–"],
                [
                    "ECE of a perfectly calibrated P here (noise: mean, 95th pct.)",
                    f"{fixed(noise['mean'], 3)}, {fixed(noise['p95'], 3)}",
                    "–",
                ],
                ["Brier score", fixed(sel["brier"], 3), "–"],
                ["Brier skill (against the constant)", skill, "0"],
                ["AURC (lower is better)", fixed(sel["aurc"], 3), fixed(sel["aurc_constant"], 3)],
            ],
        ),
        "",
        f"Selective {label} (the most probable answers first), by coverage: {accuracy}.",
        "",
        "At each error rate of the weights file's thresholds (chosen on the training records; error among "
        "answered questions with its exact 95% interval):",
        "",
        *markdown_table(
            ["error rate asked", "threshold", "answered", "coverage", "error", "95% interval", "coverage on train"],
            [
                [
                    significant(row["alpha"]),
                    _by_fit(row["threshold"], lambda t: "none" if t is None else fixed(t, 2)),
                    str(row["answered"]),
                    pct(row["coverage"]),
                    pct(row["error"]),
                    "–" if row["error_ci"] is None else f"[{pct(row['error_ci'][0])}, {pct(row['error_ci'][1])}]",
                    _by_fit(row["train_coverage"], pct),
                ]
                for row in sel["risk_levels"]
            ],
        ),
    ]
    return lines


def _fits_used(fits: dict[str, int] | None) -> str:
    """Which of the P(right) fits (voters.choice_evidence.FITS) scored how many questions."""
    if not fits:
        return "one fit"
    return "scored by its fit " + ", ".join(f"{name!r} ({count})" for name, count in fits.items())


def _by_fit(value: Any, show: Any) -> str:
    """A threshold row's value, or each fit's (`name: value`) when several fits judged the questions."""
    return "; ".join(f"{name}: {show(v)}" for name, v in value.items()) if isinstance(value, dict) else show(value)


def design_section(report: dict[str, Any]) -> list[str]:
    """A pool design (`eor bench --design`): the candidates alone, the path and the chosen pool."""
    design = report.get("design")
    if not design:
        return []
    settings = design["settings"]
    candidates = [
        [
            _escape(row["member"]),
            pct(row["em"]),
            pct(row["gold_passage"]),
            pct(row["answer_in_context"]),
            "-" if row["em_in_context"] is None else pct(row["em_in_context"]),
            fixed(row["seconds"], 2),
        ]
        for row in design["candidates"]
    ]
    path = [
        [
            step["action"],
            _escape(step["member"]),
            pct(step["accuracy"]),
            f"{signed(100 * step['gain'], 1)} ± {fixed(100 * step['se'], 1)}",
            fixed(step["cost"], 2),
            pct(step["oracle"]),
        ]
        for step in design["steps"][1:]
    ]
    return [
        "## Pool design",
        "",
        f"Candidates on the training records (seconds per question run alone, at {describe_rates(settings['rates'])}):",
        "",
        *markdown_table(["candidate", "EM", "gold passage", "answer in context", "EM in context", "s/q"], candidates),
        "",
        f"The path ({settings['repeats']} × {settings['folds']}-fold cross-validation of the selector, seed "
        f"{settings['seed']}; a step is kept when its paired gain is at least one standard error):",
        "",
        *markdown_table(["step", "member", "CV EM", "gain ± SE (points)", "s/q", "oracle"], path),
        "",
        f"Chosen: {', '.join(map(_escape, design['chosen']))}.",
    ]


def title_section(report: dict[str, Any]) -> list[str]:
    return ["# Retriever pool benchmark"]


def voter_section(report: dict[str, Any]) -> list[str]:
    """The correctness metric and what chose EoR's answers."""
    eor = report["eor"]
    voter = (
        f"weights file `{eor['weights_file']}`"
        if eor["voter"] == "weights"
        else f"uniform weights over {', '.join(eor['metrics'])} ({eor['pooling']} pooling)"
    )
    return [f"Correctness: {metric_label(report['metric'])}. EoR: {voter}."]


#: `report.md`'s sections in order (eor.evaluation.writing.writer registers them as the bench report's)
SECTIONS = {
    "title": title_section,
    "provenance": provenance_section,
    "voter": voter_section,
    "accuracy": accuracy_section,
    "significance": significance_section,
    "rwr": rwr_section,
    "errors": errors_section,
    "upper_bound": upper_bound_section,
    "cost": cost_section,
    "selective": selective_section,
    "design": design_section,
    "weights": weights_section,
}
