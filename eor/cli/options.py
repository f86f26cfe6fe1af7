"""What several commands share: argument types that refuse bad values before any work, the options that mean
the same in every command (each defined once), and what those options resolve to (a config path, the
generation cache, the executor's settings)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from eor.core.config import default_config_path
from eor.core.errors import InputError
from eor.core.rates import parse_rates
from eor.pipeline.members import member_list
from eor.runs.generation_cache import GenerationCache, default_cache_path

#: what `add_parser` is called on: the sub-commands of `eor` or of a command group
Commands = argparse._SubParsersAction


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


def positive_float(text: str) -> float:
    value = non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


def token_rates(text: str) -> dict[str, float]:
    """An argparse type: PROMPT,GENERATED tokens per second, both finite and > 0 (`--rates 281,60`,
    eor.runs.costs.parse_rates)."""
    try:
        return parse_rates(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def risk_level(text: str) -> float:
    """An argparse type: an error rate strictly between 0 and 1 (`--risk 0.3`)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1:  # NaN fails the comparison
        raise argparse.ArgumentTypeError(f"expected an error rate strictly between 0 and 1, e.g. 0.3; got {text}")
    return value


def config_path(value: str | None) -> Path:
    return Path(value) if value else default_config_path()


def member_names(text: str | None) -> list[str] | None:
    return None if text is None else member_list(text)


def cache_setting(args: argparse.Namespace) -> Any:
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


def config_option(parser: argparse.ArgumentParser, *, holds: str = "") -> None:
    parser.add_argument("--config", help=f"ensemble config (YAML){holds}; default: configs/default.yaml")


def data_option(parser: argparse.ArgumentParser, fields: str) -> None:
    parser.add_argument("--data", required=True, help=f"questions, JSON Lines with {fields}")


def out_option(parser: argparse.ArgumentParser, holds: str) -> None:
    parser.add_argument("--out", required=True, help=holds)


def limit_option(parser: argparse.ArgumentParser, items: str = "questions") -> None:
    parser.add_argument("--limit", type=positive_int, help=f"only the first N {items}")


def batch_size_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch-size", type=positive_int, help="questions per reader batch (default: the config's batch_size)"
    )


def executor_options(parser: argparse.ArgumentParser) -> None:
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
        help="batches of questions per shard on Ray (default 4)",
    )


def executor_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What `executor_options` resolve to: the arguments of `eor.pipeline.executor.build_executor`, which the handlers
    call (it loads the reader backends, so the parsers do not import it)."""
    return {
        "kind": args.executor,
        "address": args.ray_address,
        "workers": args.workers,
        "cpus_per_worker": args.cpus_per_worker,
        "gpus_per_worker": args.gpus_per_worker,
        "shard_batches": args.shard_batches,
    }


def member_option(parser: argparse.ArgumentParser, role: str) -> None:
    parser.add_argument("--member", required=True, help=f"{role}, in the paper's notation (e.g. BM25)")


def weights_option(parser: argparse.ArgumentParser, use: str) -> None:
    parser.add_argument("--weights", help=f"trained voter weights (JSON from `eor train`) {use}")


def all_members_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--all-members",
        action="store_true",
        help="run every member (default: cheapest first, stopping once the rest cannot change the answer)",
    )


def cache_options(parser: argparse.ArgumentParser) -> None:
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


def share_value(text: str) -> float:
    """A share in [0, 1): argparse's type for --unanswerable-share."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text}")
    return value
