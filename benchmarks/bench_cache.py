"""Benchmark: `eor run` of a config twice on the same questions, the first populating a fresh generation cache,
the second served by it; both timed side by side, their records checked to be identical apart from timings.

Each run is the real command (`python -m eor.cli run ... --cache FILE`) in a fresh output folder, so the time
includes loading the reader and the encoders, retrieval and voting: what a user re-running a command saves.
The indexes of the config's BM25 and dense sources are built first, untimed, so the first run does not pay
for them. The cache file lives in a temporary folder; the user's cache is not touched.

    python -m benchmarks.bench_cache [--config configs/default.yaml] [--data eor/demo/questions.jsonl] [--limit 10]
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from eor.core.config import load_config
from eor.pipeline.members import source_pool
from eor.runs.records import read_records
from retrievers import notation

ROOT = Path(__file__).resolve().parent.parent
INDEXED_TYPES = ("bm25", "dense")


def warm_indexes(config_path: Path) -> list[str]:
    """Build (or load) the persisted index of every BM25 and dense source the members use; returns their names."""
    config = load_config(config_path)
    pool = source_pool(config, None)  # no reader: only the indexes are built
    specs = pool.specs
    used = sorted({name for member in config.members for name in notation.sources(notation.parse(member))})
    warmed = [name for name in used if name in specs and specs[name][0] in INDEXED_TYPES]
    for name in warmed:
        pool.source(name).batch(["warm up"])
    return warmed


def timed_eor_run(config: Path, data: Path, limit: int, out: Path, *options: str) -> tuple[float, str]:
    """Wall seconds and standard output of one `eor run` (the real command, this checkout on its path);
    exits with its error when it fails."""
    command = [
        sys.executable,
        "-m",
        "eor.cli",
        "run",
        "--config",
        str(config),
        "--data",
        str(data),
        "--limit",
        str(limit),
        "--out",
        str(out),
        *options,
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        sys.exit(f"`{shlex.join(command)}` failed:\n{completed.stderr[-2000:]}")
    return seconds, completed.stdout


def run_once(config: Path, data: Path, limit: int, out: Path, cache: Path) -> tuple[float, str]:
    """Wall seconds of one `eor run` and its summary line about the generation cache."""
    seconds, stdout = timed_eor_run(config, data, limit, out, "--cache", str(cache))
    line = next((row for row in stdout.splitlines() if row.startswith("generation cache")), "")
    return seconds, line


def untimed(record: dict[str, Any]) -> dict[str, Any]:
    """A record without its timings: each member's `seconds` (retrieval plus generation time)."""
    members = {name: {k: v for k, v in member.items() if k != "seconds"} for name, member in record["members"].items()}
    return {**record, "members": members}


def records(folder: Path) -> list[dict[str, Any]]:
    """The run folder's records, each as its line's object (eor.runs.records, the one door to them)."""
    return [record.to_dict() for record in read_records(folder)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.yaml")
    parser.add_argument("--data", type=Path, default=ROOT / "eor" / "demo" / "questions.jsonl")
    parser.add_argument("--limit", type=int, default=10, help="questions (default 10)")
    args = parser.parse_args(argv)

    warmed = warm_indexes(args.config)
    with tempfile.TemporaryDirectory(prefix="eor-bench-cache-") as folder:
        cache = Path(folder) / "generations.sqlite"
        first = run_once(args.config, args.data, args.limit, Path(folder) / "first", cache)
        second = run_once(args.config, args.data, args.limit, Path(folder) / "second", cache)
        a, b = records(Path(folder) / "first"), records(Path(folder) / "second")
        identical = [untimed(r) for r in a] == [untimed(r) for r in b]
        member_seconds = [sum(m["seconds"] for r in run for m in r["members"].values()) for run in (a, b)]

    print(
        f"eor run of {args.config.name} on {len(a)} questions of {args.data.name} "
        f"(indexes built beforehand: {', '.join(warmed) or 'none'})"
    )
    print(f"{'run':<22} {'wall s':>8}  generation cache")
    print(f"{'1: fills the cache':<22} {first[0]:>8.2f}  {first[1]}")
    print(f"{'2: served by it':<22} {second[0]:>8.2f}  {second[1]}")
    print(f"speed-up: {first[0] / second[0]:.1f}x")
    print(
        f"records identical apart from timings: {'yes' if identical else 'NO'} "
        f"(sum of members' seconds: {member_seconds[0]:.2f} vs {member_seconds[1]:.2f})"
    )
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
