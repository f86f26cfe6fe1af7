"""`eor train --voter cascade --judge JUDGE.json`: a cascade whose last step is the reader as judge, trained by
eor.learning.judged_training (the judge's held-out choices and scoring cost, the cascade's order, steps and
threshold, P(right) and one threshold for every answer, the steps' and the judge's; with `--ablated`/`--nocorpus`
for a mix of questions the corpus can and cannot answer), written as a cascade weights file that names its judge
(`meta.last_step`); this module prints what the training found.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eor.commands.train_report import REPORTED_RISKS, answered_by_kind, cascade_lines
from eor.core.formatting import fixed, pct, significant
from eor.evaluation.selective import summary
from eor.learning.beyond_corpus import ANSWERABLE, KINDS, NOCORPUS
from eor.learning.calibration import Calibrated
from eor.learning.judge_cascade import JudgedCalibration
from eor.learning.judged_training import train_judged_cascade
from eor.learning.train_options import TrainOptions
from eor.pipeline.abstention import DELTA, Stratum, sequence_end


def train_judge_cascade(records: Path | Sequence[Path], out: Path, judge: Path, options: TrainOptions) -> str:
    """Train the cascade ending with the judge voter of `judge` on `records` (several runs: read as one, their
    pools the same), save it as `out` and give back the report's lines."""
    trained = train_judged_cascade(records, judge, options)
    found, entry = trained.found, trained.entry
    probability, right = found.judge_probability[found.ended], found.judge_right[found.ended]
    trained.save(out)
    lines = [
        f"cascade ending with the judge {judge} ({trained.fit.label}): {trained.questions} training questions; the "
        f"judge's scoring {fixed(entry['cost'], 2)} s per question it answers (replayed), its held-out EM "
        f"{pct(entry['held_out_em'])} on every question",
        *cascade_lines(trained.voter, "em", trained.rates),
        *risk_lines(found.stopped, probability, right, entry["risk"]),
        *(beyond_lines(options.unanswerable_share, found) if options.beyond_corpus else []),
        f"weights written to {out}",
    ]
    return "\n".join(lines)


def risk_lines(stopped: Calibrated, probability: np.ndarray, right: np.ndarray, risk: dict[str, Any]) -> list[str]:
    """P(right)'s held-out calibration of the steps' answers (per feature set's fit) and of the judge's, then the
    thresholds at the reported error rates, said once: one for every answer, whichever gave it (`risk_document`)."""
    kinds = [
        (f"the steps' answers ({fit.name})", stopped.by_fit[fit.name], stopped.right)
        for fit in stopped.model.fits.values()
    ]
    kinds.append(("the judge's answers", probability, right))
    lines = []
    for kind, found, labels in kinds:
        known = ~np.isnan(found)
        figures = summary(found[known], labels[known])
        lines.append(
            f"P(right) of {kind}, held out on {int(known.sum())} training questions: ECE {fixed(figures['ece'], 3)}, "
            f"AURC {fixed(figures['aurc'], 3)} (a constant's {fixed(figures['aurc_constant'], 3)})"
        )
    levels = ", ".join(
        f"{significant(row['alpha'])}: "
        + ("none" if row["threshold"] is None else f"P ≥ {fixed(row['threshold'], 2)} ({pct(row['coverage'])}%)")
        for row in risk["judged"]
        if row["alpha"] in REPORTED_RISKS
    )
    lines.append(
        f"thresholds, one for every answer, the steps' and the judge's (learn then test, δ "
        f"{significant(risk['delta'])}): {levels}"
    )
    return lines


def beyond_lines(share: float, found: JudgedCalibration) -> list[str]:
    """Out of fold, at each reported error rate: the share of each kind of question the cascade answers (a step's
    answer whose P(right) reaches the threshold, or the judge's), how many of the answerable ones answered are the
    judge's, and the error among answered on the mix."""
    kind = found.stopped.kind
    right = np.where(found.ended, found.judge_right, found.stopped.right)
    lines = [
        f"beyond the corpus, out of fold: one threshold over the steps' and the judge's answers, for a mix "
        f"with a share {significant(share)} of questions the corpus cannot answer (δ {significant(DELTA)})"
    ]
    for alpha in REPORTED_RISKS:
        answered = _answered(found, alpha)
        covers = {name: float(answered[kind == name].mean()) for name in KINDS if (kind == name).any()}
        wrongs = {name: float((answered & ~right)[kind == name].mean()) for name in covers}
        among = answered & (kind == ANSWERABLE)
        shown = f"{answered_by_kind(answered, kind)} (the judge gives {int((among & found.ended).sum())} of the "
        shown += f"{int(among.sum())} answerable answered)"
        covered = (1 - share) * covers[ANSWERABLE] + share * covers.get(NOCORPUS, 0.0)
        mixed = ((1 - share) * wrongs[ANSWERABLE] + share * wrongs.get(NOCORPUS, 0.0)) / covered if covered else None
        error = "" if mixed is None else f"; error among answered on the mix {pct(mixed)}%"
        lines.append(f"  α {significant(alpha)}: answers {shown}{error}{_why_none(found, share, alpha)}")
    return lines


def _why_none(found: JudgedCalibration, share: float, alpha: float) -> str:
    """Where the mixed test for `alpha` stopped when it certified no threshold (eor.pipeline.abstention
    `sequence_end`): the λ, what it answered of each stratum, the p-value and the error certified there ("": a
    threshold, or no no-corpus rows)."""
    kind = found.stopped.kind
    if any(abs(float(row["alpha"]) - alpha) < 1e-9 and row["threshold"] is not None for row in found.late):
        return ""
    if not (kind == NOCORPUS).any():
        return ""
    probability = np.where(found.ended, found.judge_probability, found.stopped.probability)
    right = np.where(found.ended, found.judge_right, found.stopped.right)
    answerable = Stratum(probability[kind == ANSWERABLE], right[kind == ANSWERABLE])
    nocorpus = Stratum(probability[kind == NOCORPUS], right[kind == NOCORPUS])
    end = sequence_end(answerable, nocorpus, alpha, share)
    if end is None:
        return ""
    threshold, p_value, bound = end
    (n, wrong, answered_right), (m, wrong_nocorpus, _) = answerable.counts(threshold), nocorpus.counts(threshold)
    return (
        f"; no threshold: the test stops at P ≥ {significant(threshold)} ({wrong + answered_right} of {n} "
        f"answerable answered, {wrong} wrong; {wrong_nocorpus} of {m} no-corpus answered wrongly), p "
        f"{fixed(p_value, 3)} > δ {significant(DELTA)}, the error certified there {fixed(bound, 3)} > "
        f"{significant(alpha)}"
    )


def _answered(found: JudgedCalibration, alpha: float) -> np.ndarray:
    """Per row of the mix, whether the cascade answers it at `alpha` out of fold."""

    def threshold(rows: list[dict[str, Any]]) -> float:
        chosen = next((row["threshold"] for row in rows if abs(float(row["alpha"]) - alpha) < 1e-9), None)
        return math.inf if chosen is None else float(chosen)

    steps = {name: threshold(fit.thresholds) for name, fit in found.stopped.model.fits.items()}
    bar = np.array([steps.get(name, math.inf) for name in found.stopped.fits])
    early = ~found.ended & (np.nan_to_num(found.stopped.probability, nan=-1.0) >= bar)
    late = found.ended & (np.nan_to_num(found.judge_probability, nan=-1.0) >= threshold(found.late))
    return early | late
