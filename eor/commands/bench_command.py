"""`bench`: build a benchmark report from a run's records, write it, and summarise it for the CLI."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eor.core.config import EnsembleConfig
from eor.core.correctness.bem import NAME as BEM
from eor.core.correctness.bem import BemCorrectness
from eor.core.errors import ConfigError
from eor.core.formatting import fixed, pct, ratio, significant, small_data_warning
from eor.evaluation.bench.judge import judge_report
from eor.evaluation.bench.judge_cascade_report import judge_cascade_report
from eor.evaluation.bench.report import build_report
from eor.evaluation.upper_bound import DEFAULT_MAX_SUBSETS
from eor.evaluation.writing.judge_sections import judge_cascade_lines, judge_lines
from eor.evaluation.writing.writer import write_report
from eor.learning.judge_cascade import reader_tokens
from eor.learning.judge_training import JUDGE
from eor.pipeline.judging import scored_families
from eor.readers import build_reader
from eor.runs.costs import ReaderTokens
from voters.judge_step import LAST_STEP
from voters.loading import weights_kind
from voters.weights_file import read_document

log = logging.getLogger(__name__)


def bench(
    records_dir: str | Path,
    out_dir: str | Path,
    weights: str | Path | None = None,
    metric: str = "em",
    *,
    metrics: Sequence[str] | None = None,
    seed: int = 0,
    resamples: int = 1000,
    max_subsets: int = DEFAULT_MAX_SUBSETS,
    progress: bool = True,
    members: Sequence[str] | None = None,
    design: str | Path | None = None,
    frontier: bool = False,
    against: str | Path | None = None,
    config: EnsembleConfig | None = None,
    bem_model: str | None = None,
) -> str:
    """`eor bench`: write report.json, report.md, report.html and the figures into `out_dir`; a short summary to print.

    `metrics`: the uniform voter's similarity metrics, without `weights` (default em, f1, cosine); `members`: the
    records' members to benchmark (default all); `design`: `eor design`'s design.json to show; `frontier`: also the
    frontier of member subsets; `bem_model`: the answer-equivalence model of `metric` "bem", for this call alone;
    `config` (the pool's, validated at the caller's door): a cascade charged in its own order (a llama.cpp reader);
    the rest as eor.evaluation.bench.report.build_report. A judge voter (eor.evaluation.bench.judge, `against`:
    another voter paired with it) and a cascade ending with the judge (eor.evaluation.bench.judge_cascade_report)
    get their own report, `config` naming what the judge scores."""
    judged_by = _judged_by(weights)
    if judged_by is not None:
        other = {"--metric": metric != "em", "--metrics": metrics, "--design": design, "--frontier": frontier}
        given = [flag for flag, value in other.items() if value]
        if given:
            raise ConfigError(
                f"a judge voter's benchmark takes --config, --against, --seed and --resamples, not {', '.join(given)}"
            )
        assert weights is not None
        return _judge_bench(judged_by, records_dir, out_dir, weights, config, against, seed, resamples)
    if against is not None:
        raise ConfigError(
            "--against pairs a judge voter's answers with another voter's: give a judge voter's --weights"
        )
    report = build_report(
        records_dir,
        weights,
        metric,
        seed,
        max_subsets,
        metrics=metrics,
        resamples=resamples,
        progress=progress,
        members=members,
        frontier=frontier,
        design=design,
        correctness=BemCorrectness(bem_model) if bem_model and metric == BEM else None,
        tokens=_cascade_tokens(weights, config),
    )
    if warning := small_data_warning(report["questions"], "a benchmark"):
        log.warning(warning)
    written = write_report("bench", report, out_dir)
    return summarize(report, out_dir, [path.name for path in written])


def summarize(report: dict[str, Any], out_dir: str | Path, files: Sequence[str]) -> str:
    """A few lines: EoR against Top R (metric, interval, test, MRLR), the oracle gap and the files written."""
    metric = report["metric"]
    eor = report["eor"]
    ci = eor["ci"][metric]
    lines = [
        f"{report['questions']} questions, {len(report['names'])} members; {metric} "
        f"(95% bootstrap intervals, {report['bootstrap']['resamples']} resamples)",
        f"EoR ({eor['voter']}): {pct(eor[metric])} [{pct(ci[0])}, {pct(ci[1])}], MRLR {ratio(eor['mrlr'])}",
    ]
    for key, label in (("top_r", "Top R"), ("top_r_train", "Top R (train)")):
        entry = report.get(key)
        test = report["significance"].get(key)
        if not entry or not test:
            continue
        low, high = entry["ci"][metric]
        lines.append(
            f"{label} {entry['member']}: {pct(entry[metric])} [{pct(low)}, {pct(high)}], MRLR "
            f"{ratio(entry['mrlr'])}; EoR − {label} = {pct(test['difference'])} points, "
            f"{test['test'].replace('_', ' ')} p = {significant(test['p_value'], 3)}"
        )
    oracle = report["oracle"]
    lines.append(f"oracle {pct(oracle[metric])}: gap to EoR {pct(oracle['gap']['eor'])} points")
    lines += _selective_lines(report.get("selective"))
    lines.append(f"written to {out_dir}: {', '.join(files)}")
    return "\n".join(lines)


def _selective_lines(sel: dict[str, Any] | None) -> list[str]:
    """EoR's P(right) (eor.evaluation.bench.probability): calibration, AURC, and each error rate of the weights file."""
    if not sel:
        return []
    skill = "–" if sel["brier_skill"] is None else fixed(sel["brier_skill"], 3)
    levels = "; ".join(
        f"{significant(row['alpha'])}: {pct(row['coverage'])}% answered, error {pct(row['error'])}"
        for row in sel["risk_levels"]
        if row["alpha"] in (0.2, 0.3, 0.4)
    )
    return [
        f"P(right): ECE {fixed(sel['ece'], 3)} (a calibrated P's noise here {fixed(sel['ece_noise']['mean'], 3)}), "
        "Brier skill "
        f"{skill}, AURC {fixed(sel['aurc'], 3)} (a constant's {fixed(sel['aurc_constant'], 3)})",
        f"abstention (error rate asked: coverage, realised error): {levels}",
    ] + [f"P(right) by its fit {name!r} on {count} questions" for name, count in (sel.get("fits") or {}).items()]


