"""Benchmark: the former reader path against the new one, side by side, on the same questions, cache off.

Each path is the real command (`python -m eor.cli run --no-cache ...`) on a copy of the config that differs
only in its `reader:` section:

- `fresh`: every prompt evaluated from an empty KV cache in batches of 512 (`prefix_chunk: 0`), the path
  before deterministic prefix reuse;
- `reuse`: prompts keep whole 64-token chunks of the previous prompt's KV cache (`prefix_chunk: 64`);
- further paths by `--path NAME:KEY=VALUE,...` (e.g. `--path u128:prefix_chunk=128`).

Per path: wall seconds, the reader's prompt tokens evaluated and kept, generated tokens and the seconds of
each phase (the run's `generation.json`), and the floor of the work: the reader seconds of its prompt tokens
evaluated and its generated tokens at the rates the first path measured (the cost model's
`eor.runs.costs.measured_rates` and `reader_seconds`). Every member's answer of every
path is checked against the first path's. The BM25 and dense indexes are built first, untimed.

    python -m benchmarks.bench_throughput --config configs/nq-offline16.yaml --data ../shared/data/nq/dev.jsonl \
        --limit 10 [--json out.json]

The cost of recording the reader's confidence (each token's log-probability, on by default):

    python -m benchmarks.bench_throughput --path silent:confidence=false --only reuse silent --limit 20
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks.bench_cache import records, timed_eor_run, warm_indexes
from eor.runs.costs import measured_rates, reader_seconds
from eor.runs.run_folder import RunFolder

ROOT = Path(__file__).resolve().parent.parent

PATHS = {"fresh": {"prefix_chunk": 0}, "reuse": {"prefix_chunk": 64}}


def parse_path(text: str) -> tuple[str, dict[str, Any]]:
    """`NAME:key=value,key=value` -> (NAME, {key: value}) with YAML-typed values."""
    name, _, settings = text.partition(":")
    options: dict[str, Any] = {}
    for item in filter(None, settings.split(",")):
        key, _, value = item.partition("=")
        options[key.strip()] = yaml.safe_load(value)
    return name, options


#: reader settings of the reader's own section (all others are llama.cpp options).
READER_KEYS = ("confidence", "max_tokens")


def config_copy(config: Path, reader: dict[str, Any], folder: Path, name: str) -> Path:
    """The config with `reader` merged into its reader's llama_cpp section (READER_KEYS into the reader's
    own), its corpus path made absolute."""
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    data["reader"] = data.get("reader") or {}
    own = {key: value for key, value in reader.items() if key in READER_KEYS}
    llama = {key: value for key, value in reader.items() if key not in READER_KEYS}
    data["reader"].update(own)
    data["reader"]["llama_cpp"] = {**(data["reader"].get("llama_cpp") or {}), **llama}
    corpus = (data.get("corpus") or {}).get("path")
    if corpus:
        data["corpus"]["path"] = str((config.parent / corpus).resolve())
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def run_path(config: Path, data: Path, limit: int, out: Path) -> dict[str, Any]:
    """Wall seconds of one `eor run --no-cache` and what its reader did (`generation.json`)."""
    seconds, _ = timed_eor_run(config, data, limit, out, "--no-cache")
    stats = RunFolder(out).read_generation()
    return {"wall_seconds": round(seconds, 2), **stats}


def answers(folder: Path) -> dict[tuple[str, str], str]:
    """Every member's answer of a run folder's records, by (question id, member)."""
    return {(r["id"], name): m["answer"] for r in records(folder) for name, m in r["members"].items()}


def compare(rows: dict[str, dict[str, Any]], config: Path, limit: int, data: Path) -> None:
    """Print each path's figures against the first path's, and add them to its row."""
    first = next(iter(rows))
    base = rows[first]
    rates = measured_rates(base)
    print(
        f"{config.name}, {limit} questions of {data.name}, cache off; rates of `{first}`: "
        f"{rates['prompt']:.0f} prompt tokens/s, {rates['generated']:.1f} generated tokens/s"
    )
    header = (
        f"{'path':<10} {'wall s':>8} {'speed-up':>8} {'prompt tok':>10} {'kept tok':>9} {'prompt s':>9} "
        f"{'gen tok':>8} {'gen s':>7} {'floor s':>8} {'same answers':>13}"
    )
    print(header)
    for name, row in rows.items():
        floor = reader_seconds(row["prompt_tokens"], row["generated_tokens"], rates)
        same = sum(row["answers"].get(key) == value for key, value in base["answers"].items())
        row.update(
            floor_seconds=round(floor, 1),
            same_answers=same,
            members_answers=len(base["answers"]),
            speedup=round(base["wall_seconds"] / row["wall_seconds"], 2),
        )
        print(
            f"{name:<10} {row['wall_seconds']:>8.1f} {row['speedup']:>7.2f}x {row['prompt_tokens']:>10} "
            f"{row['reused_tokens']:>9} {row['prompt_seconds']:>9.1f} {row['generated_tokens']:>8} "
            f"{row['generation_seconds']:>7.1f} {floor:>8.1f} {same:>6}/{len(base['answers'])}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "nq-offline.yaml")
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "nq" / "dev.jsonl")
    parser.add_argument("--limit", type=int, default=10, help="questions (default 10)")
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="NAME:KEY=VALUE,...",
        help="a further reader setting to compare (repeatable)",
    )
    parser.add_argument("--only", nargs="+", help="run only these paths (default: fresh, reuse and --path)")
    parser.add_argument("--json", type=Path, help="also write the table as JSON")
    args = parser.parse_args(argv)
    paths = {**PATHS, **dict(parse_path(text) for text in args.path)}
    if args.only:
        paths = {name: paths[name] for name in args.only}

    warm_indexes(args.config)
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="eor-bench-throughput-") as tmp:
        folder = Path(tmp)
        for name, reader in paths.items():
            print(f"running {name} ({reader}) ...", file=sys.stderr, flush=True)
            rows[name] = run_path(config_copy(args.config, reader, folder, name), args.data, args.limit, folder / name)
            rows[name]["reader"] = reader
            rows[name]["answers"] = answers(folder / name)

    compare(rows, args.config, args.limit, args.data)
    if args.json:
        for row in rows.values():
            row.pop("answers")
        args.json.write_text(json.dumps({"config": args.config.name, "limit": args.limit, "paths": rows}, indent=2))
    identical = all(row["same_answers"] == row["members_answers"] for row in rows.values())
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
