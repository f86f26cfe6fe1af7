"""Probe (issue 60): is the judge voter's linear learner what limits its choice? Out of fold on the training
records alone (never dev).

The judge voter ranks a question's candidates by an L2 logistic regression on standardised features
(voters.judge_selector.JudgeSelector). Beside it, on the same candidates, the same feature columns and the same
folds, a learner that models interactions between the features (scikit-learn's HistGradientBoostingClassifier at
its defaults, seeded; no setting searched): each held-out question answered by the candidate of highest score
among those that compete. One setting, the one `eor train --voter judge` chose on the 1,566 pointed training
questions (`--families`, `--spans`), at several fold seeds; the paired difference with a 95% bootstrap interval.

    python -m benchmarks.judge_learner docs/records/nq-train-pointed.jsonl.gz \
        docs/records/nq-train-rest-pointed.jsonl.gz --config configs/nq-judge-pointed.yaml \
        [--families votes,evidence,scores,type] [--spans 10] [--seeds 0,1,2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

from eor.core.atomic import write_text_atomically
from eor.core.config import load_config
from eor.evaluation.stats import Bootstrap
from eor.learning.judge_training import JudgedQuestion, Setting, accuracy, judged_questions
from eor.runs.records import read_records
from voters.folds import cross_fit, folds
from voters.judge_features import JudgeFeatures
from voters.judge_selector import JudgeSelector

#: bootstrap resamples of a paired difference's interval
RESAMPLES = 2000


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="scored training records (run folders or .jsonl[.gz]), read as one")
    parser.add_argument("--config", required=True, help="the pool's config (its members)")
    parser.add_argument("--families", default="votes,evidence,scores,type", help="the fit's feature families")
    parser.add_argument("--spans", type=int, default=10, help="how many span candidates compete")
    parser.add_argument("--seeds", default="0,1,2", help="fold seeds, comma-separated")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--json", help="write the table here")
    return parser.parse_args(argv)


def boosted_choices(
    questions: Sequence[JudgedQuestion], linear: JudgeSelector, train: np.ndarray, held: np.ndarray
) -> dict[int, int | None]:
    """Each held-out question's chosen candidate by gradient boosting fitted on the `train` questions' competing
    candidates, on the columns the fitted logistic `linear` reads."""
    rows, labels = [], []
    for i in train:
        features = questions[i].features
        kept = linear.competing(features)
        rows.append(_columns(features, linear)[kept])
        labels.append(questions[i].right[kept])
    model = HistGradientBoostingClassifier(random_state=0).fit(np.vstack(rows), np.concatenate(labels))
    chosen: dict[int, int | None] = {}
    for i in held:
        features = questions[i].features
        kept = linear.competing(features)
        if not kept.any():
            chosen[int(i)] = None
            continue
        scores = np.where(kept, model.decision_function(_columns(features, linear)), -np.inf)
        chosen[int(i)] = int(np.argmax(scores))
    return chosen


def _columns(features: JudgeFeatures, linear: JudgeSelector) -> np.ndarray:
    return features.matrix[:, [features.names.index(name) for name in linear.names_]]


def compare(questions: Sequence[JudgedQuestion], setting: Setting, parts: Sequence[np.ndarray]) -> dict[str, Any]:
    """Out of fold on `parts`: each question right (1.0) or not by the logistic and by gradient boosting."""
    linear_choices: list[Any] = [None] * len(questions)
    boosted: dict[int, int | None] = {}

    def fit(train: np.ndarray) -> tuple[JudgeSelector, np.ndarray]:
        picked = setting.build().fit([questions[i].features for i in train], [questions[i].right for i in train])
        return picked, train

    def answer(fitted: tuple[JudgeSelector, np.ndarray], held: np.ndarray) -> None:
        linear, train = fitted
        for i in held:
            linear_choices[i] = linear.choose(questions[i].features)
        boosted.update(boosted_choices(questions, linear, train, held))

    cross_fit(parts, np.arange(len(questions)), fit, answer)
    linear = accuracy(questions, linear_choices)
    boost = np.array([_right(q, boosted[i]) for i, q in enumerate(questions)])
    return {"logistic": linear, "boosting": boost}


def _right(question: JudgedQuestion, index: int | None) -> float:
    return float(index is not None and bool(question.right[index]))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    members = load_config(args.config).members
    records = [record for path in args.records for record in read_records(path) if record.answers]
    questions = judged_questions(records, members)
    setting = Setting(tuple(args.families.split(",")), args.spans)
    print(f"{len(questions)} training questions, {setting.build().label}, {args.folds}-fold cross-validation, EM:")
    oracle = 100 * np.mean(
        [question.right[setting.build().competing(question.features)].any() for question in questions]
    )
    print(f"  oracle of the competing candidates {oracle:.1f}")
    table = []
    for seed in (int(s) for s in args.seeds.split(",")):
        started = time.perf_counter()
        hits = compare(questions, setting, folds(len(questions), args.folds, seed))
        difference = hits["boosting"] - hits["logistic"]
        low, high = (100 * v for v in Bootstrap.draw(len(questions), RESAMPLES, seed).interval(difference))
        row = {
            "seed": seed,
            "logistic": 100 * hits["logistic"].mean(),
            "boosting": 100 * hits["boosting"].mean(),
            "difference": 100 * difference.mean(),
            "low": low,
            "high": high,
            "seconds": time.perf_counter() - started,
        }
        table.append(row)
        print(
            f"  seed {seed}: logistic {row['logistic']:.1f}   gradient boosting {row['boosting']:.1f}   "
            f"difference {row['difference']:+.1f} [{low:+.1f}, {high:+.1f}]   {row['seconds']:.0f} s"
        )
    if args.json:
        document = {"setting": setting.build().label, "questions": len(questions), "oracle": oracle, "seeds": table}
        write_text_atomically(args.json, json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
