"""`eor run` (every member on a file of questions; resumable records), `eor plan` (reader time of a benchmark
from a pilot run) and `eor records` (pack a run into one file, unpack it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.cli.options import (
    Commands,
    batch_size_option,
    cache_options,
    config_option,
    data_option,
    executor_options,
    limit_option,
    out_option,
    positive_int,
    weights_option,
)
from eor.runs.run_folder import pack_records, unpack_records


def add_run(commands: Commands) -> None:
    run = commands.add_parser("run", help="run every member on every question of a file; writes records")
    config_option(run)
    data_option(run, "'question' [, 'id', 'answers']")
    out_option(run, "run folder: records.jsonl and config.json (re-run to resume)")
    limit_option(run)
    batch_size_option(run)
    executor_options(run)
    weights_option(run, "for the recorded vote")
    run.add_argument(
        "--retry-failed",
        action="store_true",
        help="run again only the members that failed on a question (its 'degraded'), merge and re-vote",
    )
    cache_options(run)
    run.set_defaults(handler="eor.cli.handlers.run:cmd_run")


def add_ablate(commands: Commands) -> None:
    ablate = commands.add_parser(
        "ablate",
        help="a question file of ablated copies: each question with its gold passages and every passage holding a "
        "gold answer withheld from retrieval (questions the corpus cannot answer; docs/abstention.md)",
    )
    data_option(ablate, "'question', 'answers' [, 'id', 'gold_passages']")
    ablate.add_argument("--corpus", required=True, help="the corpus the pool retrieves from (JSON Lines)")
    out_option(ablate, "question file to write; `eor run --data` on it withholds each copy's passages")
    limit_option(ablate)
    ablate.set_defaults(handler="eor.cli.handlers.ablate:cmd_ablate")


def cmd_records_pack(args: argparse.Namespace) -> int:
    count = pack_records(Path(args.run), Path(args.out))
    print(f"{count} records of {args.run} packed into {args.out}, headed by the pool's identity and config")
    return 0


def cmd_records_unpack(args: argparse.Namespace) -> int:
    count = unpack_records(Path(args.file), Path(args.out))
    print(
        f"{count} records of {args.file} unpacked into {args.out} with their config and pool; `eor run --out "
        f"{args.out}` resumes them, or grows them by a config's new members"
    )
    return 0


def add_records(commands: Commands) -> None:
    records = commands.add_parser("records", help="run records: pack a run into one file to keep or share, unpack it")
    actions = records.add_subparsers(dest="action", required=True, metavar="ACTION")
    pack = actions.add_parser(
        "pack", help="one gzip file of a run's records, headed by its pool (reader, model digest, corpus) and config"
    )
    pack.add_argument("run", help="run folder of `eor run` (records.jsonl, config.json, pool.json)")
    out_option(pack, "records file to write (.jsonl.gz); `eor train` and `eor bench` read it")
    pack.set_defaults(handler="eor.cli.runs_commands:cmd_records_pack")
    unpack = actions.add_parser(
        "unpack", help="a packed records file back into a run folder (records, config, pool) to resume or grow"
    )
    unpack.add_argument("file", help="packed records file (.jsonl.gz) of `eor records pack`")
    out_option(unpack, "run folder to create; `eor run --out` on it resumes the run or grows it by new members")
    unpack.set_defaults(handler="eor.cli.runs_commands:cmd_records_unpack")


def add_plan(commands: Commands) -> None:
    plan = commands.add_parser(
        "plan", help="reader time of a benchmark, from a pilot run's tokens and rates (docs/scale.md)"
    )
    plan.add_argument("pilot", help="run folder of `eor run` on a few questions (its generation.json)")
    plan.add_argument("--questions", type=positive_int, required=True, help="questions of the planned benchmark")
    plan.add_argument("--replicas", type=positive_int, default=1, help="reader replicas working at once (default 1)")
    plan.add_argument("--prompt-rate", type=float, help="prompt tokens/s of the target reader (default: the pilot's)")
    plan.add_argument(
        "--generation-rate", type=float, help="generated tokens/s of the target reader (default: the pilot's)"
    )
    plan.add_argument("--json", action="store_true", help="print the estimate as JSON")
    plan.set_defaults(handler="eor.cli.handlers.plan:cmd_plan")
