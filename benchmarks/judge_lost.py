"""Where the judge voter's answers go wrong, question by question: what the write-up of docs/judge.md counts.

For each question the judge gets wrong (exact match), the first of these that holds:

- `no candidate`: no candidate is right (neither a member's answer nor one of the K spans), split by whether
  a gold answer occurs in a passage some member read (then the span rule missed it) or in none;
- `a member's answer`: some member wrote a right answer and the judge chose another candidate (a member's
  answer, or a span);
- `a span`: only a span was right, and the judge chose another candidate.

Beside them: how many right answers were spans no member wrote, and the questions the judge and another
voter's weights file (`--against`, on the same records) get right alone.

    python -m benchmarks.judge_lost RECORDS --weights JUDGE.json --config CONFIG [--against W.json]
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

import numpy as np

from eor.core.answers import contains, matches_gold
from eor.core.config import load_config
from eor.evaluation.bench.judge import judge_choices
from eor.evaluation.bench.vote import vote
from eor.pipeline.judging import scored_families
from eor.runs.records import read_records
from eor.runs.run_data import load_run
from voters.loading import load_voter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records")
    parser.add_argument("--weights", required=True, help="the judge voter's weights file")
    parser.add_argument("--config", required=True, help="the config whose judge: section answers (what it scores)")
    parser.add_argument("--against", help="another voter's weights file on the same records")
    args = parser.parse_args(argv)
    voter = load_voter(args.weights, kind="judge")
    loaded = [record for record in read_records(args.records) if record.answers]
    judged = judge_choices(loaded, voter, args.records, scored_families(load_config(args.config)))
    counts: Counter[str] = Counter()
    for record, question, right in zip(loaded, judged.questions, judged.right, strict=True):
        choice, _ = voter.choose(question.features)
        counts[_kind(record, question, bool(right), voter.members, None if choice is None else choice.index)] += 1
    print(f"{len(loaded)} questions of {args.records}; the judge right on {int(judged.right.sum())}")
    for kind, count in sorted(counts.items()):
        print(f"  {kind:<58} {count:4d}")
    if args.against:
        data = load_run(args.records)
        chosen = vote(data, args.against).chosen
        other = np.array([matches_gold(data.answers[q][c], data.golds[q]) for q, c in enumerate(chosen)])
        print(
            f"right alone: the judge {int((judged.right & ~other).sum())}, {args.against} "
            f"{int((other & ~judged.right).sum())}"
        )
    return 0


def _kind(record: Any, question: Any, right: bool, members: list[str], chosen: int | None) -> str:
    """The question's line of the module's count (`chosen`: the candidate the judge chose)."""
    spans = question.features.matrix[:, question.features.names.index("span")] == 1
    if right:
        assert chosen is not None  # a right choice is a candidate
        return "right: " + ("a span no member wrote" if spans[chosen] else "a member's answer")
    if not question.right.any():
        read = [p.get("text", "") for m in members if m in record.members for p in record.members[m].passages]
        held = any(contains(str(text), gold) == 1.0 for text in read for gold in record.answers)
        return "wrong, no candidate right: " + ("a gold answer in a passage read" if held else "in no passage read")
    if question.right[~spans].any():
        return "wrong, a member's answer right, not chosen"
    return "wrong, only a span right, not chosen"


if __name__ == "__main__":
    raise SystemExit(main())
