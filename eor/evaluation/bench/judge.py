"""`eor bench` with a judge voter's weights file (voters.judge_selector): its answers on records whose candidates
the reader scored (`eor run` with a `judge:` section; records without scores are answered by the text fit),
beside the oracles of the members' answers and of the candidates, Top R (train: the member best on the voter's
training records) and, with `against`, another weights file's voter on the same records, paired (exact McNemar,
bootstrap interval of the difference); and the judge's P(right): calibration, and at each error rate its
fits' thresholds were chosen for, the share answered and the error among the answered.

Correctness is exact match against the gold answers (what the judge was trained and calibrated for).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.answers import matches_gold
from eor.core.correctness import members_right
from eor.core.errors import InputError
from eor.evaluation.bench.vote import vote
from eor.evaluation.selective import calibration_noise, summary
from eor.evaluation.stats import Bootstrap, paired_test
from eor.evaluation.upper_bound import any_right, oracle_accuracy
from eor.learning.judge_training import JudgedQuestion, candidate_rule, judged_questions, without_scores
from eor.runs.records import read_records
from eor.runs.run_data import load_run
from voters.judge_selector import JudgeVoter
from voters.loading import load_voter


def judge_report(
    records: str | Path,
    weights: str | Path,
    *,
    against: str | Path | None = None,
    seed: int = 0,
    resamples: int = 1000,
    scored: frozenset[str] | None = None,
) -> dict[str, Any]:
    """The report (JSON-ready) of the judge voter of `weights` on `records`; see the module. `scored`: the
    likelihood families live answering scores (a config's `judge:`, eor.learning.judge_cascade.scored_families;
    None: whatever the records hold), so that each question is answered by the fit the config would use."""
    voter = load_voter(weights, kind="judge")
    loaded = [record for record in read_records(records) if record.answers]
    if not loaded:
        raise InputError(f"{records}: no record has gold answers to benchmark on")
    judged = judge_choices(loaded, voter, records, scored)
    right = judged.right.astype(float)
    draws = Bootstrap.draw(len(right), resamples, seed)
    members = members_right(loaded, voter.members_)
    report: dict[str, Any] = {
        "kind": "judge",
        "records": str(records),
        "weights": str(weights),
        "questions": len(judged.questions),
        "scored": sum(bool(q.features.scored) for q in judged.questions),
        "fits_used": judged.used,
        "judge": {"em": float(right.mean()), "ci": draws.interval(right)},
        "oracle": {
            "members": oracle_accuracy(members.T),
            "candidates": float(any_right([q.right for q in judged.questions]).mean()),
        },
    }
    report.update(baselines(voter, records, loaded, right, members, draws, against))
    report["selective"] = selective(judged.probability, right.astype(bool), judged.thresholds, seed)
    return report


@dataclass
class JudgeChoices:
    """The judge voter on recorded questions: per question its candidates (eor.learning.judge_training), whether
    its choice is right, its P(right) (NaN without a choice) and its fit's abstention thresholds by error rate;
    how many questions each fit answered."""

    questions: list[JudgedQuestion]
    right: np.ndarray
    probability: np.ndarray
    thresholds: list[dict[float, Any]]
    used: dict[str, int]


def judge_choices(
    loaded: list[Any], voter: JudgeVoter, source: str | Path, scored: frozenset[str] | None = None
) -> JudgeChoices:
    """The judge voter's choice on each record of `loaded` (with gold answers), its candidates made as the
    voter's training made them (refused otherwise), scores limited to the families `scored` (None: all)."""
    rule, k = candidate_rule(voter, loaded, source)
    questions = judged_questions(loaded, voter.members_, rule, k, relevance=voter.reads_retrieval)
    if scored is not None:
        questions = [without_scores(question, scored) for question in questions]
    hits: list[bool] = []
    probability: list[float] = []
    used: dict[str, int] = {}
    thresholds: list[dict[float, Any]] = []
    for question in questions:
        choice, fit = voter.choose(question.features)
        hits.append(choice is not None and bool(question.right[choice.index]))
        probability.append(np.nan if choice is None or choice.probability is None else choice.probability)
        used[fit.label] = used.get(fit.label, 0) + 1
        thresholds.append({round(float(row["alpha"]), 6): row["threshold"] for row in fit.thresholds})
    return JudgeChoices(questions, np.asarray(hits, bool), np.asarray(probability, float), thresholds, used)


def baselines(
    voter: JudgeVoter,
    records: str | Path,
    loaded: list[Any],
    right: np.ndarray,
    members: np.ndarray,
    draws: Bootstrap,
    against: str | Path | None,
) -> dict[str, Any]:
    """Top R (train: the judge's training records' best member) and `against` (another weights file's voter
    on the same records), each with its EM and the paired test of `right` against it."""
    out: dict[str, Any] = {}
    top = (voter.metadata_.get("top_r_train") or {}).get("member")
    if top in voter.members_:
        column = members[:, voter.members_.index(top)]
        out["top_r_train"] = {"member": top, "em": float(column.mean()), "ci": draws.interval(column)}
        out["vs_top_r_train"] = paired_test(right, column, draws)
    if against is not None:
        other = _against(records, against, [r.id for r in loaded])
        out["against"] = {"weights": str(against), "em": float(other.mean()), "ci": draws.interval(other)}
        out["vs_against"] = paired_test(right, other, draws)
    return out


def _against(records: str | Path, weights: str | Path, ids: list[str]) -> np.ndarray:
    """Per question (in `ids`' order), whether the voter of `weights` (a member voter) answers it right."""
    data = load_run(records)
    voted = vote(data, weights)
    where = {question_id: q for q, question_id in enumerate(data.ids)}
    missing = [question_id for question_id in ids if question_id not in where]
    if missing:
        raise InputError(f"{records}: {len(missing)} questions have no record the voter of {weights} can read")
    chosen = [data.answers[where[i]][int(voted.chosen[where[i]])] for i in ids]
    golds = [data.golds[where[i]] for i in ids]
    return np.array([matches_gold(answer, gold) for answer, gold in zip(chosen, golds, strict=True)], dtype=float)


def selective(
    probability: np.ndarray, right: np.ndarray, thresholds: list[dict[float, Any]], seed: int
) -> dict[str, Any] | None:
    """P(right)'s calibration and, per error rate, each question's own fit's threshold applied."""
    known = ~np.isnan(probability)
    if not known.any():
        return None
    levels = []
    for alpha in sorted({alpha for row in thresholds for alpha in row}):
        answered = np.array(
            [
                p >= row[alpha] if row.get(alpha) is not None and not np.isnan(p) else False
                for p, row in zip(probability, thresholds, strict=True)
            ]
        )
        n = int(answered.sum())
        levels.append(
            {"alpha": alpha, "coverage": n / len(right), "error": None if not n else float(1 - right[answered].mean())}
        )
    return {
        **summary(probability[known], right[known]),
        "ece_noise": calibration_noise(probability[known], seed),
        "risk_levels": levels,
    }
