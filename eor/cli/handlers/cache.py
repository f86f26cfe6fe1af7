"""What `eor cache stats` and `eor cache clear` do, over every persistent cache of eor.core.cache_policy (the
pair-score cache lives in `voters` and the vector cache in `retrievers`, whose imports load numpy)."""

from __future__ import annotations

import argparse
from pathlib import Path

from eor.core.cache_policy import CacheReport
from eor.core.errors import InputError
from eor.core.models import hashes_dir, models_dir
from eor.runs.generation_cache import ENV_VARIABLE, GenerationCache, default_cache_path, format_stats
from retrievers.index_store import report as index_store_report
from retrievers.vector_cache import VectorCache
from retrievers.web.web_cache import WebCache
from voters.similarity.pair_score_cache import PairScoreCache

#: what `eor cache clear --which` names beside `generations`: a cache with `clear()` and `report()`
CLEARABLE: dict[str, type[PairScoreCache] | type[WebCache] | type[VectorCache]] = {
    "pair-scores": PairScoreCache,
    "web": WebCache,
    "vectors": VectorCache,
}


def cmd_cache_stats(args: argparse.Namespace) -> int:
    """Every persistent cache at its default place (the generation cache's file: --cache), one block each."""
    path = _cache_file(args)
    if not path.exists():  # looking must not create it
        blocks = ["\n".join(CacheReport("generation cache", str(path), found=False).lines())]
    else:
        with GenerationCache(path) as cache:
            blocks = [format_stats(cache.stats())]
    reports = [PairScoreCache().report(), WebCache().report(), VectorCache().report()]
    blocks += ["\n".join(report.lines()) for report in reports]
    blocks.append(index_store_report())
    kept = [CacheReport.kept("packaged models", models_dir()), CacheReport.kept("model file hashes", hashes_dir())]
    blocks += ["\n".join(report.lines()) for report in kept]
    print("\n\n".join(blocks))
    return 0


def cmd_cache_clear(args: argparse.Namespace) -> int:
    if args.which != "generations":
        return _clear_other(args)
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


def _clear_other(args: argparse.Namespace) -> int:
    if args.cache or args.reader is not None:
        raise InputError(f"--cache and --reader name generations; `--which {args.which}` clears its default place")
    cache = CLEARABLE[args.which]()
    deleted = cache.clear()
    report = cache.report()
    print(f"deleted {deleted} entries of the {report.name} at {report.path}")
    return 0


def _cache_file(args: argparse.Namespace) -> Path:
    path = Path(args.cache) if args.cache else default_cache_path()
    if path is None:
        raise InputError(f"{ENV_VARIABLE} turns the generation cache off; name a file with --cache FILE")
    return path
