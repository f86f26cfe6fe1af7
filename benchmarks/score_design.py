"""Score a frozen pool design (`eor design`'s folder) once on held-out records, against today's cascade.

From records alone (no reader but its tokenizer): exact match of the designed pool's cascade and of its
selector, the designed pool's oracle and Top R (train, the member of the designed pool best on the training
records), each with reader seconds per question replayed in the order it runs members (eor.runs.costs.PromptReplay,
at the design's rates); the same for the baseline cascade; and the paired difference of the designed cascade
against the baseline's (bootstrap 95% interval, exact McNemar p). The held-out records must hold the designed
pool's members and the baseline's (records grown by the chosen members). The output names the commit it ran
at, so that every scoring of dev is listed with its commit (docs/pool-design.md).

    python -m benchmarks.score_design DESIGN_DIR RECORDS [--baseline-config configs/nq-offline.yaml]
        [--baseline docs/weights/nq-offline-cascade.json] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.config import load_config
from eor.core.correctness import correctness_matrix
from eor.evaluation.stats import Bootstrap, paired_test
from eor.evaluation.upper_bound import oracle_accuracy
from eor.learning.judge_cascade import chat_tokenizer
from eor.readers import build_reader
from eor.runs.costs import prompt_replay
from eor.runs.run_data import load_run
from voters import VoteBatch, load_voter

ROOT = Path(__file__).resolve().parent.parent


def replayed(config_path: Path, weights: Path, records: str, rates: dict[str, float]) -> dict[str, Any]:
    """A voter of a pool on `records`: per question right or not (EM) and seconds, replayed as it runs."""
    config = load_config(config_path)
    data = load_run(records, config.members)
    voter = load_voter(weights, members=config.members)
    tokenize = chat_tokenizer(build_reader(config.reader))
    replay = prompt_replay(data, tokenize, rates, config.reader.llama_cpp.prefix_chunk)
    right = correctness_matrix(data.answers, data.golds, "em", data.texts) >= 0.5  # (Q, M)
    rows = np.arange(data.questions)
    if voter.in_steps:
        picks, stops = voter.replay(VoteBatch(data.answers, data.passages, data.texts, confidence=data.confidence))
        seconds = replay.spent([data.names.index(name) for name in voter.order_], stops)
    else:
        picks = voter.predict(VoteBatch(data.answers, data.passages, data.texts))
        seconds = replay.spent(list(range(len(data.names))))
    return {
        "ids": data.ids,
        "right": right[rows, np.asarray(picks, dtype=int)],
        "seconds": seconds,
        "members": right,
        "names": data.names,
        "replay": replay,
    }


def summary(entry: dict[str, Any]) -> dict[str, float]:
    return {"em": float(entry["right"].mean()), "seconds": float(np.mean(entry["seconds"]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("design", help="eor design's folder (pool.yaml, cascade.json, selector.json, design.json)")
    parser.add_argument("records", help="held-out records holding the designed pool's and the baseline's members")
    parser.add_argument("--baseline-config", default=str(ROOT / "configs/nq-offline.yaml"))
    parser.add_argument("--baseline", default=str(ROOT / "docs/weights/nq-offline-cascade.json"))
    parser.add_argument("--out", help="also write the figures as JSON")
    args = parser.parse_args(argv)

    folder = Path(args.design)
    design = json.loads((folder / "design.json").read_text())
    rates = design["settings"]["rates"]
    cascade = replayed(folder / "pool.yaml", folder / "cascade.json", args.records, rates)
    selector = replayed(folder / "pool.yaml", folder / "selector.json", args.records, rates)
    baseline = replayed(Path(args.baseline_config), Path(args.baseline), args.records, rates)
    if cascade["ids"] != baseline["ids"]:
        raise SystemExit("the designed pool and the baseline were scored on different questions")
    table = {row["member"]: row["em"] for row in design["candidates"]}
    top = max(design["chosen"], key=lambda name: table[name])  # Top R (train) of the designed pool
    column = cascade["names"].index(top)
    replay = cascade["replay"]
    test = paired_test(
        cascade["right"].astype(float), baseline["right"].astype(float), Bootstrap.draw(len(cascade["ids"]), 2000, 0)
    )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    result = {
        "records": args.records,
        "commit": commit.strip(),
        "questions": len(cascade["ids"]),
        "rates": rates,
        "designed_cascade": summary(cascade),
        "designed_selector": summary(selector),
        "designed_oracle": oracle_accuracy(cascade["members"].T),
        "top_r_train": {
            "member": top,
            "em": float(cascade["members"][:, column].mean()),
            "seconds": float(replay.after(None, column).mean()),
        },
        "baseline_cascade": summary(baseline),
        "difference": {key: test[key] for key in ("difference", "ci", "p_value", "test")},
    }
    print(json.dumps(result, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
