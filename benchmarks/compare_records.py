"""Two runs of the same pool on the same questions, member by member: the share of identical answers, and
every difference with what explains it.

A difference is explained when the prompt itself changed (the member retrieved other passages, or the
template changed), or when the former reader path (`prefix_chunk: 0`: every prompt from an empty KV cache in
512-token batches) reproduces the old answer on the same prompt (`--explain`, which loads the reader of
`--config`); any other difference is a determinism bug.

    python -m benchmarks.compare_records OLD NEW [--explain --config configs/nq-offline.yaml] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from eor.core.config import load_config
from eor.core.prompts import clean_answer
from eor.core.results import Record
from eor.readers import build_reader
from eor.runs.records import read_records

ROOT = Path(__file__).resolve().parent.parent


def differences(old: list[Record], new: list[Record]) -> tuple[dict[str, dict[str, int]], list[dict[str, Any]]]:
    """(per member: compared and identical answers, the differences), over the questions both hold; `old` and
    `new` are records (eor.core.results.Record)."""
    newer = {record.id: record for record in new}
    counts: dict[str, list[int]] = {}
    found: list[dict[str, Any]] = []
    for record in old:
        other = newer.get(record.id)
        if other is None:
            continue
        for name, output in record.members.items():
            if name not in other.members:
                continue
            fresh = other.members[name]
            tally = counts.setdefault(name, [0, 0])
            tally[0] += 1
            if output.answer == fresh.answer:
                tally[1] += 1
                continue
            found.append(
                {
                    "id": record.id,
                    "member": name,
                    "old": output.answer,
                    "new": fresh.answer,
                    "same_prompt": output.prompt == fresh.prompt,
                    "prompt": fresh.prompt,
                }
            )
    return {name: {"compared": c, "identical": i} for name, (c, i) in counts.items()}, found


def explain(found: list[dict[str, Any]], config_path: Path) -> None:
    """Generate each differing same-prompt answer again with the former path (prefix_chunk 0)."""
    config = load_config(config_path)
    config.reader.llama_cpp.prefix_chunk = 0
    reader = build_reader(config.reader)
    for entry in found:
        if entry["same_prompt"]:
            former = clean_answer(reader.generate([entry["prompt"]])[0])
            entry["former_path"] = former
            entry["explained"] = former == entry["old"]
        else:
            entry["explained"] = True  # the prompt changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="records (run folder or .jsonl[.gz]) of the earlier run")
    parser.add_argument("new", help="records of the later run")
    parser.add_argument("--explain", action="store_true", help="regenerate same-prompt differences, former path")
    parser.add_argument("--config", default=str(ROOT / "configs/nq-offline.yaml"), help="the pool's config")
    parser.add_argument("--out", help="also write the figures and every difference as JSON")
    args = parser.parse_args(argv)

    per_member, found = differences(read_records(args.old), read_records(args.new))
    if args.explain:
        explain(found, Path(args.config))
    compared = sum(entry["compared"] for entry in per_member.values())
    identical = sum(entry["identical"] for entry in per_member.values())
    print(f"{identical} of {compared} member answers identical ({100 * identical / max(compared, 1):.2f}%)")
    for name, entry in per_member.items():
        print(f"  {name:<16} {entry['identical']:>5} / {entry['compared']}")
    for entry in found:
        why = "prompt changed" if not entry["same_prompt"] else "same prompt"
        if "former_path" in entry:
            why += f"; former path gives {entry['former_path']!r}" + (" (explained)" if entry["explained"] else "")
        print(f"  {entry['id']} {entry['member']}: {entry['old']!r} -> {entry['new']!r} ({why})")
    if args.out:
        document = {"compared": compared, "identical": identical, "members": per_member, "differences": found}
        Path(args.out).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
