"""What the reader as judge adds, by cross-validation on scored training records alone (never dev).

Records that hold no scores (`eor run` without a `judge:` section) give the text-only rows alone.

Nested: an outer K-fold split by question (seeded); in each outer training part, `eor.learning.judge_training`
trains the judge voter exactly as `eor train` would (each level's setting chosen by its own inner
cross-validation, fitted, P(right) calibrated, abstention thresholds chosen), and the voter answers the
held-out part. Reported per level (the reader's scores under the members' prompts and the passages alone,
under the members' prompts only, none): EM, the settings the inner choices took, and P(right) on the held-out
answers (ECE; coverage and error at α = 0.3 with the thresholds chosen inside).

Beside them, out of fold on the same folds: Top R (the member best on the training part), the oracles of
the members' answers and of every candidate, today's answer selector (voters.selector on voters.features with
em, f1 and cosine, without confidence, as shipped), and fixed settings adding one feature family at a time,
with no span and with 10 (what each family and the spans add; not chosen by anything). Differences against
Top R are paired, with a 95% bootstrap interval (2,000 resamples of the questions).

With `--against OTHER`, records of the same questions whose candidates another judge scored (another span rule,
say), the nested judge voter is trained on those too, on the same folds, at each level both hold: its EM on each,
the oracle of each one's candidates, and the difference paired by question (these records' minus OTHER's).

    python -m benchmarks.judge_cv docs/records/nq-train.jsonl.gz --config configs/nq-offline.yaml
        [--seed 0] [--folds 5] [--json FILE] [--against OTHER]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from eor.core.config import EnsembleConfig, load_config
from eor.core.correctness import members_right
from eor.core.results import Record
from eor.evaluation.selective import ece
from eor.evaluation.stats import Bootstrap
from eor.evaluation.upper_bound import any_right, top_member
from eor.learning.judge_cascade import chat_tokenizer, scoring_costs
from eor.learning.judge_training import (
    LEVELS,
    JudgedQuestion,
    Setting,
    accuracy,
    choices_out_of_fold,
    judged_questions,
    train_fit,
    without_scores,
)
from eor.readers import build_reader
from eor.runs.costs import prompt_replay
from eor.runs.records import read_records
from eor.runs.run_data import load_run
from voters.batch import VoteBatch
from voters.folds import cross_fit, folds
from voters.judge_features import SCORED_FAMILIES
from voters.judge_selector import JudgeSelector
from voters.scoring import choose
from voters.selector import AnswerSelector, fit_on_features

ALPHA = 0.3
#: bootstrap resamples of a paired difference's interval
RESAMPLES = 2000
ABLATIONS = (
    ("votes",),
    ("votes", "evidence"),
    ("votes", "evidence", "type"),
    ("votes", "evidence", "scores"),
    ("votes", "evidence", "scores", "passages"),
    ("votes", "evidence", "type", "scores", "passages"),
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "records", help="records (a run folder or .jsonl[.gz]); the levels with scores need every record scored"
    )
    parser.add_argument("--config", required=True, help="the pool's config (its members)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--json", help="write the tables here")
    parser.add_argument(
        "--rates", default="281,60", help="the reader's prompt and generated tokens per second (default 281,60)"
    )
    parser.add_argument("--no-costs", action="store_true", help="leave out the costs (they load the reader)")
    parser.add_argument(
        "--against", help="records of the same questions scored by another judge: the nested voter on both, paired"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = load_config(args.config)
    members = config.members
    records = [r for r in read_records(args.records) if r.answers]
    questions = judged_questions(records, members)
    parts = folds(len(questions), args.folds, args.seed)
    rows, nested = _rows(args, members, records, questions, parts)
    base = rows["Top R"]
    print(f"{len(questions)} training questions, {args.folds}-fold cross-validation (seed {args.seed}), EM:")
    table = {}
    for name, hits in rows.items():
        low, high = _interval(hits - base, args.seed)
        gain = 100 * (hits - base).mean()
        table[name] = {"em": 100 * hits.mean(), "vs_top_r": gain, "low": low, "high": high}
        print(f"  {name:<58} {100 * hits.mean():5.1f}   vs Top R {gain:+5.1f} [{low:+.1f}, {high:+.1f}]")
    print(f"P(right) of the nested judge voter on the held-out answers (α = {ALPHA}):")
    for level, report in nested.items():
        print(
            f"  {level:<16} ECE {report['ece']:.3f}   coverage {100 * report['coverage']:.1f}%   "
            f"error {report['error']}   settings {', '.join(report['settings'])}"
        )
    against = None if args.against is None else _against(args, members, records, parts, rows)
    costs = None if args.no_costs else _costs(args.records, config, records, _rates(args.rates))
    if costs is not None:
        print(f"reader seconds per question at {args.rates} (prompt, generated tokens per second), every member run:")
        for name, seconds in costs.items():
            print(f"  {name:<30} {seconds:6.2f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(
                {
                    "questions": len(questions),
                    "seed": args.seed,
                    "rows": table,
                    "nested": nested,
                    "seconds": costs,
                    "against": against,
                },
                handle,
                indent=1,
            )
    return 0


def _rows(
    args: argparse.Namespace,
    members: list[str],
    records: list[Record],
    questions: list[JudgedQuestion],
    parts: list[np.ndarray],
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, Any]]]:
    """Each row's out-of-fold hits, and the nested judge voter's P(right) report per level."""
    scored = frozenset.intersection(*(q.features.scored for q in questions))  # what every question holds
    member_right = members_right(records, members)
    rows: dict[str, np.ndarray] = {"Top R": _top_r(member_right, parts)}
    rows["oracle (members)"] = member_right.any(axis=1).astype(float)
    rows["oracle (candidates)"] = any_right([q.right for q in questions])
    rows["today's selector"] = _todays_selector(args.records, members, records, parts)
    for families in ABLATIONS:
        if not set(families) & set(SCORED_FAMILIES) <= scored:
            continue
        for spans in (0, 10):
            rows[f"fixed {'+'.join(families)}, {spans} spans"] = _fixed(questions, families, spans, parts)
    nested = {}
    for level, level_families in LEVELS.items():
        if not set(level_families) & set(SCORED_FAMILIES) <= scored:
            continue
        hits, report = _nested(questions, level, parts, args.seed)
        rows[f"judge voter: {level} (nested)"] = hits
        nested[level] = report
    return rows, nested


def _against(
    args: argparse.Namespace,
    members: list[str],
    records: list[Record],
    parts: list[np.ndarray],
    rows: dict[str, np.ndarray],
) -> dict[str, Any]:
    """The nested judge voter on `args.against`'s records of the same questions, on the same folds, at each level
    both records hold, against these records' (`rows`): printed, and given back as the JSON's `against`."""
    other = [r for r in read_records(args.against) if r.answers]
    if [r.id for r in other] != [r.id for r in records]:
        raise SystemExit(f"{args.against}: not the same questions, in the same order, as {args.records}")
    theirs = judged_questions(other, members)
    scored = frozenset.intersection(*(q.features.scored for q in theirs))
    oracle = any_right([q.right for q in theirs])
    out: dict[str, Any] = {"records": args.against, "oracle": 100 * oracle.mean(), "levels": {}}
    print(f"against {args.against} (the same folds; these records' minus those, paired by question):")
    mine = rows["oracle (candidates)"]
    print(f"  {'oracle (candidates)':<30} {100 * mine.mean():5.1f} vs {100 * oracle.mean():5.1f}")
    for level, level_families in LEVELS.items():
        name = f"judge voter: {level} (nested)"
        if name not in rows or not set(level_families) & set(SCORED_FAMILIES) <= scored:
            continue
        hits, report = _nested(theirs, level, parts, args.seed)
        low, high = _interval(rows[name] - hits, args.seed)
        gain = 100 * (rows[name] - hits).mean()
        out["levels"][level] = {"em": 100 * hits.mean(), "difference": gain, "low": low, "high": high, **report}
        ems = f"{100 * rows[name].mean():5.1f} vs {100 * hits.mean():5.1f}"
        print(f"  {name:<30} {ems}   {gain:+.1f} [{low:+.1f}, {high:+.1f}]")
    return out


def _rates(text: str) -> dict[str, float]:
    prompt, generated = (float(value) for value in text.split(","))
    return {"prompt": prompt, "generated": generated}


def _costs(path: str, config: EnsembleConfig, records: list[Record], rates: dict[str, float]) -> dict[str, float]:
    """Mean reader seconds per question at `rates`: every member's answer replayed in pool order
    (eor.runs.costs.prompt_replay), and the judge's scoring at each level (eor.learning.judge_cascade.scoring_costs)
    where every record holds scores."""
    tokenize = chat_tokenizer(build_reader(config.reader))
    chunk = config.reader.llama_cpp.prefix_chunk
    run = load_run(path, config.members)
    rows = [run.ids.index(record.id) for record in records]
    members = prompt_replay(run, tokenize, rates, chunk).spent(range(len(config.members)))[rows]
    out = {"members": float(members.mean())}
    if any(record.judge is None for record in records):
        return out
    for level, passages in (("scores", False), ("scores+passages", True)):
        out[f"+ scoring: {level}"] = float(scoring_costs(records, config, tokenize, rates, passages=passages).mean())
    return out


def _top_r(member_right: np.ndarray, parts: list[np.ndarray]) -> np.ndarray:
    hits = np.zeros(len(member_right))

    def best_member(train: np.ndarray) -> int:
        return top_member(member_right[train])

    def answered(best: int, held: np.ndarray) -> None:
        hits[held] = member_right[held, best]

    cross_fit(parts, np.arange(len(member_right)), best_member, answered)
    return hits


def _fixed(questions: list[JudgedQuestion], families: Sequence[str], spans: int, parts: list[np.ndarray]) -> np.ndarray:
    return accuracy(questions, choices_out_of_fold(questions, Setting(tuple(families), spans), parts))


def _nested(
    questions: list[JudgedQuestion], level: str, parts: list[np.ndarray], seed: int
) -> tuple[np.ndarray, dict[str, Any]]:
    """The level's fit trained on each outer training part (inner choice, calibration, thresholds) answering the
    held-out part; its hits, and P(right) on the held-out answers."""
    hits = np.zeros(len(questions))
    probability = np.full(len(questions), np.nan)
    answered = np.zeros(len(questions), dtype=bool)
    settings = []

    def trained(train: np.ndarray) -> JudgeSelector:
        fit, report = train_fit([questions[i] for i in train], level, seed=seed)
        settings.append(report.chosen)
        return fit

    def held_out(fit: JudgeSelector, held: np.ndarray) -> None:
        threshold = next((t["threshold"] for t in fit.thresholds_ if abs(t["alpha"] - ALPHA) < 1e-9), None)
        test = [without_scores(questions[i], fit.families) for i in held]
        choices = [fit.choose(q.features) for q in test]
        hits[held] = accuracy(test, choices)
        for i, choice in zip(held, choices, strict=True):
            if choice is not None:
                probability[i] = choice.probability
                answered[i] = threshold is not None and choice.probability >= threshold

    cross_fit(parts, np.arange(len(questions)), trained, held_out)
    known = ~np.isnan(probability)
    right = hits.astype(bool)
    n_answered = int(answered.sum())
    return hits, {
        "ece": ece(probability[known], right[known]),
        "coverage": n_answered / len(questions),
        "error": None if not n_answered else round(float(1 - right[answered].mean()), 3),
        "settings": settings,
    }


def _todays_selector(path: str, members: list[str], records: list[Record], parts: list[np.ndarray]) -> np.ndarray:
    """Today's answer selector (voters.selector.fit_on_features on voters.features with em, f1 and cosine,
    without confidence, as the shipped selectors), out of fold on the same parts."""
    run = load_run(path, members)
    rows = [run.ids.index(record.id) for record in records]
    batch = VoteBatch(run.answers, run.passages, run.texts, golds=run.golds).take(rows)
    blocks, at = batch.blocks(["em", "f1", "cosine"], confidence=False)
    features = blocks.features(range(len(members)), members)
    matrix = features.matrix[at]
    labels = batch.correctness("em") >= 0.5
    hits = np.zeros(len(matrix))

    def fitted(train: np.ndarray) -> AnswerSelector:
        selector = AnswerSelector(metrics=["em", "f1", "cosine"], C=1.0)
        fit_on_features(selector, type(features)(features.names, matrix[train]), labels[train], list(members))
        return selector

    def answered(selector: AnswerSelector, held: np.ndarray) -> None:
        chosen = choose(selector.feature_scores(matrix[held]))
        hits[held] = labels[held][np.arange(len(held)), chosen]

    cross_fit(parts, np.arange(len(matrix)), fitted, answered)
    return hits


def _interval(difference: np.ndarray, seed: int) -> tuple[float, float]:
    """The bootstrap 95% interval of the mean difference, in points (eor.evaluation.stats, 2000 resamples)."""
    low, high = Bootstrap.draw(len(difference), RESAMPLES, seed).interval(difference)
    return 100 * low, 100 * high


if __name__ == "__main__":
    raise SystemExit(main())
