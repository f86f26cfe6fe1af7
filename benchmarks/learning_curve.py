"""What data buys each voter (issue 60, item 2): its out-of-fold exact match, and a cascade's reader seconds, when
trained on 300, 600, 1,000 and all the other folds' training questions.

K folds of the training questions (voters.folds, seeded). For each held-out fold every voter is fitted on the
first n questions of the other folds in one seeded permutation of all the questions (so the 300 are among the
600, and so on; a size above what the other folds hold is all of them) and answers the held-out fold, through
voters.folds.cross_fit, the one fold engine. A cascade is charged member after member in its own order
(eor.runs.costs.with_replay) where `--config` names a llama.cpp reader. Records and the reader's tokenizer only.

    python -m benchmarks.learning_curve docs/records/nq-train.jsonl.gz docs/records/nq-train-rest.jsonl.gz \
        --config configs/nq-offline.yaml --voters selector,cascade [--judge-config configs/nq-judge.yaml] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from eor.learning.crossval import VoteArrays, VoteSettings, build_candidate, vote_arrays
from eor.learning.judge_cascade import reader_tokens
from eor.learning.judge_training import JudgedQuestion, accuracy, judged_questions, train_fit, without_scores
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.costs import with_replay
from eor.runs.records import read_records
from eor.runs.run_data import load_runs
from voters.folds import cross_fit, folds
from voters.judge_selector import JudgeSelector

SIZES = (300, 600, 1000, 100_000)  # the last: every question of the other folds


def sized(
    n: int,
    label: str,
    fit: Callable[[np.ndarray], Any],
    answer: Callable[[Any, np.ndarray], tuple[np.ndarray, np.ndarray | None]],
    sizes: tuple[int, ...] = SIZES,
    k: int = 5,
    seed: int = 0,
) -> list[dict[str, float]]:
    """Per size: `fit(kept)` on the first `size` questions of each fold's training part (in one seeded
    permutation of the n questions), `answer(fitted, held)` → (right, cost or None) on the held-out fold; the
    questions fitted on (mean over the folds), the out-of-fold EM and, where there is a cost, its mean."""
    parts = folds(n, k, seed)
    rank = np.empty(n, dtype=int)
    rank[np.random.default_rng(seed).permutation(n)] = np.arange(n)  # the order every size takes its first n in
    rows = []
    for size in sizes:
        used: list[int] = []

        def fitted(train: np.ndarray, size: int = size, used: list[int] = used) -> Any:
            kept = np.sort(train[np.argsort(rank[train], kind="stable")][:size])
            used.append(len(kept))
            return fit(kept)

        found = cross_fit(parts, np.arange(n), fitted, answer)
        right = np.concatenate([r for r, _ in found])
        row = {"trained_on": float(np.mean(used)), "em": float(right.mean())}
        if found[0][1] is not None:
            row["seconds"] = float(np.mean(np.concatenate([c for _, c in found if c is not None])))
        rows.append(row)
        cost = f", {row['seconds']:.2f} s" if "seconds" in row else ""
        print(f"{label}: {row['trained_on']:.0f} questions: EM {100 * row['em']:.1f}{cost}", flush=True)
    return rows


def curve(arrays: VoteArrays, voter: str, settings: VoteSettings, k: int = 5, seed: int = 0) -> list[dict[str, float]]:
    """An `eor train` voter's curve: its out-of-fold EM and mean cost per question (the members it ran)."""

    def answered(candidate: Any, held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        chosen, cost = candidate.answer(arrays, held)
        return arrays.correctness[held, chosen] >= 0.5, np.asarray(cost, dtype=float)

    def fit(kept: np.ndarray) -> Any:
        return build_candidate(voter, settings).fit(arrays, kept)

    return sized(arrays.questions, voter, fit, answered, k=k, seed=seed)


def judge_curve(questions: list[JudgedQuestion], k: int = 5, seed: int = 0) -> list[dict[str, float]]:
    """The judge voter's curve (under the members' prompts, as configs/nq-judge.yaml answers), trained as `eor
    train --voter judge` trains it."""

    def answered(fit: JudgeSelector, held: np.ndarray) -> tuple[np.ndarray, None]:
        test = [without_scores(questions[i], fit.families) for i in held]
        return accuracy(test, [fit.choose(q.features) for q in test]), None

    def fit(kept: np.ndarray) -> JudgeSelector:
        return train_fit([questions[i] for i in kept], "scores", seed=seed)[0]

    return sized(len(questions), "judge", fit, answered, k=k, seed=seed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="the training records (several: read as one)")
    parser.add_argument("--config", required=True, help="the pool's config (its members and reader)")
    parser.add_argument("--voters", default="selector,cascade", help="eor train's voters, comma-separated")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--judge-config", help="also the judge voter's curve, its pool's config (configs/nq-judge.yaml)"
    )
    parser.add_argument("--json", help="write the curves here")
    args = parser.parse_args(argv)
    config = load_valid_config(args.config)
    data = load_runs(args.records, config.members)
    settings = VoteSettings(max_loss=0.005, confidence=False)  # eor train --max-loss 0.5 --no-confidence
    arrays = vote_arrays(data, settings)
    if arrays.costs is not None and arrays.costs.unit == "tokens":  # a cascade charged as it runs its members
        replayed = with_replay(arrays.costs, data, reader_tokens(build_reader(config.reader), config))
        arrays = replace(arrays, costs=replayed)
    curves = {voter: curve(arrays, voter, settings, k=args.folds, seed=args.seed) for voter in args.voters.split(",")}
    if args.judge_config:
        members = load_valid_config(args.judge_config).members
        labelled = [r for path in args.records for r in read_records(path) if r.answers]
        curves["judge"] = judge_curve(judged_questions(labelled, members), k=args.folds, seed=args.seed)
    if args.json:
        document = {"records": args.records, "questions": data.questions, "folds": args.folds, "curves": curves}
        Path(args.json).write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
