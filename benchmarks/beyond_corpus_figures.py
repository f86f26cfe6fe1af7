"""The figures of docs/abstention.md, "Beyond the corpus": a frozen weights file scored once on all 414 dev questions
(answerable) and the 200 no-corpus questions kept for figures, at a risk. A judge voter's file (voters.judge_selector)
answers the records' scored candidates, as `eor ask` with its config would; a cascade ending with the judge stops
at a step or, where it runs to its end, has the judge its file names choose among them.

At the weights file's threshold for the risk (each question by its own P(right) fit's): on dev, the coverage and
the error among answered; on the no-corpus questions, the share answered; on a mix with a share s of no-corpus
questions (each kind's rates weighted: (1 − s) · dev's + s · the no-corpus'), the error among answered at s = 0.1,
0.33 (the natural 200 of 614), 0.5 and the file's own share; ECE of P(right) on the natural mix (the 614 pooled);
and of the declines, how many say "not in the documents" and how many of those are no-corpus questions.

    python -m benchmarks.beyond_corpus_figures --weights docs/weights/nq-offline-cascade.json \
        --config configs/nq-offline.yaml [--dev docs/records/nq-dev.jsonl.gz]
        [--nocorpus docs/records/nq-nocorpus-kept200.jsonl.gz] [--risk 0.3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import numpy as np

from eor.core.config import load_config
from eor.core.correctness import correctness_matrix
from eor.evaluation.bench.vote import Vote, vote
from eor.evaluation.selective import clopper_pearson, ece
from eor.learning.judge_training import judged_questions, without_scores
from eor.pipeline.abstention import NOT_IN_DOCUMENTS, abstention
from eor.runs.records import read_records
from eor.runs.run_data import RunData, load_run
from voters.judge_selector import JudgeVoter
from voters.judge_step import LAST_STEP, StepRisk, ends_with_judge
from voters.loading import load_voter
from voters.right import RightModel
from voters.weights_file import read_document

SHARES = (0.1, 0.33, 0.5)


def decisions(data: RunData, weights: str, risk: float) -> dict[str, np.ndarray]:
    """Per question: right, answered at `risk`, P(right), and whether a decline says "not in the documents"."""
    chosen: Vote = vote(data, weights)
    model = RightModel.from_voter(chosen.voter)
    if model is None or chosen.probability is None or chosen.fits is None:
        raise SystemExit(f"{weights} holds no P(right)")
    right = correctness_matrix(data.answers, data.golds, "em")[np.arange(data.questions), chosen.chosen] >= 0.5
    unanswerable = chosen.unanswerable if chosen.unanswerable is not None else np.full(data.questions, np.nan)
    verdicts = [
        abstention(model.fit(str(fit)), float(p), risk, weights, None if np.isnan(u) else float(u))
        for p, fit, u in zip(chosen.probability, chosen.fits, unanswerable, strict=True)
    ]
    return {
        "right": right,
        "answered": np.array([not v.abstained for v in verdicts]),
        "probability": np.asarray(chosen.probability, dtype=float),
        "absent": np.array([v.kind == NOT_IN_DOCUMENTS for v in verdicts]),
        "share": np.array([np.nan if v.share is None else v.share for v in verdicts]),
    }


def judge_decisions(path: str, weights: str, risk: float) -> dict[str, np.ndarray]:
    """`decisions` of a judge voter's weights file (voters.judge_selector) on the scored records `path`: each
    question's candidates chosen by the fit for what its scores hold, declined below that fit's threshold."""
    voter = load_voter(weights, kind="judge")
    made = voter.metadata_.get("candidates") or {}
    records = [record for record in read_records(path) if record.answers]
    questions = judged_questions(
        records, voter.members, made.get("rule"), int(made.get("k", 10)), relevance=voter.reads_retrieval
    )
    found: dict[str, list[Any]] = {key: [] for key in ("right", "answered", "probability", "absent", "share")}
    for question in questions:
        choice, fit = voter.choose(question.features)
        p = math.nan if choice is None or choice.probability is None else choice.probability
        u = None if choice is None else fit.unanswerable(choice.evidence)
        verdict = abstention(fit, p, risk, weights, u)
        found["right"].append(choice is not None and bool(question.right[choice.index]))
        found["answered"].append(not verdict.abstained)
        found["probability"].append(0.0 if math.isnan(p) else p)  # no choice: never right, never answered
        found["absent"].append(verdict.kind == NOT_IN_DOCUMENTS)
        found["share"].append(math.nan if verdict.share is None else verdict.share)
    return _arrays(found)


def judge_cascade_decisions(path: str, weights: str, members: list[str], risk: float) -> dict[str, np.ndarray]:
    """`decisions` of a cascade ending with the judge (eor.learning.judge_cascade) on the scored records `path`: the
    step it stops at, declined below that step's fit's threshold, or where it runs to its end the judge its file
    names (`meta.last_step.weights`, answering with the fit for what the step scored), declined below the
    thresholds chosen for the judge's share (`meta.last_step.risk`)."""
    data = load_run(path, members)
    chosen = vote(data, weights, with_judge=True)
    model, cascade = RightModel.from_voter(chosen.voter), chosen.voter
    entry = ends_with_judge(cascade) or {}
    late = StepRisk.of(cascade)
    if model is None or late is None or chosen.probability is None or chosen.fits is None or chosen.stops is None:
        raise SystemExit(f"{weights} is not a cascade ending with the judge with P(right)")
    judge = load_voter(entry["weights"], kind="judge")
    fit = judge.fit_scoring(frozenset(entry["scored"]))
    made = judge.metadata_.get("candidates") or {}
    by_id = {record.id: record for record in read_records(path)}
    questions = judged_questions(
        [by_id[i] for i in data.ids],
        judge.members_,
        made.get("rule"),
        int(made.get("k", 10)),
        relevance=judge.reads_retrieval,
    )
    ended = chosen.stops == len(cascade.steps_) - 1
    early = correctness_matrix(data.answers, data.golds, "em")[np.arange(data.questions), chosen.chosen] >= 0.5
    unanswerable = chosen.unanswerable if chosen.unanswerable is not None else np.full(data.questions, np.nan)
    found: dict[str, list[Any]] = {key: [] for key in ("right", "answered", "probability", "absent", "share")}
    for q, question in enumerate(questions):
        if ended[q]:
            choice = fit.choose(without_scores(question, fit.needs).features)
            p = math.nan if choice is None or choice.probability is None else choice.probability
            u = None if choice is None else fit.unanswerable(choice.evidence)
            verdict = abstention(late, p, risk, weights, u)
            right = choice is not None and bool(question.right[choice.index])
        else:
            p, u = float(chosen.probability[q]), None if np.isnan(unanswerable[q]) else float(unanswerable[q])
            verdict = abstention(model.fit(str(chosen.fits[q])), p, risk, weights, u)
            right = bool(early[q])
        found["right"].append(right)
        found["answered"].append(not verdict.abstained)
        found["probability"].append(0.0 if math.isnan(p) else p)
        found["absent"].append(verdict.kind == NOT_IN_DOCUMENTS)
        found["share"].append(math.nan if verdict.share is None else verdict.share)
    return _arrays(found)


