"""What `eor train` (voter weights from run records) and `eor design` (a pool chosen by cross-validation) do."""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.commands.design_command import design
from eor.commands.train_command import TrainOptions, train
from voters.similarity import parse_metric_spec


def cmd_train(args: argparse.Namespace) -> int:
    metrics, metric_params = parse_metric_spec(args.metrics)
    options = TrainOptions(
        voter=args.voter,
        metric=args.metric,
        dev=Path(args.dev) if args.dev else None,
        metrics=tuple(metrics),
        metric_params=metric_params,
        pooling=args.pooling,
        grounding=args.grounding,
        restarts=args.restarts,
        seed=args.seed,
        cv=args.cv,
        inner_folds=args.inner_folds,
        max_loss=args.max_loss,
        budget=args.budget,
        cost_unit=args.cost,
        rates=args.rates,
        pool_config=Path(args.config) if args.config else None,
        confidence=not args.no_confidence,
    )
    print(train(Path(args.records), Path(args.out), options))
    return 0


def cmd_design(args: argparse.Namespace) -> int:
    print(
        design(
            Path(args.records),
            Path(args.config),
            Path(args.out),
            folds=args.folds,
            repeats=args.repeats,
            seed=args.seed,
            rates=args.rates,
            max_loss=args.max_loss,
            budget=args.budget,
        )
    )
    return 0
