"""What `eor train` (voter weights from run records) and `eor design` (a pool chosen by cross-validation) do."""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.commands.calibrate_command import calibrate
from eor.commands.design_command import design
from eor.commands.train_command import TrainOptions, train
from eor.commands.train_judge import train_judge
from eor.commands.train_judge_cascade import train_judge_cascade
from eor.core.errors import ConfigError
from eor.learning.judge_training import JUDGE
from eor.pipeline.abstention import DEFAULT_SHARE
from voters.similarity import parse_metric_spec


def cmd_calibrate(args: argparse.Namespace) -> int:
    if args.unanswerable_share is not None and not args.nocorpus:
        raise ConfigError("--unanswerable-share is the share of --nocorpus questions to expect: give those records")
    share = DEFAULT_SHARE if args.unanswerable_share is None else args.unanswerable_share
    nocorpus = Path(args.nocorpus) if args.nocorpus else None
    print(calibrate(Path(args.records), args.weights, Path(args.out), nocorpus, share))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    records = [Path(path) for path in args.records]
    if args.voter == JUDGE:
        print(train_judge(records, Path(args.out), **_judge_options(args)))
        return 0
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
        cost_order=args.cost_order,
        pool_config=Path(args.config) if args.config else None,
        confidence=not args.no_confidence,
        ablated=tuple(map(Path, args.ablated)) if args.ablated else None,
        nocorpus=Path(args.nocorpus) if args.nocorpus else None,
        unanswerable_share=DEFAULT_SHARE if args.unanswerable_share is None else args.unanswerable_share,
    )
    if args.judge:
        _refuse(args, "--judge", CASCADE_WITH_JUDGE_FLAGS, ": a cascade ending with the judge learns on exact match")
        print(train_judge_cascade(records, Path(args.out), Path(args.judge), options))
    else:
        print(train(records, Path(args.out), options))
    return 0


#: flags a cascade ending with the judge does not take, at their defaults: it is trained and held out on exact
#: match (the judge's objective), reports no dev score and no K-fold table, and its steps are selectors
CASCADE_WITH_JUDGE_FLAGS = {"metric": "em", "pooling": "mean", "grounding": False, "restarts": 4, "cv": None,
                            "dev": None}  # fmt: skip


def _refuse(args: argparse.Namespace, what: str, defaults: dict, why: str = "") -> None:
    """A ConfigError naming each flag of `defaults` given another value, which `what` does not use (`why`)."""
    given = [name for name, default in defaults.items() if getattr(args, name, default) != default]
    if given:
        flags = ", ".join("--" + name.replace("_", "-") for name in given)
        raise ConfigError(f"{what} does not use {flags}{why}")


def _judge_options(args: argparse.Namespace) -> dict:
    """`train_judge`'s arguments; a ConfigError naming each flag given that the judge voter does not use."""
    defaults = {
        "metric": "em", "metrics": "em,f1,cosine", "pooling": "mean", "grounding": False, "restarts": 4,
        "cv": None, "max_loss": None, "budget": None, "cost": "auto", "rates": None, "no_confidence": False,
        "judge": None, "cost_order": "cascade",
    }  # fmt: skip
    _refuse(args, "--voter judge", defaults, ": it chooses its own features by cross-validation")
    if args.unanswerable_share is not None and not (args.ablated or args.nocorpus):
        raise ConfigError("--unanswerable-share is for a P(right) beyond the corpus: give --ablated or --nocorpus")
    return {
        "pool_config": Path(args.config) if args.config else None,
        "folds": args.inner_folds,
        "seed": args.seed,
        "dev": Path(args.dev) if args.dev else None,
        "ablated": tuple(map(Path, args.ablated)) if args.ablated else None,
        "nocorpus": Path(args.nocorpus) if args.nocorpus else None,
        "share": DEFAULT_SHARE if args.unanswerable_share is None else args.unanswerable_share,
    }


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
