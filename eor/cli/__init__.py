"""The `eor` command line: one module per group of commands with their parsers, each named `GROUP_commands`
(`answer_commands`: ask, serve; `retrieve_commands`; `runs_commands`: run, plan, records; `learn_commands`:
train, design; `evaluate_commands`: bench, compare, erag, utility; `start_commands`: init, imports, models,
cache), and the options they share (`options`).

A parser names its command's handler as "module:function" (its `handler` default), and `main` imports that
module only when the command runs: so `eor --help` loads no heavy library. Handlers that need one (models,
numpy, a web server) live in `eor.cli.handlers`, one module per set of commands that load the same
libraries, named after its command or commands (`handlers.learn`: train and design), never `_commands`, so a
parser module and a handler module never share a name; the other handlers stay beside their parsers.

`main` parses, configures logging once (a command's parser may set `log_level` and `log_format` as its
defaults), runs the handler and turns eor's errors into one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Callable

from eor import __version__
from eor.cli import (
    answer_commands,
    evaluate_commands,
    learn_commands,
    retrieve_commands,
    runs_commands,
    start_commands,
)
from eor.core.errors import EorError, InputError

#: the order of `eor --help`
COMMANDS = (
    answer_commands.add_ask,
    retrieve_commands.add_parser,
    runs_commands.add_run,
    runs_commands.add_ablate,
    runs_commands.add_plan,
    learn_commands.add_train,
    learn_commands.add_calibrate,
    learn_commands.add_design,
    evaluate_commands.add_bench,
    evaluate_commands.add_compare,
    answer_commands.add_serve,
    start_commands.add_models,
    evaluate_commands.add_erag,
    evaluate_commands.add_utility,
    start_commands.add_cache,
    runs_commands.add_records,
    start_commands.add_init,
    start_commands.add_imports,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eor",
        description="Ensemble of Retrievers: several retrievers feed one reader LLM; a voter picks the answer.",
    )
    parser.add_argument("--version", action="version", version=f"eor {__version__}")
    # warnings alone, as bare lines on stderr, unless a command asks for more (train's progress, serve's log)
    parser.set_defaults(log_level="warning", log_format="%(message)s")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format=args.log_format)
    try:
        return handler(args.handler)(args)
    except EorError as exc:
        print(
            f"eor: error: {str(exc).splitlines()[0] if not isinstance(exc, InputError) else exc}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("eor: interrupted; finished work is saved (re-run the same command to resume)", file=sys.stderr)
        return 130


def handler(name: str) -> Callable[[argparse.Namespace], int]:
    """The function that a parser's `handler` default names as "module:function", its module imported now."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)
