"""Where a cascade's P(right) is right and where it is wrong: per step it stops at (and per group of
voters.right), the questions, the mean P(right) against the share right, and how many of them each error rate
of the weights file answers. From records alone, in seconds.

    python -m benchmarks.cascade_calibration [--config configs/nq-offline.yaml]
        [--weights docs/weights/nq-offline-cascade.json] [--records docs/records/nq-dev.jsonl.gz] [--metric em]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from eor.core.config import load_config
from eor.core.correctness import correctness_matrix
from eor.runs.run_data import load_run
from voters import VoteBatch, load_voter
from voters.choice_evidence import choice_evidence
from voters.right import RightModel

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs/nq-offline.yaml"), help="the pool's config")
    parser.add_argument("--weights", default=str(ROOT / "docs/weights/nq-offline-cascade.json"), help="a cascade")
    parser.add_argument("--records", default=str(ROOT / "docs/records/nq-dev.jsonl.gz"), help="records to judge on")
    parser.add_argument("--metric", default="em", help="correctness (em, contains, ...)")
    args = parser.parse_args(argv)

    config = load_config(args.config)
    cascade = load_voter(args.weights, members=config.members)
    model = RightModel.from_voter(cascade)
    if model is None:
        raise SystemExit(f"{args.weights}: the weights file holds no P(right) (meta.probability)")
    data = load_run(args.records, config.members)
    batch = VoteBatch(data.answers, data.passages, data.texts, confidence=data.confidence or None)
    _, stops = cascade.replay(batch)
    found = choice_evidence(cascade, batch)
    fits = model.fit_names(found)
    probability = model.probability(found, fits)
    right = correctness_matrix(data.answers, data.golds, args.metric)[np.arange(data.questions), found.pick] >= 0.5
    levels = [row for row in model.fit().thresholds if row["alpha"] in (0.2, 0.3, 0.4)]
    if set(fits) != {model.fit().name}:
        raise SystemExit(f"{args.records}: P(right) by the fits {sorted(set(fits))}; this table reads one")
    header = f"{'stopped after':<16} {'group':<6} {'questions':>9} {'mean P':>7} {'right':>6}"
    header += "".join(f"  answered at {row['alpha']:g}" for row in levels)
    print(f"{data.questions} questions of {args.records}, {args.metric}; P(right) of {args.weights}")
    print(header)
    for step, name in enumerate(cascade.order_):
        here = stops == step
        if not here.any():
            continue
        answered = "".join(
            f"  {int((probability[here] >= row['threshold']).sum()) if row['threshold'] is not None else 0:>14d}"
            for row in levels
        )
        print(
            f"{name:<16} {found.group[here][0]:<6} {int(here.sum()):>9d} {probability[here].mean():>7.3f} "
            f"{right[here].mean():>6.3f}{answered}"
        )
    print(f"{'all':<16} {'':<6} {data.questions:>9d} {probability.mean():>7.3f} {right.mean():>6.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
