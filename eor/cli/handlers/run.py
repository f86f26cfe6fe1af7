"""What `eor run` does: every member on a file of questions, into resumable records."""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.cli.options import cache_setting, config_path, executor_settings
from eor.commands.runner import run
from eor.pipeline.executor import build_executor


def cmd_run(args: argparse.Namespace) -> int:
    summary = run(
        config_path=config_path(args.config),
        data=Path(args.data),
        out=Path(args.out),
        limit=args.limit,
        batch_size=args.batch_size,
        weights=args.weights,
        cache=cache_setting(args),
        retry_failed=args.retry_failed,
        executor=build_executor(**executor_settings(args)),
    )
    print(summary)
    return 0
