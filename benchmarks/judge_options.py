"""Pilot (issue 60): can the reader choose among a question's candidates when it sees them all, listed as lettered
options (multiple choice), rather than scoring each one alone? Training questions only (never dev).

`score` (the reader; resumable, a line a question appended to OUT): for each of the first N scored training
records, the candidates the judge voter lets compete (the members' answers and the first 10 spans, in the judge's
order) listed as options A, B, ... after the passages of one member's prompt (`--context`, BM25@2&Wiki@2: two
passages of each source) and the question, and the reader's log-probability of each option's letter as its reply.
`evaluate` (no reader): an option drawn at random (expected), the option of highest probability alone, the same
after subtracting each position's mean (contextual calibration against the letters' prior), the reader's likelihood
under the members' prompts alone (`mix:members`), the oracle; and the judge voter at the setting `eor train` chose
on the 1,566 with and without the options' scores as two more features, out of fold (5 folds, seeds 0-2), paired
with a 95% bootstrap interval, and how many questions' outcome changed.

    python -m benchmarks.judge_options score docs/records/nq-train-pointed.jsonl.gz \
        --config configs/nq-judge-pointed.yaml --limit 200 --out docs/reports/judge/options-pilot.jsonl
    python -m benchmarks.judge_options evaluate docs/records/nq-train-pointed.jsonl.gz \
        --config configs/nq-judge-pointed.yaml --out docs/reports/judge/options-pilot.jsonl \
        --json docs/reports/judge/options-pilot.json
"""

from __future__ import annotations

import argparse
import json
import string
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.atomic import write_text_atomically
from eor.core.config import load_config
from eor.evaluation.stats import Bootstrap
from eor.learning.judge_training import JudgedQuestion, Setting, accuracy, choices_out_of_fold, judged_questions
from eor.pipeline.stages.generation import GenerationStage
from eor.readers import build_reader
from eor.runs.records import read_records
from voters.folds import folds

LETTERS = string.ascii_uppercase
#: where the members' prompts end their passages and start the instruction (eor.core.prompts, few-words style)
INSTRUCTION = "\n\nPlease directly answer the following question"
SETTING = Setting(("votes", "evidence", "scores", "type"), 10)
ABSENT = -30.0  # the log-probability given a candidate that was not an option
RESAMPLES = 2000


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("score", "evaluate"))
    parser.add_argument("records", help="scored training records (a run folder or .jsonl[.gz])")
    parser.add_argument("--config", required=True, help="the pool's config (its members and reader)")
    parser.add_argument("--out", required=True, help="the options' scores, a JSON line a question")
    parser.add_argument("--limit", type=int, default=200, help="the first N training questions (score)")
    parser.add_argument("--context", default="BM25@2&Wiki@2", help="the member whose passages the options follow")
    parser.add_argument("--json", help="evaluate: write the table here")
    return parser.parse_args(argv)


def options_prompt(record: Any, texts: list[str], context: str) -> str:
    """The passages of `context`'s prompt, the question and `texts` as lettered options."""
    prompt = record.members[context].prompt
    head = prompt[: prompt.index(INSTRUCTION)] if INSTRUCTION in prompt else prompt
    options = "\n".join(f"{LETTERS[n]}. {text}" for n, text in enumerate(texts))
    return (
        f"{head}\n\nQuestion: {record.question}\nWhich of the following answers the question?\n{options}\n"
        "Reply with the letter of the correct answer only."
    )


def score(args: argparse.Namespace, records: list[Any], questions: list[JudgedQuestion]) -> None:
    config = load_config(args.config)
    out = Path(args.out)
    done = {json.loads(line)["id"] for line in out.read_text().splitlines()} if out.exists() else set()
    stage = GenerationStage(build_reader(config.reader), None)
    started, count = time.perf_counter(), 0
    with out.open("a", encoding="utf-8") as handle:
        for record, question in zip(records, questions, strict=True):
            if record.id in done:
                continue
            kept = [int(i) for i in np.flatnonzero(SETTING.build().competing(question.features))]
            prompt = options_prompt(record, [question.features.texts[i] for i in kept], args.context)
            scores = stage.score(prompt, [LETTERS[n] for n in range(len(kept))])
            line = {"id": record.id, "kept": kept, "logprob": [s.summary()["logprob"] for s in scores]}
            handle.write(json.dumps(line) + "\n")
            handle.flush()
            count += 1
    print(f"{count} questions scored in {time.perf_counter() - started:.0f} s")


