"""`eor train --voter judge`: the judge voter (voters.judge_selector) trained on run records whose questions the
reader scored (`eor run` with a `judge:` section, eor.commands.judge_records), written as a weights file.

The training and the weights file's metadata are eor.learning.judge_data's `trained_judge` (the policy of each
choice eor.learning.judge_training's: each level's setting chosen by cross-validation on the training records alone,
fitted, P(right) calibrated out of fold, abstention thresholds chosen); this command prints what it found and saves
the file. Records without scores train the text-only fit alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eor.commands.train_report import REPORTED_RISKS, answered_by_kind
from eor.core.formatting import fixed, pct, significant
from eor.learning.beyond_corpus import ABLATED, NOCORPUS
from eor.learning.judge_data import trained_judge
from eor.learning.judge_training import FitReport, Unanswerable
from voters.judge_selector import JudgeVoter


def train_judge(records: Path | Sequence[Path], out: Path, **options: Any) -> str:
    """Train the judge voter on `records` (eor.learning.judge_data.trained_judge, whose keywords `options` are),
    save it as the weights file `out` and give back the report's lines."""
    trained = trained_judge(records, **options)
    folds, seed = trained.meta["training"]["folds"], trained.meta["training"]["seed"]
    members = ", ".join(trained.voter.members_)
    lines = [
        f"judge voter: {trained.questions} training questions ({trained.scored} scored by the reader), members "
        f"{members}; every choice by {folds}-fold cross-validation (seed {seed})"
    ]
    lines += _fit_lines(trained.voter, trained.reports, trained.beyond)
    if "dev" in trained.meta:
        dev = trained.meta["dev"]
        answered_by = ", ".join(f"{label}: {count}" for label, count in dev["fits"].items())
        lines.append(f"dev: EM {pct(dev['em'])} on {dev['questions']} questions (fits used: {answered_by})")
    trained.save(out)
    lines.append(f"weights written to {out}")
    return "\n".join(lines)


def _fit_lines(voter: JudgeVoter, reports: list[FitReport], beyond: Unanswerable | None) -> list[str]:
    """Each fit's chosen setting, its EM out of fold and its thresholds; what they hold for beyond the corpus."""
    lines = []
    for report, fit in zip(reports, voter.fits_, strict=True):
        lines.append(f"  {report.level:<16} {report.chosen:<52} EM {pct(report.table[report.chosen])} out of fold")
        risks = {round(float(row["alpha"]), 6): row for row in fit.thresholds_}
        shown = [_risk_text(risks[r]) for r in REPORTED_RISKS if r in risks]
        lines.append(f"  {'':<16} P(right) thresholds: {'; '.join(shown)}")
        if beyond is not None:  # out of fold, each kind of training question answered at each threshold
            for r in (r for r in REPORTED_RISKS if r in risks and risks[r]["threshold"] is not None):
                answered = np.nan_to_num(report.probability, nan=-1.0) >= risks[r]["threshold"]
                lines.append(f"  {'':<16}   α {significant(r)}: answers {answered_by_kind(answered, report.kind)}")
    if beyond is not None:
        counts = {kind: int((beyond.kind == kind).sum()) for kind in (ABLATED, NOCORPUS)}
        lines.append(
            f"  beyond the corpus: {counts[ABLATED]} ablated and {counts[NOCORPUS]} no-corpus questions; thresholds "
            f"for a mix with a share {significant(beyond.share)} of questions the corpus cannot answer"
        )
    return lines


def _risk_text(row: dict[str, Any]) -> str:
    if row["threshold"] is None:
        return f"α {significant(row['alpha'])}: abstain on all"
    of = "" if row.get("share") is None else " of the mix"  # a threshold for a mix: its coverage there
    return f"α {significant(row['alpha'])}: P ≥ {fixed(row['threshold'], 2)} answers {pct(row['coverage'])}%{of}"
