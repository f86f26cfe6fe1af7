"""What the reader as judge costs and shows on recorded questions (eor.pipeline.judging): each question's
candidates (the members' answers and up to K spans of a rule) scored under every member's recorded prompt, the
generation cache off, alone on the cores. Prints the reader seconds per question (prompt evaluation and
candidates), the scored tokens, and, as a first look, how often the candidate with the highest likelihood is
right: under each member's prompt, and summed over the members' prompts (a mixture, as RAG-Sequence), against
how often some candidate is right. Writes every score to a JSON Lines file.

    python -m benchmarks.judge_pilot docs/records/nq-train.jsonl.gz --config configs/nq-offline.yaml
        --limit 40 [--rule entities --k 10] --out runs/judge-pilot.jsonl
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from scipy.special import logsumexp

from eor.core.answers import matches_gold
from eor.core.config import JudgeConfig, load_config
from eor.pipeline.judging import judge
from eor.pipeline.stages.generation import GenerationStage
from eor.readers import build_reader
from eor.runs.records import read_records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="records (a run folder or .jsonl[.gz])")
    parser.add_argument("--config", required=True, help="the pool's config (its members and reader)")
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--rule", default="entities")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--out", required=True, help="JSON Lines of every question's candidates and scores")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    records = read_records(args.records)[: args.limit]
    stage = GenerationStage(build_reader(config.reader), None)
    settings = JudgeConfig(rule=args.rule, k=args.k, passages=False)
    seconds, tokens, count = [], [], 0
    right = {"oracle": 0, "mixture": 0, "mean-mixture": 0, **{m: 0 for m in config.members}}
    with open(args.out, "w") as out:
        for record in records:
            outputs = {m: record.members[m] for m in config.members if m in record.members}
            before_tokens = stage.score_stats.tokens
            started = time.perf_counter()
            judged = judge(stage, record.question, outputs, settings)
            seconds.append(time.perf_counter() - started)
            tokens.append(stage.score_stats.tokens - before_tokens)
            correct = [matches_gold(j.candidate.text, record.answers) for j in judged]
            right["oracle"] += any(correct)
            members = list(judged[0].scores) if judged else []
            for member in members:
                right[member] += correct[int(np.argmax([j.scores[member].total for j in judged]))]
            totals = np.array([[j.scores[m].total for m in members] for j in judged])
            means = np.array([[j.scores[m].mean for m in members] for j in judged])
            right["mixture"] += correct[int(np.argmax(logsumexp(totals, axis=1)))]
            right["mean-mixture"] += correct[int(np.argmax(logsumexp(means, axis=1)))]
            count += 1
            out.write(json.dumps({"id": record.id, "candidates": [j.to_dict() for j in judged]}) + "\n")
            out.flush()
            print(f"{count}/{len(records)} {seconds[-1]:.1f} s, {len(judged)} candidates", flush=True)
    print(
        f"{count} questions, rule {args.rule}@{args.k}: {np.mean(seconds):.2f} s per question "
        f"(median {np.median(seconds):.2f}), {np.mean(tokens):.0f} scored tokens per question"
    )
    for name, hits in right.items():
        print(f"  {name:<16} {100 * hits / max(count, 1):5.1f}% right")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