def evaluate(args: argparse.Namespace, questions: list[JudgedQuestion]) -> dict[str, Any]:
    """The table of the module's text, printed and given back."""
    found = {line["id"]: line for line in map(json.loads, Path(args.out).read_text().splitlines())}
    questions = [q for q in questions if q.id in found]
    letters = [_letters(q, found[q.id]) for q in questions]
    prior = _position_means(letters)
    debiased = [np.where(pos >= 0, lp - prior[np.maximum(pos, 0)], ABSENT) for lp, pos in letters]
    mix = [q.features.matrix[:, q.features.names.index("mix:members")] for q in questions]
    table: dict[str, Any] = {
        "questions": len(questions),
        "random option": 100
        * np.mean([q.right[pos >= 0].mean() for q, (_, pos) in zip(questions, letters, strict=True)]),
    }
    for name, values in (("option letter", [lp for lp, _ in letters]), ("option, debiased", debiased), ("mix", mix)):
        table[name] = 100 * np.mean([q.right[int(np.argmax(v))] for q, v in zip(questions, values, strict=True)])
    table["oracle"] = 100 * np.mean([q.right.any() for q in questions])
    table["position means"] = [round(float(v), 2) for v in prior]
    print(f"{len(questions)} training questions; right by the highest (random option: expected):")
    for name in ("random option", "option letter", "option, debiased", "mix", "oracle"):
        print(f"  {name:<18} {table[name]:.1f}")
    widened = [_with_options(q, lp, d) for q, (lp, _), d in zip(questions, letters, debiased, strict=True)]
    table["seeds"] = []
    for seed in (0, 1, 2):
        parts = folds(len(questions), 5, seed)
        base = accuracy(questions, choices_out_of_fold(questions, SETTING, parts))
        more = accuracy(widened, choices_out_of_fold(widened, SETTING, parts))
        low, high = Bootstrap.draw(len(questions), RESAMPLES, seed).interval(more - base)
        row = {
            "seed": seed,
            "judge": 100 * base.mean(),
            "with options": 100 * more.mean(),
            "changed": int((more != base).sum()),
        }
        row.update(difference=100 * (more - base).mean(), low=100 * low, high=100 * high)
        table["seeds"].append(row)
        print(
            f"  seed {seed}: judge voter {row['judge']:.1f}, with the options {row['with options']:.1f}, "
            f"{row['difference']:+.1f} [{row['low']:+.1f}, {row['high']:+.1f}], {row['changed']} questions changed"
        )
    return table


def _letters(question: JudgedQuestion, line: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per candidate: its option's log-probability (ABSENT when not an option) and position (-1 then)."""
    size = len(question.features.texts)
    logprob, position = np.full(size, ABSENT), np.full(size, -1)
    for n, (index, value) in enumerate(zip(line["kept"], line["logprob"], strict=True)):
        logprob[index], position[index] = value, n
    return logprob, position


def _position_means(letters: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The mean log-probability of each option letter over the questions (the letters' prior)."""
    size = 1 + max(int(pos.max()) for _, pos in letters)
    sums, counts = np.zeros(size), np.zeros(size)
    for logprob, pos in letters:
        shown = pos >= 0
        np.add.at(sums, pos[shown], logprob[shown])
        np.add.at(counts, pos[shown], 1)
    return sums / np.maximum(counts, 1)


def _with_options(question: JudgedQuestion, logprob: np.ndarray, debiased: np.ndarray) -> JudgedQuestion:
    """`question` with two more features in the scores family: its options' log-probabilities, plain and
    debiased, each relative to the question's best."""
    extra = np.column_stack([logprob - logprob.max(), debiased - debiased.max()])
    features = replace(
        question.features,
        matrix=np.hstack([question.features.matrix, extra]),
        names=[*question.features.names, "lp:options", "lp:options-debiased"],
    )
    return JudgedQuestion(question.id, features, question.right)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    members = load_config(args.config).members
    records = [record for record in read_records(args.records) if record.answers][: args.limit]
    questions = judged_questions(records, members)
    if args.mode == "score":
        score(args, records, questions)
    else:
        table = evaluate(args, questions)
        if args.json:
            write_text_atomically(args.json, json.dumps(table, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
