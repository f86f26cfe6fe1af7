"""Replay of exact lazy voting on recorded runs: identical choices, and the reader seconds it would save.

For every records file and every voter (each shipped weights file whose members the records hold, and the
uniform voter of the pool), the members of each question are run lazily in order of their mean recorded cost
(cheapest first), using the answers the run recorded: `voters.lazy.simulate` stops as soon as the pending
members cannot change the chosen answer, whatever they would answer. Every lazy answer is compared with the
full vote's, and the recorded seconds of the members that did not have to run are counted as saved.

    python -m benchmarks.bench_lazy_voting [RECORDS ...] [--weights W.json ...] [--config CONFIG]

Defaults: the records and weights files kept in docs/records and docs/weights.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.config import load_config
from eor.core.results import Record
from eor.runs.records import read_records
from eor.runs.run_data import RunData, load_run
from voters import VoteBatch, Voter, load_voter
from voters.lazy import simulate, supports_lazy_voting

ROOT = Path(__file__).resolve().parent.parent


def recorded_seconds(record: Record, name: str) -> float:
    """The member's recorded seconds on the record's question (retrieval, its own generations and the answer)."""
    seconds = record.members[name].seconds
    if seconds is None:
        raise SystemExit(f"{record.id}: no recorded seconds of {name}, nothing to replay")
    return seconds


def member_seconds(records: list[Record], names: list[str]) -> np.ndarray:
    """Mean recorded seconds per member."""
    return np.array([np.mean([recorded_seconds(r, name) for r in records]) for name in names])


def replay(data: RunData, records: list[Record], voter: Any) -> dict[str, Any]:
    names = list(voter.members_)
    columns = [data.names.index(name) for name in names]
    answers = [[row[c] for c in columns] for row in data.answers]
    passages = [[row[c] for c in columns] for row in data.passages]
    full = voter.predict(VoteBatch(answers, passages, data.texts))
    costs = member_seconds(records, names)
    order = [int(m) for m in np.argsort(costs, kind="stable")]
    by_id = {r.id: r for r in records}
    same, total_seconds, saved_seconds, members_run = 0, 0.0, 0.0, 0
    for q in range(data.questions):
        answer, ran = simulate(voter, answers[q], passages[q], order)
        same += answer == answers[q][int(full[q])]
        seconds = [recorded_seconds(by_id[data.ids[q]], name) for name in names]
        total_seconds += sum(seconds)
        saved_seconds += sum(s for m, s in enumerate(seconds) if m not in ran)
        members_run += len(ran)
    return {
        "questions": data.questions,
        "identical": same,
        "members": len(names),
        "mean_members_run": members_run / max(data.questions, 1),
        "saved": saved_seconds / total_seconds if total_seconds else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="*", help="records files or run folders (default: docs/records/*.jsonl.gz)")
    parser.add_argument("--weights", nargs="*", help="weights files (default: docs/weights/*.json)")
    parser.add_argument("--config", help="this config's members only, in every records file (records that grew)")
    args = parser.parse_args(argv)
    record_files = args.records or sorted(str(p) for p in (ROOT / "docs" / "records").glob("*.jsonl.gz"))
    weight_files = (
        args.weights if args.weights is not None else sorted(str(p) for p in (ROOT / "docs" / "weights").glob("*.json"))
    )
    print(f"{'records':<22} {'voter':<34} {'questions':>9} {'identical':>9} {'members run':>11} {'seconds saved':>13}")
    failures = 0
    for path in record_files:
        records = [r for r in read_records(path) if r.answers]
        data = load_run(path, load_config(args.config).members if args.config else None)
        voters = [("uniform (em, f1, cosine)", Voter.uniform(len(data.names), members=data.names))]
        for file in weight_files:
            voter = load_voter(file)
            if voter.members_ is not None and set(voter.members_) <= set(data.names):
                voters.append((Path(file).name, voter))
        for label, voter in voters:
            if not supports_lazy_voting(voter):
                print(f"{Path(path).name:<22} {label:<34} not bounded ({voter.kind}): runs every member")
                continue
            row = replay(data, records, voter)
            failures += row["questions"] - row["identical"]
            print(
                f"{Path(path).name:<22} {label:<34} {row['questions']:>9} {row['identical']:>9} "
                f"{row['mean_members_run']:>5.1f} of {row['members']:<3} {100 * row['saved']:>12.1f}%"
            )
    if failures:
        print(f"{failures} lazy choices differ from the full vote", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
