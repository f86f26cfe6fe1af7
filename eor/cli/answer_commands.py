"""`eor ask` (one question, printed as a table of every member's answer) and `eor serve` (the HTTP API and
the explorer page)."""

from __future__ import annotations

import argparse

from eor.cli.options import (
    Commands,
    all_members_option,
    cache_options,
    config_option,
    non_negative_float,
    risk_level,
    weights_option,
)

#: uvicorn's own log lines are "INFO:     ..."; eor's lines under `eor serve` look the same
SERVER_LOG_FORMAT = "%(levelname)s:     %(name)s: %(message)s"


def add_ask(commands: Commands) -> None:
    ask = commands.add_parser("ask", help="answer one question with the ensemble")
    ask.add_argument("question", help="the question, in quotes")
    config_option(ask)
    weights_option(ask, "for the vote")
    ask.add_argument("--json", action="store_true", help="print the full result object as JSON (with `stages`)")
    ask.add_argument(
        "--members", metavar="A,B,...", help="run and vote over only these members (comma-separated; default: all)"
    )
    ask.add_argument(
        "--explain",
        nargs="?",
        const="short",
        choices=("short", "full"),
        help="also print why: a short account (how it was chosen, the sentence that holds it, what P(right) rests "
        "on); `--explain full` adds the voter's raw account (every pairwise similarity or feature), as --json has it",
    )
    ask.add_argument(
        "--risk",
        type=risk_level,
        metavar="ALPHA",
        help="answer only if P(right) reaches the weights file's threshold for an error rate of at most ALPHA "
        "among answered questions, else say I don't know (docs/abstention.md); default: the config's voter.risk",
    )
    all_members_option(ask)
    cache_options(ask)
    ask.set_defaults(handler="eor.cli.handlers.ask:cmd_ask")


def add_serve(commands: Commands) -> None:
    serve = commands.add_parser(
        "serve",
        help="the explorer page at /, and the HTTP API: /v1/answer, OpenAI-compatible /v1/chat/completions, "
        "/healthz, /docs",
    )
    config_option(serve)
    weights_option(serve, "for the vote")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: local only)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument(
        "--api-key-env", metavar="VAR", help="require 'Authorization: Bearer <key>' with the key held by env VAR"
    )
    serve.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        help="serve an address other than 127.0.0.1/localhost without an API key (refused otherwise)",
    )
    _limit_options(serve)
    all_members_option(serve)
    serve.add_argument(
        "--reports", metavar="DIR", help="the benchmark reports the page lists: every folder under DIR with a report.md"
    )
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="lines logged by eor and uvicorn (default info: one per request)",
    )
    cache_options(serve)
    serve.set_defaults(handler="eor.cli.handlers.serve:cmd_serve", log_format=SERVER_LOG_FORMAT)


def _limit_options(serve: argparse.ArgumentParser) -> None:
    """What one request and the whole server may take: timeouts, batch, body, queue, shutdown grace."""
    limits = serve.add_argument_group("limits")
    limits.add_argument(
        "--member-timeout",
        type=float,
        default=60.0,
        help="seconds per question a member's retrieval may take before the vote leaves it out (default 60; 0: none)",
    )
    limits.add_argument(
        "--request-timeout",
        type=float,
        default=600.0,
        help="seconds a request may wait for its answer, queueing included, before a 504 (default 600)",
    )
    limits.add_argument(
        "--max-batch",
        type=int,
        help="most waiting questions answered together (default: 1 for a reader that runs prompts one by one, "
        "else the config's batch_size)",
    )
    limits.add_argument("--max-body-bytes", type=int, default=65536, help="larger bodies get 413 (default 64 KB)")
    limits.add_argument(
        "--max-queue", type=int, default=64, help="most questions waiting; more get 429 with Retry-After (default 64)"
    )
    limits.add_argument(
        "--shutdown-grace",
        type=non_negative_float,
        default=25.0,
        metavar="SECONDS",
        help="on SIGTERM, the questions accepted are answered if their measured answer time fits within SECONDS, "
        "the others get 503 with Retry-After (default 25: within Kubernetes' 30 s)",
    )
