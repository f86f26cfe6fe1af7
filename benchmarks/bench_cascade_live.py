"""Live cascade against the full pool, with the real reader: wall seconds per question and agreement.

Two arms, each in a process of its own (so neither warms the other's caches), each loading its models and
answering a warm-up question before the clock starts, then answering the same questions one at a time with
the generation cache off (every prompt is generated):

- `cascade`: the config with a cascade weights file, answered as `eor ask` does (members one step at a time,
  the rest skipped once the cascade stops);
- `full`: the config with the full-pool selector's weights file, every member run (`eor ask --all-members`).

    python benchmarks/bench_cascade_live.py [--config C] [--data Q.jsonl] [--limit 30] [--out FILE.json]

Defaults: configs/nq-offline.yaml, the first 30 questions of ../shared/data/nq/dev.jsonl,
docs/weights/nq-offline-cascade.json against docs/weights/nq-offline-auto.json. Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WARM_UP = "who wrote the odyssey"


def run_arm(config: str, weights: str, data: str, limit: int, lazy: bool, out: str) -> None:
    """One arm, in this process: load, warm up, then answer each question with the cache off."""
    from eor.answers import exact_match
    from eor.data import load_questions
    from eor.ensemble import Ensemble

    ensemble = Ensemble.from_config(config, weights=weights, cache=False)
    ensemble.answer(WARM_UP, lazy=False)  # every model loaded (reader, encoder, indexes) before the clock
    rows = []
    for question in load_questions(Path(data), limit=limit):
        started = time.perf_counter()
        result = ensemble.answer(question, lazy=lazy)
        wall = time.perf_counter() - started
        rows.append(
            {
                "id": question.id,
                "answer": result.answer,
                "member": result.member,
                "seconds": wall,
                "members_run": len(result.members) + len(result.degraded),
                "em": max((exact_match(result.answer, gold) for gold in question.answers), default=0.0),
                "reason": (result.cascade or {}).get("reason"),
            }
        )
        print(f"{len(rows):3d} {wall:6.2f} s  {result.answer[:40]!r}", file=sys.stderr, flush=True)
    Path(out).write_text(json.dumps(rows, ensure_ascii=False, indent=1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs/nq-offline.yaml"))
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/nq/dev.jsonl"))
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--cascade", default=str(ROOT / "docs/weights/nq-offline-cascade.json"))
    parser.add_argument("--full", default=str(ROOT / "docs/weights/nq-offline-auto.json"))
    parser.add_argument("--out", help="also write the per-question figures of both arms as JSON")
    parser.add_argument("--arm", choices=["cascade", "full"], help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--arm-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.arm:
        weights = args.cascade if args.arm == "cascade" else args.full
        run_arm(args.config, weights, args.data, args.limit, args.arm == "cascade", args.arm_out)
        return 0
    arms = {}
    with tempfile.TemporaryDirectory() as folder:
        for arm in ("full", "cascade"):
            out = str(Path(folder) / f"{arm}.json")
            command = [sys.executable, __file__, "--arm", arm, "--arm-out", out, "--config", args.config]
            command += ["--data", args.data, "--limit", str(args.limit), "--cascade", args.cascade, "--full", args.full]
            subprocess.run(command, check=True)
            arms[arm] = json.loads(Path(out).read_text(encoding="utf-8"))
    full, cascade = arms["full"], arms["cascade"]
    seconds = {arm: float(np.mean([row["seconds"] for row in rows])) for arm, rows in arms.items()}
    same = sum(a["answer"] == b["answer"] for a, b in zip(full, cascade, strict=True))
    print(f"{len(full)} questions of {args.data}, generation cache off, one question at a time")
    for arm, rows in arms.items():
        p90 = np.percentile([r["seconds"] for r in rows], 90)
        em = 100 * np.mean([r["em"] for r in rows])
        run = np.mean([r["members_run"] for r in rows])
        print(f"  {arm:<8} {seconds[arm]:6.2f} s per question (p90 {p90:.2f}), EM {em:.1f}, members run {run:.2f}")
    print(f"  full / cascade wall time: {seconds['full'] / seconds['cascade']:.2f}×; same answer on {same}/{len(full)}")
    if args.out:
        Path(args.out).write_text(json.dumps({"seconds": seconds, "same": same, "arms": arms}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
