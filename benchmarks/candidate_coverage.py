"""How often a gold answer is among the judge's candidates (voters.candidates), from run records alone: among the
members' answers, and among the members' answers plus up to K spans of each span rule, for several K; with the
candidates per question and the seconds the rule took per question.

"Gold among the candidates" is exact match (SQuAD normalisation) of some candidate with some gold answer; the
ceiling, "gold in the passages", is a gold answer occurring as whole words in a passage some member read.

    python -m benchmarks.candidate_coverage docs/records/nq-train.jsonl.gz --config configs/nq-offline.yaml
        [--k 5,10,20,40] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import time

from eor.core.answers import contains, matches_gold
from eor.core.config import load_config
from eor.pipeline.judging import passages_read
from eor.runs.records import read_records
from voters.candidates import SPAN_RULES, candidates


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="records (a run folder or .jsonl[.gz])")
    parser.add_argument("--config", help="the pool's config: its members alone (records that grew beyond it)")
    parser.add_argument("--k", default="5,10,20,40", help="span candidates per question, comma-separated")
    parser.add_argument("--limit", type=int, help="the first N questions only")
    parser.add_argument("--json", help="write the table here")
    args = parser.parse_args(argv)
    ks = [int(value) for value in args.k.split(",")]
    records = read_records(args.records)[: args.limit]
    members = load_config(args.config).members if args.config else list(records[0].members)

    def hit(texts: list[str], golds: list[str]) -> bool:
        return any(matches_gold(text, golds) for text in texts)

    rows: dict[str, dict[str, float]] = {}
    answers = [{m: r.members[m].answer for m in members if m in r.members} for r in records]
    passages = [
        [str(p.get("text", "")) for p in passages_read({m: r.members[m] for m in members if m in r.members})]
        for r in records
    ]
    golds = [r.answers for r in records]
    n = len(records)
    in_passages = sum(any(contains(p, g) for p in ps for g in gs) for ps, gs in zip(passages, golds, strict=True))
    base = [candidates(r.question, a, []) for r, a in zip(records, answers, strict=True)]
    rows["members"] = {
        "gold": 100 * sum(hit([c.text for c in cs], gs) for cs, gs in zip(base, golds, strict=True)) / n,
        "candidates": sum(map(len, base)) / n,
        "seconds": 0.0,
    }
    for rule in SPAN_RULES:
        for k in ks:
            started = time.perf_counter()
            made = [
                candidates(r.question, a, ps, rule=rule, k=k)
                for r, a, ps in zip(records, answers, passages, strict=True)
            ]
            seconds = (time.perf_counter() - started) / n
            rows[f"{rule}@{k}"] = {
                "gold": 100 * sum(hit([c.text for c in cs], gs) for cs, gs in zip(made, golds, strict=True)) / n,
                "candidates": sum(map(len, made)) / n,
                "seconds": seconds,
            }
    print(f"{n} questions, members: {', '.join(members)}")
    print(f"gold answer in the passages some member read: {100 * in_passages / n:.1f}%")
    print(f"{'candidates':<16} {'gold among them':>16} {'per question':>13} {'ms/question':>12}")
    for name, row in rows.items():
        print(f"{name:<16} {row['gold']:>15.1f}% {row['candidates']:>13.1f} {1000 * row['seconds']:>12.2f}")
    if args.json:
        table = {"questions": n, "members": members, "gold_in_passages": 100 * in_passages / n, "rows": rows}
        with open(args.json, "w") as handle:
            json.dump(table, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
