"""`eor ask` (one question, printed as a table of every member's answer) and `eor serve` (the HTTP API and
the explorer page)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from eor.cli.options import (
    Commands,
    all_members_option,
    cache_options,
    cache_setting,
    config_option,
    config_path,
    member_names,
    non_negative_float,
    risk_level,
    weights_option,
)
from eor.data import check_question
from eor.json_ready import json_ready
from eor.server.settings import ServerSettings, api_key_from_env

#: uvicorn's own log lines are "INFO:     ..."; eor's lines under `eor serve` look the same
SERVER_LOG_FORMAT = "%(levelname)s:     %(name)s: %(message)s"


def cmd_ask(args: argparse.Namespace) -> int:
    from eor.ensemble import Ensemble

    question = check_question(args.question)
    members = member_names(args.members)
    ensemble = Ensemble.from_config(config_path(args.config), weights=args.weights, cache=cache_setting(args))
    risk = args.risk if args.risk is not None else ensemble.config.voter.risk
    result = ensemble.answer(question, members=members, lazy=not args.all_members, risk=risk)
    explanation = json_ready(ensemble.explain(result)) if args.explain else None
    if args.json:
        body = result.to_dict()
        if explanation is not None:
            body["explanation"] = explanation
        print(json.dumps(body, ensure_ascii=False, indent=2))
    else:
        print(format_result(result))
        if explanation is not None:
            print("\nwhy (the vote's account of each member):")
            print(json.dumps(explanation["members"], ensure_ascii=False, indent=2))
    return 0


def format_result(result) -> str:
    """The chosen answer, then a table of every member's answer and vote score."""
    rows = [
        (name, out.answer, f"{out.score:.3f}" if out.score is not None else "-") for name, out in result.members.items()
    ]
    width = max(len("member"), *(len(r[0]) for r in rows))
    answer_width = min(max(len("answer"), *(len(r[1]) for r in rows)), 60)
    if result.abstained:
        declined = result.members[result.member].answer
        givers = ", ".join(result.given_by)
        answer = f"I don't know: {result.abstention['reason']}   (declined the answer {declined!r} of {givers})"
    else:
        answer = f"{result.answer}   (given by {', '.join(result.given_by)})"
    lines = [f"Question: {result.question}", f"Answer:   {answer}"]
    if result.probability is not None:
        lines.append(f"P(right): {result.probability:.2f}")
    if result.abstention is not None and not result.abstained:
        lines.append(f"Risk:     {result.abstention['reason']}")
    lines += [
        "",
        f"  {'member':<{width}}  {'answer':<{answer_width}}  score",
        f"  {'-' * width}  {'-' * answer_width}  -----",
    ]
    for name, answer, score in rows:
        mark = "*" if name in result.given_by else " "
        shown = answer if len(answer) <= answer_width else answer[: answer_width - 1] + "…"
        lines.append(f"{mark} {name:<{width}}  {shown:<{answer_width}}  {score}")
    lines.append(
        f"\n{result.timings['total']:.2f} s per question "
        f"(retrieval {result.timings['retrieval']:.2f}, generation {result.timings['generation']:.2f})"
    )
    if result.cascade is not None:
        skipped = f"; not run: {', '.join(result.cascade['skipped'])}" if result.cascade["skipped"] else ""
        lines.append(f"cascade {result.cascade['reason']}{skipped}")
    elif result.skipped:
        lines.append(f"not needed (lazy vote): {', '.join(result.skipped)}")
    return "\n".join(lines)


def cmd_serve(args: argparse.Namespace) -> int:
    from eor.server.run import serve

    settings = ServerSettings(
        host=args.host,
        port=args.port,
        api_key=api_key_from_env(args.api_key_env) if args.api_key_env else None,
        member_timeout=args.member_timeout or None,
        lazy=not args.all_members,
        request_timeout=args.request_timeout,
        max_batch=args.max_batch,
        max_body_bytes=args.max_body_bytes,
        max_queue=args.max_queue,
        shutdown_grace=args.shutdown_grace,
        reports=Path(args.reports) if args.reports else None,
        allow_unauthenticated=args.allow_unauthenticated,
    )
    serve(
        config_path(args.config),
        weights=args.weights,
        settings=settings,
        log_level=args.log_level,
        cache=cache_setting(args),
    )
    return 0


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
        "--explain", action="store_true", help="also print why the vote chose its answer (as the API's explain)"
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
    ask.set_defaults(handler=cmd_ask)


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
    serve.set_defaults(handler=cmd_serve, log_format=SERVER_LOG_FORMAT)


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
