"""What `eor erag` (each retrieved document labelled by the reader's answer with it alone) and `eor utility`
(context utility against 0-shot) do."""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.cli.options import cache_setting, config_path, executor_settings
from eor.commands.erag_command import parse_ints, run_erag, run_utility
from eor.pipeline.executor import build_executor


def cmd_erag(args: argparse.Namespace) -> int:
    cutoffs = parse_ints(args.cutoffs, "--cutoffs") if args.cutoffs else None
    print(
        run_erag(
            config_path(args.config),
            Path(args.data),
            args.member,
            Path(args.out),
            k=args.k,
            metric=args.metric,
            limit=args.limit,
            cutoffs=cutoffs,
            cost_questions=args.cost_questions,
            batch_size=args.batch_size,
            cache=cache_setting(args),
            executor=build_executor(**executor_settings(args)),
        )
    )
    return 0


def cmd_utility(args: argparse.Namespace) -> int:
    print(
        run_utility(
            config_path(args.config),
            Path(args.data),
            args.member,
            Path(args.out),
            ks=parse_ints(args.ks, "--ks"),
            similarity=args.similarity,
            references=args.references,
            limit=args.limit,
            epsilon=args.epsilon,
            batch_size=args.batch_size,
            cache=cache_setting(args),
            executor=build_executor(**executor_settings(args)),
        )
    )
    return 0
