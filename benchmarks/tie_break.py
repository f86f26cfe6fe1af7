"""Ties between different answers, and whether another tie-break than today's would do better: cross-validated
on training records, never on dev.

The vote gives a tie to the first member in the pool's order (`voters.scoring.choose`). When the top score is
shared by members whose answers differ (after normalization), that order, not the evidence, picks the answer.
This script finds those questions and scores, out of fold, the tie-breaks a user could reasonably expect:

- `first`: today's rule, the pool's order;
- `accuracy`: the tied member that was right most often on the training folds;
- `weight`: the tied member with the highest learned retriever weight ω^r (a trained voter's; the pool's order
  for a uniform one, whose ω^r are all equal);
- `confidence`: the tied answer the reader was surest of (highest mean token log-probability; the pool's order
  where the records hold no confidence);
- `support`: the tied answer that most members gave (normalized), then the pool's order.

5 folds, seeded as `eor train`'s: `accuracy` learns its member ranking on the 4 training folds and is scored on
the 5th; with `--fit` the voter itself (the weights file's kind and settings, or the uniform voter's metrics) is
fitted on the 4 training folds too, so its ω^r and its ties are out of fold; without it the weights file is used
as it is. Every rule decides the same (tied) questions and leaves the others alone, so the comparison is
paired: each rule's score over all questions, on the tied ones, its change against `first` with a paired
bootstrap 95% interval, and the exact McNemar p.

    python -m benchmarks.tie_break docs/records/nq-train.jsonl.gz --config configs/nq-offline.yaml \\
        --weights docs/weights/nq-offline.json        # the paper's voter as shipped
    python -m benchmarks.tie_break docs/records/nq-train.jsonl.gz --config configs/nq-offline.yaml   # uniform
    python -m benchmarks.tie_break docs/records/nq-train.jsonl.gz --config configs/nq-offline.yaml \\
        --metrics em [--fit]                          # a uniform voter over EM alone [, and trained per fold]
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import clone

from eor.core.answers import normalize_answer
from eor.core.config import load_config
from eor.evaluation.stats import Bootstrap, paired_test
from eor.runs.run_data import RunData, load_run
from voters.batch import VoteBatch
from voters.folds import cross_fit, folds
from voters.loading import choose_voter
from voters.scoring import TIE_TOLERANCE

Rule = Callable[[int, list[int], np.ndarray, np.ndarray | None], int]
"""(question, its tied members, the training rows, the fold voter's ω^r or None) -> the member it chooses."""

FoldVoter = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray | None]]
"""(training rows, test rows) -> the test rows' decision scores and the voter's ω^r (None: it has none)."""


def tied_members(scores: np.ndarray) -> list[list[int]]:
    """Per question, the members whose score ties the best (voters.scoring.choose's tolerance), in pool order."""
    best = scores.max(axis=1, keepdims=True)
    tolerance = TIE_TOLERANCE * np.maximum(1.0, np.abs(best))
    return [[int(m) for m in np.flatnonzero(row)] for row in scores >= best - tolerance]


def rules(data: RunData, correct: np.ndarray) -> dict[str, Rule]:
    """The tie-breaks, each choosing one of the tied members of question q; later ties go to the pool's order."""
    normalized = [[normalize_answer(answer) for answer in row] for row in data.answers]

    def confidence(q: int, m: int) -> float:
        summary = data.confidence[q][m] if data.confidence else None
        value = (summary or {}).get("mean_logprob")
        return float(value) if value is not None else -np.inf

    def first(q: int, tied: list[int], train: np.ndarray, weights: np.ndarray | None) -> int:
        return tied[0]

    def accuracy(q: int, tied: list[int], train: np.ndarray, weights: np.ndarray | None) -> int:
        return max(tied, key=lambda m: (correct[train, m].mean(), -m))

    def weight(q: int, tied: list[int], train: np.ndarray, weights: np.ndarray | None) -> int:
        return tied[0] if weights is None else max(tied, key=lambda m: (weights[m], -m))

    def surest(q: int, tied: list[int], train: np.ndarray, weights: np.ndarray | None) -> int:
        return max(tied, key=lambda m: (confidence(q, m), -m))

    def most_given(q: int, tied: list[int], train: np.ndarray, weights: np.ndarray | None) -> int:
        counts = Counter(normalized[q])
        return max(tied, key=lambda m: (counts[normalized[q][m]], -m))

    return {"first": first, "accuracy": accuracy, "weight": weight, "confidence": surest, "support": most_given}


