"""Every shipped cascade's reader seconds on records, charged as `eor run` recorded its members (the records' order,
how every figure before issue 60 was replayed) and as the cascade runs them (each member right after the member
before it in the cascade's own order, keeping the prompt prefix the reader keeps: eor.runs.costs.PromptReplay),
side by side, at the token rates of each cascade's training records. The cascade stops where its weights file
says on each question (its threshold); a cascade ending with the judge adds the replayed scoring of the questions
it judges, the same in both orders. Records and the reader's tokenizer only: nothing is generated.

    python -m benchmarks.cascade_order_costs docs/records/nq-dev.jsonl.gz \
        --cascade docs/weights/nq-offline-cascade.json configs/nq-offline.yaml \
        --cascade docs/weights/nq-offline-judge-cascade.json configs/nq-judge-cascade.yaml [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.config import EnsembleConfig
from eor.evaluation.bench.judge_cascade_report import judge_cascade_report
from eor.evaluation.bench.vote import vote
from eor.learning.judge_cascade import reader_tokens
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.costs import member_costs, trained_rates, with_replay
from eor.runs.run_data import load_run
from voters import load_voter
from voters.judge_step import ends_with_judge


def order_costs(records: Path, weights: Path, config: EnsembleConfig) -> dict[str, Any]:
    """One cascade's seconds per question on `records` in the records' order and in its own (module)."""
    cascade = load_voter(weights)
    judged = ends_with_judge(cascade) is not None
    data = load_run(records, config.members)
    voted = vote(data, weights, with_judge=judged)
    assert voted.stops is not None  # a cascade's
    costs = member_costs(data, "tokens", trained_rates(cascade))
    replay = with_replay(costs, data, reader_tokens(build_reader(config.reader), config)).replay
    assert replay is not None  # with_replay's
    columns = [data.names.index(name) for name in cascade.members_]
    recorded = cascade.spent(costs.matrix[:, columns], voted.stops)
    own = cascade.spent(replay.subset(columns), voted.stops)
    judging = 0.0
    if judged:  # the judge's replayed scoring, the same in both orders: the report's total less its members'
        judging = judge_cascade_report(records, weights, config, resamples=10)["cascade"]["cost"] - float(own.mean())
    return {
        "weights": str(weights),
        "config": config.name,
        "order": list(cascade.order_),
        "rates": costs.rates,
        "members_run": float((voted.stops + 1).mean()),
        "judge_scoring": judging,
        "records_order": _seconds(recorded + judging),
        "own_order": _seconds(own + judging),
        "ratio": float((own.mean() + judging) / (recorded.mean() + judging)),
    }


def _seconds(values: np.ndarray) -> dict[str, float]:
    return {"mean": float(np.mean(values)), "p90": float(np.percentile(values, 90))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="the records the cascades are replayed on (e.g. dev)")
    parser.add_argument(
        "--cascade",
        nargs=2,
        action="append",
        required=True,
        metavar=("WEIGHTS", "CONFIG"),
        help="a cascade and its config",
    )
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args(argv)
    rows = []
    for weights, config in args.cascade:
        row = order_costs(Path(args.records), Path(weights), load_valid_config(config))
        rows.append(row)
        print(
            f"{weights}: {row['members_run']:.2f} members; records' order {row['records_order']['mean']:.2f} s "
            f"(p90 {row['records_order']['p90']:.2f}), own order {row['own_order']['mean']:.2f} s "
            f"(p90 {row['own_order']['p90']:.2f}), ×{row['ratio']:.2f}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"records": args.records, "cascades": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