def _judge_bench(
    judged_by: str,
    records_dir: str | Path,
    out_dir: str | Path,
    weights: str | Path,
    config: EnsembleConfig | None,
    against: str | Path | None,
    seed: int,
    resamples: int,
) -> str:
    """The judge's report (eor.evaluation.bench.judge), or that of a cascade ending with the judge
    (eor.evaluation.bench.judge_cascade_report), written into `out_dir`; its summary lines."""
    if judged_by == "cascade":
        if config is None:
            raise ConfigError(f"{weights} is a cascade ending with the judge: give --config, the config naming it")
        judged = judge_cascade_report(records_dir, weights, config, against=against, seed=seed, resamples=resamples)
        lines, kind = judge_cascade_lines(judged), "judge_cascade"
    else:
        scored = None if config is None else scored_families(config)
        judged = judge_report(records_dir, weights, scored=scored, against=against, seed=seed, resamples=resamples)
        lines, kind = judge_lines(judged), "judge"
    if warning := small_data_warning(judged["questions"], "a benchmark"):
        log.warning(warning)
    files = [path.name for path in write_report(kind, judged, out_dir)]
    return "\n".join([*lines, f"written to {out_dir}: {', '.join(files)}"])


def _judged_by(weights: str | Path | None) -> str | None:
    """`judge` for a judge voter's weights file, `cascade` for a cascade trained with the judge as its last
    step, None for any other voter."""
    if weights is None:
        return None
    kind = weights_kind(weights)
    if kind == JUDGE:
        return JUDGE
    if kind == "cascade" and LAST_STEP in (read_document(weights).get("meta") or {}):
        return "cascade"
    return None


def _cascade_tokens(weights: str | Path | None, config: EnsembleConfig | None) -> ReaderTokens | None:
    """For a cascade's weights file and a config whose reader counts its own chat tokens (llama.cpp): the
    reader's tokens, which charge the cascade's members in its own order (eor.evaluation.bench.cost_section); else None:
    as recorded."""
    if weights is None or config is None or weights_kind(weights) != "cascade":
        return None
    try:
        return reader_tokens(build_reader(config.reader), config)
    except ConfigError:  # a reader that cannot count its chat tokens
        return None
