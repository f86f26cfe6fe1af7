"""What the retrieval family and each kind of unanswerable training question teach the judge voter's P(right)
beyond the corpus, by cross-validation on training records alone (the scored training questions, their ablated
copies and the no-corpus questions set aside to learn from; never dev, never the 200 kept no-corpus questions).

Each variant is trained exactly as `eor train --voter judge --ablated A --nocorpus N` trains it
(eor.learning.judge_training: each level's setting chosen by its own cross-validation, the choices of the
unanswerable questions from fits of the other folds, P(right) cross-fitted on the kinds that teach): P(right)
reading the judge's own evidence alone, or with the retrieval family too (the retrieved passages' relevance to
the question, voters.judge_features `retr:*`), each with or without the null candidate's family (`null:*`: the
reader's likelihood of declining under the members' prompts, read by the fit under those prompts alone); taught
by the ablated copies (the no-corpus questions then certify alone), or by the no-corpus questions alone (no
ablated copy given). For each variant and each level's fit, the out-of-fold figures of
benchmarks.beyond_corpus_cv (at the mixed threshold certified at α = 0.3 for the share, and at the most probable
28% of the answerable questions). Several training runs are read as one (`eor train`'s rule).

    python -m benchmarks.judge_beyond_cv docs/records/nq-train.jsonl.gz \
        --ablated docs/records/nq-train-ablated.jsonl.gz --nocorpus docs/records/nq-nocorpus-learn200.jsonl.gz \
        --config configs/nq-judge.yaml [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.beyond_corpus_cv import figures, rounded
from eor.learning.judge_data import judge_identity, load_unanswerable, scored_rule
from eor.learning.judge_training import judged_questions, train_judge_voter
from eor.pipeline.abstention import DEFAULT_SHARE
from eor.pipeline.judging import judged_members
from eor.pipeline.members import demonstration_ids
from eor.pipeline.validation import load_valid_config
from eor.runs.run_data import read_runs

VARIANTS = {  # name: (P(right) reads the retrieval family, the ablated copies given, it reads the null candidate)
    "judge's evidence / no corpus teaches": (False, False, False),
    "judge's evidence / ablated teach": (False, True, False),
    "+ retrieval family / no corpus teaches": (True, False, False),
    "+ retrieval family / ablated teach": (True, True, False),
    "+ null candidate / ablated teach": (False, True, True),
    "+ retrieval family + null candidate / ablated teach": (True, True, True),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="the scored answerable training records (several: read as one)")
    parser.add_argument("--ablated", required=True, nargs="+", help="scored records of their ablated copies")
    parser.add_argument("--nocorpus", required=True, help="scored records of the no-corpus questions to learn from")
    parser.add_argument("--config", required=True, help="the pool's config (its judged members)")
    parser.add_argument("--share", type=float, default=DEFAULT_SHARE, help="the unanswerable share (default 0.33)")
    parser.add_argument("--alpha", type=float, default=0.3, help="the error rate (default 0.3)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the table here")
    args = parser.parse_args(argv)
    config = load_valid_config(args.config)  # the door: judge.members among them
    names, skip = judged_members(config), demonstration_ids(config)
    loaded = [record for record in read_runs(args.records) if record.answers and record.id not in skip]
    rule_k = scored_rule(judge_identity(loaded, ", ".join(args.records)))
    table: dict[str, Any] = {}
    for retrieval in (False, True):
        questions = judged_questions(loaded, names, *rule_k, relevance=retrieval)
        for name, (reads, given, null) in VARIANTS.items():
            if reads != retrieval:
                continue
            ablated = tuple(map(Path, args.ablated)) if given else None
            beyond = load_unanswerable(ablated, Path(args.nocorpus), names, rule_k, skip, args.share, retrieval)
            assert beyond is not None
            _, reports = train_judge_voter(
                questions, names, k=args.folds, seed=args.seed, beyond=beyond, retrieval=retrieval, null=null
            )
            table[name] = {}
            for report in reports:
                p = np.nan_to_num(report.probability, nan=0.0)  # no choice: never answered
                every = np.ones(len(p), dtype=bool)
                kind = report.kind.astype(str)
                found = {"setting": report.chosen, **figures(p, report.right, kind, every, args.share, args.alpha)}
                table[name][report.level] = found
                print(f"{name:45s} {report.level:8s} {rounded(found)}", flush=True)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(table, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