def study(data: RunData, fold_voter: FoldVoter, correct: np.ndarray, k: int = 5, seed: int = 0) -> dict[str, Any]:
    """Out-of-fold correctness (Q,) per rule, and the questions tied between different answers."""
    found = rules(data, correct)
    n = len(data.answers)
    chosen = {name: np.zeros(n, dtype=int) for name in found}
    differing: list[int] = []

    def broken(train: np.ndarray, test: np.ndarray) -> None:
        """The fold's voter (fitted on `train`) on `test`, and each rule breaking its ties (some read `train`)."""
        scores, weights = fold_voter(train, test)
        for q, tied in zip(test, tied_members(scores), strict=True):
            if len({normalize_answer(data.answers[q][m]) for m in tied}) > 1:
                differing.append(int(q))
            for name, rule in found.items():
                chosen[name][q] = rule(int(q), tied, train, weights)

    cross_fit(folds(n, k, seed), np.arange(n), lambda train: train, broken)
    rows = np.arange(n)
    return {"differing": sorted(differing), "right": {name: correct[rows, picks] for name, picks in chosen.items()}}


def voting_data(data: RunData, names: list[str]) -> RunData:
    """The run restricted to the voter's members, in its order."""
    columns = [data.names.index(name) for name in names]

    def pick(rows: list[list[Any]]) -> list[list[Any]]:
        return [[row[c] for c in columns] for row in rows]

    return RunData(
        names=names,
        ids=data.ids,
        answers=pick(data.answers),
        golds=data.golds,
        passages=pick(data.passages),
        joined=pick(data.joined),
        texts=data.texts,
        confidence=pick(data.confidence) if data.confidence else [],
    )


def report(result: dict[str, Any], metric: str) -> list[str]:
    """The table: each rule's score, on the tied questions, and against `first`."""
    first = result["right"]["first"]
    n, differing = len(first), result["differing"]
    lines = [
        f"tied between different answers: {len(differing)} questions ({100 * len(differing) / n:.1f}%)",
        f"{'rule':<11} {metric.upper():>6} {'on ties':>8} {'vs first':>9} {'95% interval':>16} {'McNemar p':>10}",
    ]
    resamples = Bootstrap.draw(n, seed=0)
    for name, right in result["right"].items():
        line = f"{name:<11} {100 * right.mean():6.1f} {100 * right[differing].mean() if differing else np.nan:8.1f}"
        if name != "first":
            test = paired_test(right, first, resamples)
            low, high = test["ci"]
            line += f" {100 * test['difference']:+9.1f} [{100 * low:+6.1f}, {100 * high:+6.1f}] {test['p_value']:10.3f}"
        lines.append(line)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="training records (a run folder, .jsonl or .jsonl.gz)")
    parser.add_argument("--config", help="the pool's config: its members, in its order (default: the records')")
    parser.add_argument("--weights", help="the voter's weights file (default: uniform weights)")
    parser.add_argument("--metrics", nargs="+", help="a uniform voter's similarity metrics (default Voter.uniform's)")
    parser.add_argument("--fit", action="store_true", help="fit the voter on each fold's 4 training folds")
    parser.add_argument("--metric", default="em", help="answer correctness (default em)")
    parser.add_argument("--seed", type=int, default=0, help="the folds' seed (default 0, as eor train's)")
    args = parser.parse_args(argv)
    members = list(load_config(args.config).members) if args.config else None
    data = load_run(args.records, members)
    uniform: dict[str, Any] = {"metrics": tuple(args.metrics)} if args.metrics else {}
    voter = choose_voter(Path(args.weights) if args.weights else None, data.names, sub_pool=True, **uniform)
    data = voting_data(data, list(voter.members_) if voter.members_ is not None else data.names)
    batch = VoteBatch(data.answers, data.passages, data.texts, golds=data.golds, confidence=data.confidence or None)
    correct = batch.correctness(args.metric)

    def fold_voter(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        fitted = clone(voter).fit(batch.take(train)) if args.fit else voter
        return fitted.decision_function(batch.take(test)), getattr(fitted, "retriever_weights_", None)

    result = study(data, fold_voter, correct, seed=args.seed)
    described = args.weights or f"uniform over {', '.join(voter.describe()['metrics'])}"
    fitted = ", fitted per fold" if args.fit else ""
    print(f"{args.records}: {len(data.ids)} questions, {len(data.names)} members, voter {described}{fitted}")
    print("\n".join(report(result, args.metric)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
