"""What the reader as judge adds, by cross-validation on scored training records alone (never dev): a logistic
regression over each question's candidates (voters.judge_selector on voters.judge_features), standardised, L2
(C = 1), the candidate with the highest log-odds chosen; folds by question (5, seeded). Feature families are
added one at a time, first over the members' answers alone, then with the span candidates; beside them Top R
(the member best on each training fold), the oracle of the members' answers and of all candidates. Differences
against Top R are paired, with a 95% bootstrap interval (2,000 resamples of the questions).

    python benchmarks/judge_cv.py runs/nq-train --config configs/nq-offline.yaml [--seed 0] [--json FILE]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

FAMILIES = {
    "agreement": ("wrote:", "agreement", "log_length"),
    "+ member prompts": ("wrote:", "agreement", "log_length", "lp:", "mean:", "mix:members", "rank:", "margin:"),
    "+ passages alone": (
        "wrote:", "agreement", "log_length", "lp:", "mean:", "mix:members", "rank:", "margin:", "mix:passages",
        "best:passages",
    ),
    "likelihood alone": ("mix:members", "mix:passages"),
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    from eor.core.answers import exact_match
    from eor.core.config import load_config
    from eor.runs.records import read_records
    from voters.judge_features import judge_features

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="records with the judge's scores (a run folder or .jsonl[.gz])")
    parser.add_argument("--config", required=True, help="the pool's config (its members)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--json", help="write the table here")
    args = parser.parse_args(argv)
    members = load_config(args.config).members
    records = [r for r in read_records(args.records) if r.judge is not None]
    if not records:
        raise SystemExit(f"{args.records}: no record holds the judge's scores (eor run with a judge: section)")
    questions = []
    for record in records:
        features = judge_features(record.judge, members)
        right = np.array([any(exact_match(t, g) for g in record.answers) for t in features.texts], dtype=bool)
        spans = features.matrix[:, features.names.index("span")] > 0
        member_right = [any(exact_match(record.members[m].answer, g) for g in record.answers) for m in members]
        questions.append((features, right, spans, np.array(member_right, dtype=bool)))
    n = len(questions)
    folds = np.random.default_rng(args.seed).permutation(n) % args.folds
    rows: dict[str, np.ndarray] = {}
    rows["Top R"] = _top_r(questions, folds, args.folds)
    rows["oracle (members)"] = np.array([q[3].any() for q in questions], dtype=float)
    rows["oracle (candidates)"] = np.array([q[1].any() for q in questions], dtype=float)
    for spans in (False, True):
        for family, prefixes in FAMILIES.items():
            label = f"{family}{' + spans' if spans else ''}"
            rows[label] = _cross_validated(questions, folds, args.folds, prefixes, spans)
    for label, (matrix, labels) in _selector_features(args.records, members, records, questions).items():
        rows[label] = _selector_cross_validated(matrix, labels, folds, args.folds)
    base = rows["Top R"]
    print(f"{n} scored training questions, {args.folds}-fold cross-validation (seed {args.seed}), EM:")
    table = {}
    for name, hits in rows.items():
        low, high = _interval(hits - base, args.seed)
        table[name] = {"em": 100 * hits.mean(), "vs_top_r": 100 * (hits - base).mean(), "low": low, "high": high}
        gain = 100 * (hits - base).mean()
        print(f"  {name:<36} {100 * hits.mean():5.1f}   vs Top R {gain:+5.1f} [{low:+.1f}, {high:+.1f}]")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"questions": n, "seed": args.seed, "rows": table}, handle, indent=1)
    return 0


def _top_r(questions, folds, k) -> np.ndarray:
    hits = np.zeros(len(questions))
    for fold in range(k):
        train = [q for q, f in zip(questions, folds, strict=True) if f != fold]
        best = int(np.argmax(np.sum([q[3] for q in train], axis=0)))
        for i in np.flatnonzero(folds == fold):
            hits[i] = questions[i][3][best]
    return hits


def _cross_validated(questions, folds, k, families, spans: bool) -> np.ndarray:
    from voters.judge_selector import JudgeSelector

    hits = np.zeros(len(questions))
    for fold in range(k):
        train = [q for q, f in zip(questions, folds, strict=True) if f != fold]
        selector = JudgeSelector(families, spans=spans).fit([q[0] for q in train], [q[1] for q in train])
        for i in np.flatnonzero(folds == fold):
            chosen = selector.choose(questions[i][0])
            hits[i] = chosen is not None and questions[i][1][chosen]
    return hits


JUDGED = ("lp:", "mean:", "mix:members", "mix:passages", "best:passages", "rank:members", "margin:members")


def _selector_features(path, members, records, questions) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Today's answer selector's features of each member's answer (voters.features, em/f1/cosine, without
    confidence as the shipped selectors), alone and with the judge's likelihood features of the candidate
    the answer is (a member without an answer: the training means), and each answer's correctness."""
    from eor.core.answers import normalize_answer
    from eor.runs.run_data import load_run
    from voters.batch import VoteBatch

    run = load_run(path, members)
    rows = [run.ids.index(record.id) for record in records]
    batch = VoteBatch(run.answers, run.passages, run.texts, golds=run.golds).take(rows)
    blocks, at = batch.blocks(["em", "f1", "cosine"], confidence=False)
    base = blocks.features(range(len(members)), members).matrix[at]
    names = questions[0][0].names
    columns = [i for i, name in enumerate(names) if name.startswith(JUDGED)]
    judged = np.full((*base.shape[:2], len(columns)), np.nan)
    for q, record in enumerate(records):
        features = questions[q][0]
        where = {normalize_answer(text): i for i, text in enumerate(features.texts)}
        for m, member in enumerate(members):
            row = where.get(normalize_answer(record.members[member].answer))
            if row is not None:
                judged[q, m] = features.matrix[row, columns]
    labels = batch.correctness("em") >= 0.5
    return {"today's selector": (base, labels), "today's selector + judge": (np.concatenate([base, judged], 2), labels)}


def _selector_cross_validated(matrix: np.ndarray, labels: np.ndarray, folds, k) -> np.ndarray:
    """Today's selector's learner (voters.selector.fit_on_features) on the given features, out of fold."""
    from voters.features import FeatureSet
    from voters.scoring import choose
    from voters.selector import AnswerSelector, fit_on_features

    names = [f"f{i}" for i in range(matrix.shape[-1])]
    hits = np.zeros(len(matrix))
    for fold in range(k):
        train, test = folds != fold, folds == fold
        selector = AnswerSelector(metrics=["em"], C=1.0)
        fit_on_features(
            selector, FeatureSet(names, matrix[train]), labels[train], [f"m{i}" for i in range(matrix.shape[1])]
        )
        chosen = choose(selector.feature_scores(matrix[test]))
        hits[test] = labels[test][np.arange(test.sum()), chosen]
    return hits


def _interval(difference: np.ndarray, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    means = [difference[rng.integers(0, len(difference), len(difference))].mean() for _ in range(2000)]
    return 100 * float(np.percentile(means, 2.5)), 100 * float(np.percentile(means, 97.5))


if __name__ == "__main__":
    raise SystemExit(main())
