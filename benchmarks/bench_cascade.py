"""Replay of a cascade on recorded answers (no reader, seconds): EM, F1, mean and 90th-percentile cost per
question and members run, for the cascade at several tolerances against the full-pool selector, the paper's
voter and Top R, all trained on the same training records and scored on the same held-out ones.

A member's cost on a question is its recorded seconds (retrieval plus generation), or its token counts at
the reader's rates where the records hold them (eor.runs.costs), the rates of the training records (the weights
file's `meta.costs`, else fitted to the training records' seconds: never refitted on the scored records); a
full-pool voter runs every member, Top R one.
The cascade's tolerances replay the thresholds its weights file holds (chosen on held-out training
questions), so nothing here is chosen on the scored records. The difference of the cascade at the file's
own threshold against the full-pool selector comes with its paired bootstrap 95% interval and an exact
McNemar test.

    python -m benchmarks.bench_cascade [--train R] [--dev R] [--cascade W] [--selector W] [--config C] [--out FILE.json]

With `--config` (a llama.cpp reader) the cascade is charged member after member in its own order, keeping the
prompt prefix the reader keeps (eor.runs.costs.with_replay); without it, as recorded (docs/cascade.md's table).

Defaults: docs/records/nq-train.jsonl.gz, docs/records/nq-dev.jsonl.gz, docs/weights/nq-offline-cascade.json
and docs/weights/nq-offline-auto.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.correctness import correctness_matrix
from eor.evaluation.stats import Bootstrap, paired_test
from eor.learning.crossval import VoteSettings, build_candidate, vote_arrays
from eor.learning.judge_cascade import reader_tokens
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.costs import MemberCosts, member_costs, trained_rates, unit_label, with_replay
from eor.runs.run_data import RunData, load_run
from voters import VoteBatch, load_voter

ROOT = Path(__file__).resolve().parent.parent


def shown(path: str) -> str:
    """`path` relative to the repository when it lies inside it (written files name no machine's paths)."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


LOSSES = (0.0, 0.25, 0.5, 1.0, 2.0)


def figures(chosen: np.ndarray, spent: np.ndarray, run: np.ndarray, em: np.ndarray, f1: np.ndarray) -> dict[str, float]:
    rows = np.arange(len(chosen))
    return {
        "em": float(em[rows, chosen].mean()),
        "f1": float(f1[rows, chosen].mean()),
        "cost": float(spent.mean()),
        "cost_p90": float(np.percentile(spent, 90)),
        "members_run": float(run.mean()),
    }


def trained_paper_voter(train_path: Path, names: list[str]) -> Any:
    """The paper's voter (section 4.2, em/f1/cosine, mean pooling) fitted on the training records."""
    arrays = vote_arrays(load_run(train_path, names), VoteSettings())
    return build_candidate("paper", VoteSettings()).fit(arrays, np.arange(arrays.questions)).estimator


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", default=str(ROOT / "docs/records/nq-train.jsonl.gz"))
    parser.add_argument("--dev", default=str(ROOT / "docs/records/nq-dev.jsonl.gz"))
    parser.add_argument("--cascade", default=str(ROOT / "docs/weights/nq-offline-cascade.json"))
    parser.add_argument("--selector", default=str(ROOT / "docs/weights/nq-offline-auto.json"))
    parser.add_argument("--cost", default="auto", choices=["auto", "seconds", "tokens"])
    parser.add_argument(
        "--config",
        help="the pool's config: with its llama.cpp reader, the cascade is charged member after member in its own "
        "order (docs/cascade.md, 'Costs as they are paid'); without it, as recorded",
    )
    parser.add_argument("--out", help="also write the figures as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cascade = load_voter(args.cascade)
    names = list(cascade.members_)
    data = load_run(args.dev, names)
    selector = load_voter(args.selector, members=names)
    # charged at the rates of the training records (the weights file's, else fitted to the training records'
    # seconds), as the cascade was trained: never refitted on dev
    rates = trained_rates(cascade) or member_costs(load_run(args.train, names), args.cost).rates
    costs = member_costs(data, args.cost, rates)
    if args.config:  # the cascade charged as it runs its members (eor.runs.costs.with_replay)
        config = load_valid_config(args.config)
        costs = with_replay(costs, data, reader_tokens(build_reader(config.reader), config))
    batch = VoteBatch(
        data.answers, data.passages, data.texts, confidence=data.confidence if data.has_confidence else None
    )
    full = selector.predict(batch)
    systems, own = replayed_systems(args, data, costs, cascade, batch, full)
    rows = np.arange(data.questions)
    em = correctness_matrix(data.answers, data.golds, "em")
    test = paired_test(em[rows, own], em[rows, full], Bootstrap.draw(data.questions, 2000, 0))
    agree = float(np.mean([data.answers[q][own[q]] == data.answers[q][full[q]] for q in rows]))
    pool = costs.matrix.sum(axis=1)
    print_table(args.dev, data.questions, costs, pool, systems, test, agree)
    if args.out:
        document = {
            "questions": data.questions,
            "records": shown(args.dev),
            "cost_unit": costs.unit,
            "rates": costs.rates,
            **({} if costs.replay is None else {"cascade_charged": "cascade order"}),
            "pool_cost": float(pool.mean()),
            "systems": systems,
            "cascade_minus_selector": {key: test[key] for key in ("difference", "ci", "p_value", "test")},
            "same_answer": agree,
        }
        Path(args.out).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


def replayed_systems(
    args: argparse.Namespace, data: RunData, costs: MemberCosts, cascade: Any, batch: VoteBatch, full: np.ndarray
) -> tuple[dict[str, dict[str, float]], np.ndarray]:
    """Each system's figures (the selector's choices `full`), and the cascade's choices at its own threshold."""
    names = data.names
    em = correctness_matrix(data.answers, data.golds, "em")
    f1 = correctness_matrix(data.answers, data.golds, "f1")
    pool = costs.matrix.sum(axis=1)
    everyone = np.full(data.questions, float(len(names)))
    systems = {}
    systems["selector, every member"] = figures(full, pool, everyone, em, f1)
    paper = trained_paper_voter(Path(args.train), names).predict(batch)
    systems["paper's voter, every member"] = figures(paper, pool, everyone, em, f1)
    top = names.index(cascade.metadata_["top_r_train"]["member"])
    picks = np.full(data.questions, top)
    systems[f"Top R ({names[top]})"] = figures(picks, costs.matrix[:, top], np.ones(data.questions), em, f1)
    own = None
    for loss in LOSSES:
        threshold = cascade.at_loss(loss / 100).threshold
        chosen, stops = cascade.replay(batch, threshold)
        label = f"cascade, max loss {loss:g} (P ≥ {threshold:.3f})"
        spent = cascade.spent(costs.matrix if costs.replay is None else costs.replay, stops)
        systems[label] = figures(chosen, spent, stops + 1.0, em, f1)
        if threshold == cascade.threshold_:
            own = chosen
    if own is None:
        own = cascade.predict(batch)
    return systems, own


def print_table(
    dev: str,
    questions: int,
    costs: MemberCosts,
    pool: np.ndarray,
    systems: dict[str, dict[str, float]],
    test: dict[str, Any],
    agree: float,
) -> None:
    unit = unit_label(costs.unit, costs.rates) + (", fitted on the training records" if costs.rates else "")
    print(f"{questions} questions of {dev}; cost per question in {unit}, every member {pool.mean():.2f}")
    print(f"{'system':<44} {'EM':>6} {'F1':>6} {'cost':>7} {'p90':>7} {'share':>6} {'members':>8}")
    for label, row in systems.items():
        print(
            f"{label:<44} {100 * row['em']:6.1f} {100 * row['f1']:6.1f} {row['cost']:7.2f} {row['cost_p90']:7.2f} "
            f"{100 * row['cost'] / pool.mean():5.0f}% {row['members_run']:8.2f}"
        )
    low, high = test["ci"]
    print(
        f"cascade (its own threshold) − selector: {100 * test['difference']:+.1f} EM, paired 95% interval "
        f"[{100 * low:+.1f}, {100 * high:+.1f}], exact McNemar p {test['p_value']:.3g}; same answer on "
        f"{100 * agree:.1f}% of the questions"
    )


if __name__ == "__main__":
    raise SystemExit(main())
