"""`eor train` (voter weights from run records) and `eor design` (a pool chosen from candidate members by
cross-validation)."""

from __future__ import annotations

import argparse

from eor.cli.options import (
    Commands,
    fold_count,
    non_negative_float,
    non_negative_int,
    out_option,
    positive_int,
    share_value,
    token_rates,
)


def add_train(commands: Commands) -> None:
    train = commands.add_parser("train", help="learn voter weights from the records of `eor run`")
    train.add_argument(
        "records",
        nargs="+",
        help="run folder (or records.jsonl[.gz]) of the training questions; several: read as one (the same pool)",
    )
    out_option(train, "weights file to write (JSON)")
    train.add_argument(
        "--voter",
        default="auto",
        help="auto (default: chosen by cross-validation, never below Top R), top, paper, grounding, smooth, "
        "smooth-grounding, selector, cascade (runs only the members a question needs), judge (chooses among "
        "the members' answers and spans of their passages, by the reader's scores where the records hold them: "
        "eor run with a judge: section), or a voter an installed package adds (entry points eor.voters)",
    )
    _cost_options(train)
    train.add_argument(
        "--judge",
        metavar="JUDGE.json",
        help="with --voter cascade: the judge voter (eor train --voter judge) answers the questions no step stops, "
        "after the reader scores their candidates; the threshold is chosen for that cascade (needs --config and "
        "records the judge's scores grew)",
    )
    train.add_argument(
        "--cv", type=fold_count, metavar="K", help="first report K-fold cross-validation of every voter against Top R"
    )
    train.add_argument(
        "--inner-folds",
        type=positive_int,
        default=5,
        help="folds of the cross-validation that `auto` chooses by (default 5)",
    )
    _beyond_options(train)
    train.add_argument("--metric", default="em", help="correctness objective: em, f1 or contains (default em)")
    train.add_argument("--dev", help="run folder of held-out questions, scored for the report")
    train.add_argument(
        "--config",
        help="the pool's config: the weights file records its pool (members, reader, corpus), and records that "
        "hold more members train on its members alone; default: the pool.json `eor run` wrote beside the records",
    )
    _vote_options(train)
    train.add_argument(
        "--no-confidence",
        action="store_true",
        help="leave the reader's confidence out of the selector's features (used where the records hold it)",
    )
    train.add_argument(
        "--restarts", type=non_negative_int, default=4, help="seeded random Nelder-Mead starts (default 4)"
    )
    train.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the cross-validation folds and of Nelder-Mead's random starts (default 0)",
    )
    # log_level info: train's progress lines, on stderr
    train.set_defaults(handler="eor.cli.handlers.learn:cmd_train", log_level="info")


def _vote_options(train: argparse.ArgumentParser) -> None:
    """How the paper's voter compares and pools the members' answers."""
    train.add_argument(
        "--metrics",
        default="em,f1,cosine",
        help="similarity metrics, comma-separated, or a YAML mapping of metric to parameters, e.g. "
        "'{em: {}, bertscore: {num_layers: 6}}'",
    )
    train.add_argument("--pooling", default="mean", help="mean, max, majority, plurality, or search")
    train.add_argument("--grounding", action="store_true", help="learn a weight for answers found in their passages")


def _beyond_options(train: argparse.ArgumentParser) -> None:
    """Questions whose answer the corpus does not hold, for a P(right) whose guarantee covers a mix of both."""
    beyond = train.add_argument_group(
        "beyond the corpus (P(right) and abstention for questions the documents cannot answer; docs/abstention.md)"
    )
    beyond.add_argument(
        "--ablated",
        metavar="RECORDS",
        nargs="+",
        help="records of ablated copies of the training questions (eor ablate, then eor run): they teach P(right) "
        "what an unanswerable question looks like, and certify nothing",
    )
    beyond.add_argument(
        "--nocorpus",
        metavar="RECORDS",
        help="records of real questions whose answer the corpus does not hold: the thresholds are certified on them "
        "and the training questions, one test of the mix (they teach P(right) only without --ablated)",
    )
    beyond.add_argument(
        "--unanswerable-share",
        type=share_value,
        metavar="S",
        help="the share of questions you expect the corpus cannot answer: the thresholds of --risk hold for it (with "
        "--nocorpus), and P(unanswerable) is read at it (default: a third, 0.33)",
    )


