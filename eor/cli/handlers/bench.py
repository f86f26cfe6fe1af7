"""What `eor bench` (a pool's report from its records) and `eor compare` (two reports side by side) do."""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.commands.bench_command import bench
from eor.core.atomic import write_text_atomically
from eor.evaluation.bench.compare import compare_reports, compare_reports_html
from eor.pipeline.validation import load_valid_config


def cmd_bench(args: argparse.Namespace) -> int:
    metrics = tuple(args.metrics.split(",")) if args.metrics else None
    pool = load_valid_config(args.config) if args.config else None  # the door
    print(
        bench(
            Path(args.records),
            Path(args.out),
            weights=args.weights,
            metric=args.metric,
            metrics=metrics,
            seed=args.seed,
            resamples=args.resamples,
            max_subsets=args.max_subsets,
            members=pool.members if pool is not None else None,
            design=args.design,
            frontier=args.frontier,
            against=args.against,
            config=pool,
            bem_model=args.bem_model,  # for this command only: no registry changes
        )
    )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    print(compare_reports(args.report_a, args.report_b))
    if args.html:
        write_text_atomically(Path(args.html), compare_reports_html(args.report_a, args.report_b))
        print(f"written to {args.html}")
    return 0
