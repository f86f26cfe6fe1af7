"""Where a pool's members lose the answer they were given, from run records alone.

Per member over the records' questions, as `eor design` counts them (eor.commands.design_command
.reading_indicators): exact match; the share of questions whose gold passage it retrieved (the question file's
`gold_passages`; a summary, @CP, keeps no passage id); the share whose context holds a gold answer
(normalised, as whole words within one passage); exact match on those. Its mean cost per question (token
counts at `--rates`, eor.runs.costs, each member charged its own retrieval's generation). Then, of the
questions with the answer in its context that it still answers wrong, what the wrong answer is: longer than
five words, containing a gold answer (right but verbose), another span of its context (a wrong extraction), or
text found in none of its passages.

    python -m benchmarks.reading_failures docs/records/nq16-train400.jsonl.gz --config configs/nq-offline16.yaml
        [--rates 281,60] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from eor.commands.design_command import in_context, reading_indicators
from eor.core.config import load_config
from eor.core.correctness import score_answer
from eor.core.rates import parse_rates
from eor.runs.costs import member_costs
from eor.runs.run_data import load_run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="records (a run folder or .jsonl[.gz])")
    parser.add_argument("--config", help="the pool's config: its members alone (records that grew beyond it)")
    parser.add_argument("--rates", type=parse_rates, help="reader tokens per second PROMPT,GENERATED (default: fitted)")
    parser.add_argument("--json", help="write the table here")
    args = parser.parse_args(argv)

    data = load_run(args.records, load_config(args.config).members if args.config else None)
    costs = member_costs(data, "tokens" if args.rates else "auto", args.rates).matrix
    found = reading_indicators(Path(args.records), data)
    right, context = found["right"], found["in_context"]
    rows: list[dict[str, Any]] = []
    for m, name in enumerate(data.names):
        answers = [row[m] for row in data.answers]
        wasted = [q for q in range(data.questions) if context[q, m] and not right[q, m]]
        span = sum(in_context(data.passages[q][m], [answers[q]]) for q in wasted)
        rows.append(
            {
                "member": name,
                "em": float(right[:, m].mean()),
                "gold_passage": float(found["gold_passage"][:, m].mean()),
                "answer_in_context": float(context[:, m].mean()),
                "em_in_context": float(right[context[:, m], m].mean()) if context[:, m].any() else None,
                "cost": float(costs[:, m].mean()),
                "wrong_in_context": len(wasted),
                "longer_than_5_words": sum(len(answers[q].split()) > 5 for q in wasted),
                "contains_gold": sum(score_answer("contains", answers[q], data.golds[q]) >= 0.5 for q in wasted),
                "other_span_of_context": span,
                "not_in_context": len(wasted) - span,
            }
        )
    print(f"{len(data.names)} members × {data.questions} questions of {args.records}")
    print(
        f"{'member':<22} {'EM':>5} {'gold':>5} {'ctx':>5} {'EM|ctx':>6} {'s/q':>5}   wrong with the answer in context:"
    )
    print(f"{'':<50}   {'all':>4} {'>5 w':>5} {'gold+':>5} {'span':>5} {'none':>5}")
    for row in rows:
        shown = "-" if row["em_in_context"] is None else f"{100 * row['em_in_context']:.1f}"
        print(
            f"{row['member']:<22} {100 * row['em']:5.1f} {100 * row['gold_passage']:5.1f} "
            f"{100 * row['answer_in_context']:5.1f} {shown:>6} {row['cost']:5.2f}   {row['wrong_in_context']:4d} "
            f"{row['longer_than_5_words']:5d} {row['contains_gold']:5d} {row['other_span_of_context']:5d} "
            f"{row['not_in_context']:5d}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
