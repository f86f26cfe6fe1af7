"""Benchmark: does `eor plan` predict a run it has not seen? A pilot `eor run` on the first `--pilot`
questions gives tokens per question, the reader's rates and the overhead; `eor plan` predicts the wall time
of the next `--target` questions; then they are run and the prediction is set beside the measured time.

Both runs are the real command with `--no-cache` (every prompt generated), one after the other, with the
indexes built beforehand (the pilot's first loading is not in its wall time either: `generation.json`
measures the answering loop).

    python -m benchmarks.validate_cost_model [--config configs/nq-offline.yaml] [--pilot 4] [--target 12]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from eor.runs.run_folder import RunFolder

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "nq" / "dev.jsonl"


def eor(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "eor.cli", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/nq-offline.yaml")
    parser.add_argument("--pilot", type=int, default=4)
    parser.add_argument("--target", type=int, default=12)
    args = parser.parse_args()
    lines = DATA.read_text().splitlines()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        pilot_data, target_data = work / "pilot.jsonl", work / "target.jsonl"
        pilot_data.write_text("\n".join(lines[: args.pilot]) + "\n")
        target_data.write_text("\n".join(lines[args.pilot : args.pilot + args.target]) + "\n")
        run = ["run", "--config", args.config, "--no-cache", "--data"]
        eor(*run, str(pilot_data), "--out", str(work / "pilot"))
        plan = json.loads(eor("plan", str(work / "pilot"), "--questions", str(args.target), "--json"))
        eor(*run, str(target_data), "--out", str(work / "target"))
        measured = RunFolder(work / "target").read_generation()
    reader = measured["prompt_seconds"] + measured["generation_seconds"]
    result = {
        "config": args.config,
        "pilot_questions": args.pilot,
        "target_questions": args.target,
        "predicted": {key: round(plan[key], 1) for key in ("reader_seconds", "wall_seconds")},
        "predicted_tokens": {"prompt": plan["prompt_tokens"], "generated": plan["generated_tokens"]},
        "measured": {"reader_seconds": round(reader, 1), "wall_seconds": measured["wall_seconds"]},
        "measured_tokens": {"prompt": measured["prompt_tokens"], "generated": measured["generated_tokens"]},
        "wall_ratio": round(measured["wall_seconds"] / plan["wall_seconds"], 3),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
