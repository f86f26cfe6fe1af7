"""The one split of the first 400 no-corpus questions (docs/records/nq-nocorpus400.jsonl.gz): a seeded draw of
exactly 200 to learn and choose from and 200 kept for the figures of docs/abstention.md ("Beyond the corpus"),
their ids written beside the records (`--out`), and each half packed as records of its own
(`nq-nocorpus-learn200.jsonl.gz`, `nq-nocorpus-kept200.jsonl.gz` beside it). The questions of `nocorpus.jsonl`
after the 400th stay unread.

    python -m benchmarks.nocorpus_split docs/records/nq-nocorpus400.jsonl.gz \
        --out docs/records/nq-nocorpus400-split.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from eor.core.atomic import write_text_atomically
from eor.runs.records import read_records
from eor.runs.run_folder import RunFolder, pack_records, unpack_records

SEED = 58  # fixed before the draw: the number


def split(ids: list[str], seed: int = SEED) -> dict[str, list[str]]:
    """Half of `ids` (sorted first, so the draw depends on the ids alone) to learn from, the other half kept."""
    ordered = sorted(ids)
    drawn = np.random.default_rng(seed).permutation(len(ordered))
    half = len(ordered) // 2
    return {"learn": sorted(ordered[i] for i in drawn[:half]), "kept": sorted(ordered[i] for i in drawn[half:])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="the no-corpus records (.jsonl.gz)")
    parser.add_argument("--out", required=True, help="the split's JSON file")
    args = parser.parse_args(argv)
    ids = [record.id for record in read_records(args.records)]
    if len(ids) % 2:
        raise SystemExit(f"{args.records}: {len(ids)} questions, not an even number to halve")
    halves = split(ids)
    document = {
        "records": args.records,
        "seed": SEED,
        "how": "numpy.random.default_rng(seed).permutation over the sorted ids: the first half learn, the rest kept",
        **halves,
    }
    write_text_atomically(args.out, json.dumps(document, indent=1) + "\n")
    for half, ids_of_half in halves.items():
        out = Path(args.out).with_name(f"nq-nocorpus-{half}{len(ids_of_half)}.jsonl.gz")
        _pack_subset(Path(args.records), set(ids_of_half), out)
        print(f"{len(ids_of_half)} questions ({half}) packed into {out}")
    print(f"the split's ids written to {args.out}")
    return 0


def _pack_subset(records: Path, ids: set[str], out: Path) -> None:
    """The records of `ids` (in their order) packed into `out`, headed as `records` is."""
    with tempfile.TemporaryDirectory() as tmp:
        unpack_records(records, tmp)
        folder = RunFolder(Path(tmp))
        folder.replace_records([record for record in folder.read_records() if record.id in ids])
        pack_records(tmp, out)


if __name__ == "__main__":
    raise SystemExit(main())
