"""What `eor ablate` does: a question file of ablated copies (eor.learning.ablation)."""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.core.data import load_questions
from eor.core.formatting import fixed
from eor.learning.ablation import write_ablated
from retrievers.corpus import load_corpus


def cmd_ablate(args: argparse.Namespace) -> int:
    questions = load_questions(args.data, limit=args.limit)
    summary = write_ablated(questions, load_corpus(args.corpus), Path(args.out))
    print(
        f"{summary['questions']} ablated copies of {args.data} written to {args.out}: of the corpus's "
        f"{summary['passages']} passages, each withholds {summary['withheld_median']} (median; mean "
        f"{fixed(summary['withheld_mean'], 1)}, most {summary['withheld_max']}): its gold passages and every passage "
        "holding a gold answer"
    )
    return 0
