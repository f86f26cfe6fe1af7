"""Live cascade against the full pool, with the real reader: wall seconds per question and agreement.

Two arms, each in a process of its own (so neither warms the other's caches), each loading its models and
answering a warm-up question before the clock starts, then answering the same questions one at a time with
the generation cache off (every prompt is generated):

- `cascade`: the config with a cascade weights file, answered as `eor ask` does (members one step at a time,
  the rest skipped once the cascade stops);
- `full`: the config with the full-pool selector's weights file, every member run (`eor ask --all-members`).

    python -m benchmarks.bench_cascade_live [--config C] [--data Q.jsonl] [--limit 30] [--out FILE.json]
    python -m benchmarks.bench_cascade_live --compare today configs/nq-offline.yaml \\
        docs/weights/nq-offline-cascade.json lazy --compare designed D/pool.yaml D/cascade.json lazy

Defaults: configs/nq-offline.yaml, the first 30 questions of ../shared/data/nq/dev.jsonl,
docs/weights/nq-offline-cascade.json against docs/weights/nq-offline-auto.json. `--compare NAME CONFIG WEIGHTS
MODE` (repeated) sets the arms instead, e.g. a designed pool's cascade against today's (docs/pool-design.md);
the ratio printed is the first arm's wall time over the last's. `--risk ALPHA` answers as `eor ask --risk` does
(a decline scores 0 and is counted), `--ids FILE:KEY` takes only the questions a split file lists, e.g. the first 30
no-corpus questions kept for figures (docs/abstention.md):

    python -m benchmarks.bench_cascade_live --data ../shared/data/nq/nocorpus.jsonl \
        --ids docs/records/nq-nocorpus400-split.json:kept --risk 0.3 --compare new configs/nq-offline.yaml \
        docs/weights/nq-offline-cascade.json lazy --compare today configs/nq-offline.yaml OLD.json lazy

Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.answers import matches_gold
from eor.core.data import load_questions
from eor.pipeline.ensemble import Ensemble

ROOT = Path(__file__).resolve().parent.parent
WARM_UP = "who wrote the odyssey"


def questions_of(data: str, limit: int, ids: str | None) -> list[Any]:
    """The first `limit` questions of `data`, or of those whose ids a split file lists (`FILE:KEY`, e.g.
    docs/records/nq-nocorpus400-split.json:kept), in the file's order."""
    if ids is None:
        return load_questions(Path(data), limit=limit)
    path, _, key = ids.rpartition(":")
    listed = set(json.loads(Path(path).read_text(encoding="utf-8"))[key])
    return [question for question in load_questions(Path(data)) if question.id in listed][:limit]


def run_arm(
    config: str, weights: str, data: str, limit: int, lazy: bool, out: str, risk: float | None, ids: str | None
) -> None:
    """One arm, in this process: load, warm up, then answer each question with the cache off (at `risk`)."""
    ensemble = Ensemble.from_config(config, weights=weights, cache=False)
    ensemble.answer(WARM_UP, lazy=False)  # every model loaded (reader, encoder, indexes) before the clock
    rows: list[dict[str, Any]] = []
    for question in questions_of(data, limit, ids):
        started = time.perf_counter()
        result = ensemble.answer(question, lazy=lazy, risk=risk)
        wall = time.perf_counter() - started
        answer = result.answer  # None where eor abstained: no exact match
        em = 0.0 if answer is None else float(matches_gold(answer, question.answers))
        rows.append(
            {
                "id": question.id,
                "answer": result.answer,
                "member": result.member,
                "seconds": wall,
                "members_run": len(result.members) + len(result.degraded),
                "em": em,
                "reason": (result.cascade or {}).get("reason"),
                "judged": result.judged is not None,  # a judge chose among the candidates (docs/judge.md)
                "abstained": result.abstained,  # at --risk
                "kind": (result.abstention or {}).get("kind"),
            }
        )
        shown = answer if answer is None else answer[:40]
        print(f"{len(rows):3d} {wall:6.2f} s  {shown!r}", file=sys.stderr, flush=True)
    Path(out).write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs/nq-offline.yaml"))
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/nq/dev.jsonl"))
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--cascade", default=str(ROOT / "docs/weights/nq-offline-cascade.json"))
    parser.add_argument("--full", default=str(ROOT / "docs/weights/nq-offline-auto.json"))
    parser.add_argument(
        "--compare",
        nargs=4,
        action="append",
        metavar=("NAME", "CONFIG", "WEIGHTS", "MODE"),
        help="an arm of its own (repeat it; MODE lazy: as eor ask answers, all: every member); instead of the "
        "default arms full and cascade of --config",
    )
    parser.add_argument("--risk", type=float, help="answer at this risk (eor ask --risk): a decline counts as wrong")
    parser.add_argument("--ids", metavar="FILE:KEY", help="only the questions a split file lists under KEY")
    parser.add_argument("--out", help="also write the per-question figures of every arm as JSON")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)  # an arm, in its own process
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _, config, weights, mode = args.child
        run_arm(config, weights, args.data, args.limit, mode == "lazy", args.child_out, args.risk, args.ids)
        return 0
    specs = args.compare or [["full", args.config, args.full, "all"], ["cascade", args.config, args.cascade, "lazy"]]
    arms: dict[str, list[dict[str, Any]]] = {}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory() as folder:
        for spec in specs:
            out = str(Path(folder) / f"{spec[0]}.json")
            command = [sys.executable, "-m", "benchmarks.bench_cascade_live", "--child", *spec, "--child-out", out]
            asked = [
                *(["--risk", str(args.risk)] if args.risk is not None else []),
                *(["--ids", args.ids] if args.ids else []),
            ]
            subprocess.run([*command, "--data", args.data, "--limit", str(args.limit), *asked], check=True, env=env)
            arms[spec[0]] = json.loads(Path(out).read_text(encoding="utf-8"))
    names = list(arms)
    first, second = arms[names[0]], arms[names[-1]]
    seconds = {arm: float(np.mean([row["seconds"] for row in rows])) for arm, rows in arms.items()}
    same = sum(a["answer"] == b["answer"] for a, b in zip(first, second, strict=True))
    print(f"{len(first)} questions of {args.data}, generation cache off, one question at a time")
    for arm, rows in arms.items():
        p90 = np.percentile([r["seconds"] for r in rows], 90)
        em = 100 * np.mean([r["em"] for r in rows])
        run = np.mean([r["members_run"] for r in rows])
        judged = sum(r.get("judged", False) for r in rows)
        answered = sum(not r.get("abstained", False) for r in rows)
        print(
            f"  {arm:<10} {seconds[arm]:6.2f} s per question (p90 {p90:.2f}), EM {em:.1f}, members run {run:.2f}, "
            f"judged {judged}, answered {answered}/{len(rows)}"
        )
    ratio = seconds[names[0]] / seconds[names[-1]]
    print(f"  {names[0]} / {names[-1]} wall time: {ratio:.2f}×; same answer on {same}/{len(first)}")
    if args.out:
        Path(args.out).write_text(json.dumps({"seconds": seconds, "same": same, "arms": arms}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
