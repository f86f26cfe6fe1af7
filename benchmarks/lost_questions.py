"""The questions a pool's voter answers wrong, and why: no member right (the answer in some member's passages
or in none), or a right member the voter did not pick (a lone right member, and how many members gave the
wrong answer it chose); for a cascade, where it stopped. Records only.

    python -m benchmarks.lost_questions [--config configs/nq-designed.yaml]
        [--weights docs/weights/nq-designed-cascade.json] [--records docs/records/nq-dev.jsonl.gz]
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

from eor.commands.design_command import in_context
from eor.core.answers import normalize_answer
from eor.core.config import load_config
from eor.core.correctness import correctness_matrix
from eor.runs.run_data import load_run
from voters import VoteBatch, load_voter

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs/nq-designed.yaml"))
    parser.add_argument("--weights", default=str(ROOT / "docs/weights/nq-designed-cascade.json"))
    parser.add_argument("--records", default=str(ROOT / "docs/records/nq-dev.jsonl.gz"))
    args = parser.parse_args(argv)

    config = load_config(args.config)
    data = load_run(args.records, config.members)
    voter = load_voter(args.weights, members=config.members)
    stops = None
    if voter.in_steps:
        picks, stops = voter.replay(VoteBatch(data.answers, data.passages, data.texts, confidence=data.confidence))
    else:
        picks = voter.predict(VoteBatch(data.answers, data.passages, data.texts))
    picks = np.asarray(picks, dtype=int)
    right = correctness_matrix(data.answers, data.golds, "em", data.texts) >= 0.5  # (Q, M)
    rows = np.arange(data.questions)
    wrong = ~right[rows, picks]
    some = right.any(axis=1)
    lone = right.sum(axis=1) == 1
    seen = np.array([any(in_context(data.passages[q][m], data.golds[q]) for m in range(len(data.names))) for q in rows])
    print(f"{data.questions} questions, {int(wrong.sum())} answered wrong by {Path(args.weights).name}:")
    print(
        f"  no member right: {int((wrong & ~some).sum())}; a gold answer in some member's passages on "
        f"{int((wrong & ~some & seen).sum())}, in none on {int((wrong & ~some & ~seen).sum())}"
    )
    missed = wrong & some
    lone_members = Counter(data.names[int(np.flatnonzero(right[q])[0])] for q in rows if missed[q] and lone[q])
    print(
        f"  a right member not picked: {int(missed.sum())}; the only right member on {int((missed & lone).sum())} "
        f"({', '.join(f'{name} {count}' for name, count in lone_members.most_common())})"
    )
    backing = [
        sum(normalize_answer(answer) == normalize_answer(data.answers[q][picks[q]]) for answer in data.answers[q])
        for q in rows
        if missed[q]
    ]
    if backing:
        print(f"  members giving the wrong answer picked there: {np.mean(backing):.1f} on average")
    if stops is not None:
        counts = Counter(int(s) + 1 for s in stops)
        print("  members run before the cascade stopped: " + ", ".join(f"{k}: {counts[k]}" for k in sorted(counts)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
