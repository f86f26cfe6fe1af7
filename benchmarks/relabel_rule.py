"""Probe (issues 58 and 60): records whose judge scores were made under one candidate rule, relabelled as made
under another, so that a voter trained on records of the other rule takes them (training only, never dev).

A judge voter refuses records scored under a rule that is not its own (eor.learning.judge_training). To ask, before
spending reader time on new scores, whether a voter trained with `pointed` would gain from questions recorded with
`entities` scores (the ablated copies, the no-corpus questions), their scores are relabelled: each scored record's
`judge.identity.rule` is set to `--rule`, nothing else changed. The candidates stay the old rule's, so the judge's
answers on them only approximate what scoring under the new rule would give; the members' answers, and so every
cascade step's, are exact. The packed file is unpacked into `--out` (a new run folder, published whole), its records
replaced there; records without judge scores are left as they are.

    python -m benchmarks.relabel_rule docs/records/nq-train-ablated.jsonl.gz --rule pointed \
        --out runs/probe/nq-train-ablated
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from eor.core.atomic import atomic_folder
from eor.runs.run_folder import RunFolder, unpack_records


def relabelled(packed: Path, rule: str, out: Path) -> tuple[int, int]:
    """Unpack `packed` into `out` (a new folder, written whole: eor.core.atomic) with every judge identity's rule
    set to `rule`: (records, relabelled)."""
    if out.exists():
        raise SystemExit(f"{out} exists: relabelled records go into a new folder")
    with atomic_folder(out) as partial:
        unpack_records(packed, partial)
        folder = RunFolder(partial)
        records = folder.read_records()
        changed = 0
        for i, record in enumerate(records):
            if record.judge is None:
                continue
            identity = {**record.judge["identity"], "rule": rule}
            records[i] = dataclasses.replace(record, judge={**record.judge, "identity": identity})
            changed += 1
        folder.replace_records(records)
    return len(records), changed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("packed", type=Path, help="a packed records file (eor records pack)")
    parser.add_argument("--rule", required=True, help="the candidate rule to label the judge's scores with")
    parser.add_argument("--out", type=Path, required=True, help="the run folder to write (must not exist)")
    args = parser.parse_args(argv)
    total, changed = relabelled(args.packed, args.rule, args.out)
    print(f"{args.out}: {changed} of {total} records' judge scores relabelled as rule {args.rule!r}")


if __name__ == "__main__":
    main()