def _arrays(found: dict[str, list[Any]]) -> dict[str, np.ndarray]:
    return {
        key: np.asarray(values, dtype=bool if key in ("right", "answered", "absent") else float)
        for key, values in found.items()
    }


def figures(dev: dict[str, np.ndarray], nocorpus: dict[str, np.ndarray]) -> dict[str, Any]:
    """The section's figures from the two kinds' decisions (see the module)."""

    def rates(kind: dict[str, np.ndarray]) -> tuple[float, float]:
        n = len(kind["right"])
        return float((kind["answered"] & ~kind["right"]).sum() / n), float(kind["answered"].sum() / n)

    (wrong_dev, cover_dev), (wrong_u, cover_u) = rates(dev), rates(nocorpus)
    shares = sorted({*SHARES, *[float(s) for s in dev["share"][~np.isnan(dev["share"])][:1]]})
    mixed = {}
    for s in shares:
        covered = (1 - s) * cover_dev + s * cover_u
        mixed[f"{s:g}"] = None if covered == 0 else ((1 - s) * wrong_dev + s * wrong_u) / covered
    answered_dev = int(dev["answered"].sum())
    errors_dev = int((dev["answered"] & ~dev["right"]).sum())
    pooled_p = np.concatenate([dev["probability"], nocorpus["probability"]])
    pooled_right = np.concatenate([dev["right"], nocorpus["right"]])
    declined = np.concatenate([~dev["answered"], ~nocorpus["answered"]])
    absent = np.concatenate([dev["absent"], nocorpus["absent"]])
    is_nocorpus = np.concatenate([np.zeros(len(dev["right"]), bool), np.ones(len(nocorpus["right"]), bool)])
    named = declined & absent
    return {
        "dev": {
            "questions": len(dev["right"]),
            "right": float(dev["right"].mean()),
            "coverage": cover_dev,
            "answered": answered_dev,
            "error": None if not answered_dev else errors_dev / answered_dev,
            "error_95": list(clopper_pearson(errors_dev, answered_dev)) if answered_dev else None,
        },
        "nocorpus": {
            "questions": len(nocorpus["right"]),
            "right": float(nocorpus["right"].mean()),
            "answered": cover_u,
            "answered_count": int(nocorpus["answered"].sum()),
            "wrong_among_answered": None
            if not nocorpus["answered"].any()
            else float((~nocorpus["right"][nocorpus["answered"]]).mean()),
        },
        "mix_error": mixed,
        "ece_natural_mix": float(ece(pooled_p, pooled_right)),
        "declines": {
            "declined": int(declined.sum()),
            "not_in_documents": int(named.sum()),
            "of_them_no_corpus": int((named & is_nocorpus).sum()),
            "no_corpus_declined": int((declined & is_nocorpus).sum()),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", required=True, help="the frozen weights file")
    parser.add_argument("--config", required=True, help="the pool's config (its members)")
    parser.add_argument("--dev", default="docs/records/nq-dev.jsonl.gz", help="the answerable held-out records")
    parser.add_argument("--nocorpus", default="docs/records/nq-nocorpus-kept200.jsonl.gz", help="the kept no-corpus")
    parser.add_argument("--risk", type=float, default=0.3, help="the error rate asked for (default 0.3)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    members = load_config(args.config).members
    document = read_document(args.weights)
    paths = (args.dev, args.nocorpus)
    if document.get("voter") == JudgeVoter.kind:
        found = figures(*(judge_decisions(path, args.weights, args.risk) for path in paths))
    elif (document.get("meta") or {}).get(LAST_STEP):
        found = figures(*(judge_cascade_decisions(path, args.weights, members, args.risk) for path in paths))
    else:
        found = figures(
            decisions(load_run(args.dev, members), args.weights, args.risk),
            decisions(load_run(args.nocorpus, members), args.weights, args.risk),
        )
    found = {"weights": args.weights, "risk": args.risk, **found}
    print(json.dumps(found, indent=1))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(found, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