def _cost_options(train: argparse.ArgumentParser) -> None:
    """The cascade's operating point (a tolerance or a budget) and what a member's cost is."""
    cost = train.add_argument_group("cost (the cascade; auto considers the cascade only with one of these)")
    cost.add_argument(
        "--max-loss",
        type=non_negative_float,
        metavar="POINTS",
        help="largest loss of accuracy against the full pool, in points (cascade default 0.5), by cross-validation",
    )
    cost.add_argument(
        "--budget",
        type=non_negative_float,
        metavar="SECONDS",
        help="the most accurate choice whose mean cost per question fits",
    )
    cost.add_argument(
        "--cost",
        default="auto",
        choices=["auto", "seconds", "tokens"],
        help="a member's cost: recorded seconds, or its token counts at the reader's rates (auto: tokens where "
        "the records hold them)",
    )
    cost.add_argument(
        "--rates",
        type=token_rates,
        metavar="PROMPT,GENERATED",
        help="the reader's tokens per second for token costs (default: fitted to the records' seconds)",
    )
    cost.add_argument(
        "--cost-order",
        default="cascade",
        choices=["cascade", "recorded"],
        help="the order a cascade's members are charged in: as the cascade runs them, each right after the member "
        "before it with the prompt prefix it keeps (default; needs --config with a llama.cpp reader and token "
        "counts), or as `eor run` recorded them (how weights files before this option were trained)",
    )


def add_calibrate(commands: Commands) -> None:
    calibrate = commands.add_parser(
        "calibrate",
        help="fit a trained voter's P(right) and --risk thresholds to labelled questions of your own (50 to 100), "
        "keeping the voter (docs/abstention.md, 'Your own documents')",
    )
    calibrate.add_argument(
        "records", help="run folder (or records.jsonl[.gz]) of `eor run` on your labelled questions (with answers)"
    )
    calibrate.add_argument(
        "--weights",
        required=True,
        help="the weights file to recalibrate: a path, or eor:weights/NAME.json, one shipped with eor (eor init's "
        "config answers with eor:weights/nq-offline-cascade.json)",
    )
    out_option(calibrate, "weights file to write (JSON): the same voter, its P(right) recalibrated")
    calibrate.add_argument(
        "--nocorpus",
        metavar="RECORDS",
        help="records of questions of yours that your documents cannot answer: the thresholds then hold for a mix "
        "(each kind bounded apart) at --unanswerable-share",
    )
    calibrate.add_argument(
        "--unanswerable-share",
        type=share_value,
        metavar="S",
        help="with --nocorpus: the share of questions you expect your documents cannot answer (default 0.33)",
    )
    calibrate.set_defaults(handler="eor.cli.handlers.learn:cmd_calibrate")


def add_design(commands: Commands) -> None:
    design = commands.add_parser(
        "design",
        help="choose a pool from training records of candidate members by cross-validation (docs/pool-design.md)",
    )
    design.add_argument("records", help="run folder (or records.jsonl[.gz]) of training questions with every candidate")
    design.add_argument("--config", required=True, help="the candidates' config (the records were run with it)")
    out_option(design, "folder to write: design.json, pool.yaml, selector.json, cascade.json")
    design.add_argument("--folds", type=fold_count, default=5, help="folds of each cross-validation (default 5)")
    design.add_argument("--repeats", type=positive_int, default=5, help="repeated K-fold splits (default 5)")
    design.add_argument("--seed", type=int, default=0, help="seed of the first split (default 0)")
    design.add_argument(
        "--rates",
        type=token_rates,
        metavar="PROMPT,GENERATED",
        help="the reader's tokens per second (default: fitted to the records' seconds)",
    )
    operating = design.add_mutually_exclusive_group()
    operating.add_argument(
        "--max-loss", type=non_negative_float, metavar="POINTS", help="the cascade's tolerance (default 0.5)"
    )
    operating.add_argument(
        "--budget",
        type=non_negative_float,
        metavar="SECONDS",
        help="instead: the cascade's most accurate point whose reader seconds per question fit (replayed costs)",
    )
    design.set_defaults(handler="eor.cli.handlers.learn:cmd_design")
