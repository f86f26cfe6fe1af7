"""Benchmark: a full voter fit on a precomputed similarity tensor vs. recomputing similarities per evaluation.

Synthetic data of the paper's size (NQ-like 1,566 questions, 16 members, metrics em, f1, cosine): member m is
right with probability p_m (0.15 .. 0.50); a wrong member picks one of four distractors of its question, some
of which share words with the gold answer. The batch's similarity tensor is built once (timed separately),
then `Voter.fit` on that batch runs the whole Nelder-Mead search with its restarts on it. For comparison, a handful of
objective evaluations that recompute the similarities (as a naive implementation would, with the encoder
already loaded and no disk cache) are timed and extrapolated to the number of evaluations the fit used.

    python -m benchmarks.bench_voter_fit [--questions 1566] [--members 16] [--metrics em,f1,cosine]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

import numpy as np

from eor.evaluation.upper_bound import top_member
from voters import VoteBatch, Voter, correctness_matrix, similarity_tensor
from voters.scoring import VoteScorer, choose

WORDS = (
    "river city king queen war battle song album film novel river mountain island church bridge station "
    "team league cup season party president minister council army navy empire republic kingdom state "
    "north south east west red blue green black white golden silver new old great little saint lake bay "
    "john mary james george william elizabeth charles henry paris london berlin rome madrid vienna tokyo"
).split()


def synthetic(n_questions: int, n_members: int, seed: int) -> tuple[list[list[str]], list[list[str]]]:
    rng = np.random.default_rng(seed)
    accuracy = np.linspace(0.15, 0.5, n_members)
    answers: list[list[str]] = []
    golds: list[list[str]] = []
    for _ in range(n_questions):
        gold = " ".join(rng.choice(WORDS, size=rng.integers(1, 4)))
        distractors = [
            " ".join(rng.choice(WORDS, size=rng.integers(1, 4))) if k % 2 else f"{gold.split()[0]} {rng.choice(WORDS)}"
            for k in range(4)
        ]
        row = [gold if rng.uniform() < accuracy[m] else distractors[rng.integers(4)] for m in range(n_members)]
        answers.append(row)
        golds.append([gold])
    return answers, golds


def recompute_seconds(
    args: argparse.Namespace, answers: list[list[str]], correct: np.ndarray, voter: Voter, fit_seconds: float
) -> None:
    """Time objective evaluations that recompute the similarities, extrapolated to the fit's evaluations."""
    metrics = tuple(args.metrics.split(","))
    evaluations = voter.n_evaluations_
    rows = np.arange(len(answers))

    def recomputing_objective(metric_weights: np.ndarray, retriever_weights: np.ndarray) -> float:
        fresh = similarity_tensor(answers, metrics)  # what the precomputed tensor saves, every evaluation
        scores = VoteScorer(fresh).scores(metric_weights, retriever_weights, pooling=args.pooling)
        return float(correct[rows, choose(scores)].mean())

    started = time.perf_counter()
    for _ in range(args.recompute_evals):
        recomputing_objective(voter.metric_weights_, voter.retriever_weights_)
    recompute_per_eval = (time.perf_counter() - started) / args.recompute_evals
    extrapolated = recompute_per_eval * evaluations
    print(
        f"objective recomputing similarities: {recompute_per_eval:.2f} s per evaluation "
        f"({args.recompute_evals} timed) -> {extrapolated:,.0f} s ({extrapolated / 3600:.2f} h) extrapolated "
        f"to {evaluations} evaluations"
    )
    print(f"ratio recompute / precomputed tensor: {extrapolated / fit_seconds:,.0f}x")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=1566)
    parser.add_argument("--members", type=int, default=16)
    parser.add_argument("--metrics", default="em,f1,cosine")
    parser.add_argument("--pooling", default="mean")
    parser.add_argument("--recompute-evals", type=int, default=2, help="evaluations timed with recomputation")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    metrics = tuple(args.metrics.split(","))
    print("command:", shlex.join([sys.executable, "-m", "benchmarks.bench_voter_fit", *sys.argv[1:]]))
    answers, golds = synthetic(args.questions, args.members, args.seed)
    correct = correctness_matrix(answers, golds)
    batch = VoteBatch(answers, golds=golds)
    started = time.perf_counter()
    tensor = batch.similarity(metrics)  # computed once: the fit below reads it
    build_seconds = time.perf_counter() - started
    shape = f"{args.questions} questions x {args.members} members x {len(metrics)} metrics"
    print(f"data: {shape} ({', '.join(metrics)})")
    print(f"similarity tensor built once: {build_seconds:.2f} s, shape {tensor.shape}")

    voter = Voter(metrics=metrics, pooling=args.pooling, seed=args.seed)
    started = time.perf_counter()
    voter.fit(batch)
    fit_seconds = time.perf_counter() - started
    evaluations = voter.n_evaluations_
    per_eval = fit_seconds / evaluations
    print(
        f"full fit on the tensor: {fit_seconds:.2f} s for {evaluations} objective evaluations "
        f"({per_eval * 1e3:.3f} ms each, search overhead included)"
    )
    uniform = Voter.uniform(args.members, metrics=metrics, pooling=args.pooling).score(batch)
    print(
        f"train EM: voter {voter.train_score_:.4f} (from start {voter.best_start_}), best single member "
        f"{correct.mean(axis=0)[top_member(correct)]:.4f}, uniform weights {uniform:.4f}; "
        f"{len(voter.active_members_)} of {args.members} members active"
    )

    recompute_seconds(args, answers, correct, voter, fit_seconds)
    print(f"fit under 10 s: {'yes' if fit_seconds < 10 else 'NO'}")


if __name__ == "__main__":
    main()
