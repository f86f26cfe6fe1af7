"""`eor train --voter judge`: the judge voter (voters.judge_selector) trained on run records whose questions the
reader scored (`eor run` with a `judge:` section, eor.commands.judge_records), written as a weights file.

The policy is eor.learning.judge_training's (each level's setting chosen by cross-validation on the training
records alone, fitted, P(right) calibrated out of fold, abstention thresholds chosen), the data and the weights
file's metadata eor.learning.judge_data's (which judge scored the records, the members, the questions the corpus
cannot answer, Top R); this command orchestrates and reports. Records without scores train the text-only fit
alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eor.commands.train_report import REPORTED_RISKS, answered_by_kind
from eor.core.formatting import fixed, pct, significant, small_data_warning
from eor.learning.beyond_corpus import ABLATED, NOCORPUS
from eor.learning.judge_data import (
    beyond_meta,
    held_out,
    judge_identity,
    load_unanswerable,
    scored_rule,
    top_r,
    trained_members,
    training_meta,
)
from eor.learning.judge_training import JudgedQuestion, Unanswerable, accuracy, judged_questions, train_judge_voter
from eor.pipeline.abstention import DEFAULT_SHARE
from eor.pipeline.members import demonstration_ids
from eor.pipeline.pool import runs_pool
from eor.pipeline.validation import load_valid_config
from eor.runs.run_data import named_runs, read_runs, run_paths
from voters.codecs import save_voter
from voters.judge_selector import JudgeVoter

log = logging.getLogger(__name__)


def train_judge(
    records: Path | Sequence[Path],
    out: Path,
    *,
    pool_config: Path | None = None,
    members: list[str] | None = None,
    folds: int = 5,
    seed: int = 0,
    dev: Path | None = None,
    ablated: Path | Sequence[Path] | None = None,
    nocorpus: Path | None = None,
    share: float = DEFAULT_SHARE,
    retrieval: bool | None = None,
) -> str:
    """Train the judge voter on `records` (several runs: read as one, their pools the same; members: `members`,
    else the pool config's, else those the records' scores were made for), save it as the weights file `out` and
    give back the report's lines. `ablated`, `nocorpus`: records of questions the corpus cannot answer (ablated
    copies of training questions; real ones), for P(right) beyond the corpus and thresholds for a mix with `share`
    of them (eor.learning.judge_training.fit_beyond). `retrieval`: whether P(right) reads the retrieved passages'
    relevance (None: beyond the corpus, as cross-validation on training chose, docs/abstention.md)."""
    relevance = (ablated is not None or nocorpus is not None) if retrieval is None else retrieval
    config = None if pool_config is None else load_valid_config(pool_config)  # the door
    runs = run_paths(records)
    source = ", ".join(map(str, runs))
    pool = runs_pool(runs)  # before any work: runs of different pools are refused
    loaded = [record for record in read_runs(runs) if record.answers]
    identity = judge_identity(loaded, source)
    names = trained_members(config, members, identity, loaded, runs)
    skip = demonstration_ids(config) if config is not None else set()
    rule_k = scored_rule(identity)
    questions = judged_questions([r for r in loaded if r.id not in skip], names, *rule_k, relevance=relevance)
    if warning := small_data_warning(len(questions), "training the judge voter"):
        log.warning(warning)
    beyond = load_unanswerable(ablated, nocorpus, names, rule_k, skip, share, relevance)
    voter, reports = train_judge_voter(
        questions, names, k=folds, seed=seed, progress=log.info, beyond=beyond, retrieval=relevance
    )
    scored = sum(bool(q.features.scored) for q in questions)
    lines = [
        f"judge voter: {len(questions)} training questions ({scored} scored by the reader), members "
        f"{', '.join(names)}; every choice by {folds}-fold cross-validation (seed {seed})"
    ]
    lines += _fit_lines(voter, reports, beyond)
    rule, k = rule_k
    meta: dict[str, Any] = {
        "records": named_runs(runs),
        **({} if beyond is None else beyond_meta(ablated, nocorpus, share)),
        "judge": identity,
        "candidates": {"rule": rule, "k": k},  # what live answering must make them with (eor.pipeline.judging)
        "training": training_meta(len(questions), scored, folds, seed, reports),
        "top_r_train": top_r(loaded, names),
        **({} if pool is None else {"pool": pool}),
    }
    if dev is not None:
        lines += _dev_lines(voter, held_out(dev, source, identity, names, rule_k, relevance), meta)
    save_voter(voter, out, **meta)
    lines.append(f"weights written to {out}")
    return "\n".join(lines)


def _fit_lines(voter: JudgeVoter, reports: list[Any], beyond: Unanswerable | None) -> list[str]:
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


def _dev_lines(voter: JudgeVoter, questions: list[JudgedQuestion], meta: dict[str, Any]) -> list[str]:
    """The voter on held-out questions: EM, and how many each fit answered."""
    hits: list[float] = []
    used: dict[str, int] = {}
    for question in questions:
        choice, fit = voter.choose(question.features)
        hits.append(accuracy([question], [choice])[0])
        used[fit.label] = used.get(fit.label, 0) + 1
    em = float(np.mean(hits)) if hits else 0.0
    meta["dev"] = {"questions": len(questions), "em": em, "fits": used}
    answered_by = ", ".join(f"{label}: {count}" for label, count in used.items())
    return [f"dev: EM {pct(em)} on {len(questions)} questions (fits used: {answered_by})"]
