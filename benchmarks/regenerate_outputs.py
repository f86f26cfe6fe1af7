"""Regenerate every output the shipped records and results reproduce, into one folder, so that two commits can
be compared byte for byte (`diff -r A B`): the weights files `eor train` writes from `docs/records/` (the
commands of docs/voter.md, docs/cascade.md and docs/results.md, same seeds), the `eor bench` reports of those
weights and of uniform weights on the dev records (the cascade's also judged by containment), the pool design of
docs/pool-design.md (`eor design` at its rule and within 2.5 s: the table it prints, `design.json`, the chosen
pool and its voters), and `erag.md` rendered from each shipped `erag.json`.

Paths inside the outputs are the ones given on the command line, so run it from the repository root (where
`python -m` imports this checkout's eor, whichever one the environment installed) with the same OUT both times
and move the first result aside before the second:

    python -m benchmarks.regenerate_outputs runs/outputs          # CPU only, no reader
    mv runs/outputs runs/outputs-before; git checkout OTHER; python -m benchmarks.regenerate_outputs runs/outputs
    diff -r runs/outputs-before runs/outputs
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from eor.evaluation.writing.writer import render_markdown

ROOT = Path(__file__).resolve().parent.parent
R = "docs/records"
NQ = ["--config", "configs/nq-offline.yaml"]
NQ_DEV = ["--dev", f"{R}/nq-dev.jsonl.gz"]
NQ16_DEV = ["--dev", f"{R}/nq16-dev.jsonl.gz"]
#: the 16-member pool's 400 training questions (docs/results.md): voters without the confidence dev lacks
NQ16_400 = ["--no-confidence", "--config", "configs/nq-offline16.yaml"]

#: the 600's default cascade, trained before "Costs as they are paid" (docs/cascade.md), charged each member as
#: recorded: its outputs reproduce so (every other cascade here is charged in its own order)
RECORDED = ["--cost-order", "recorded"]
#: questions the corpus cannot answer (docs/abstention.md, "Beyond the corpus"): ablated copies teach, the 200
#: no-corpus questions set aside to learn from certify, for a share 0.33
BEYOND = ["--ablated", f"{R}/nq-train-ablated.jsonl.gz", "--nocorpus", f"{R}/nq-nocorpus-learn200.jsonl.gz"]
BEYOND += ["--unanswerable-share", "0.33"]
#: weights file -> the `eor train` arguments (after the records) that made it, and the dev records it is benched on;
#: the NQ records grew beyond the 7-member pool (docs/pool-design.md), so its figures name that pool's config
TRAINED = {
    "nq-offline.json": ([f"{R}/nq-train.jsonl.gz", "--voter", "paper", *NQ, *NQ_DEV], f"{R}/nq-dev.jsonl.gz"),
    "nq-offline-grounding.json": (
        [f"{R}/nq-train.jsonl.gz", "--voter", "grounding", *NQ, *NQ_DEV],
        f"{R}/nq-dev.jsonl.gz",
    ),
    "nq-offline-auto.json": (
        [f"{R}/nq-train.jsonl.gz", f"{R}/nq-train-rest.jsonl.gz", "--cv", "5", "--no-confidence", *NQ, *BEYOND],
        f"{R}/nq-dev.jsonl.gz",
    ),
    "nq-offline-auto-600.json": (
        [f"{R}/nq-train.jsonl.gz", "--cv", "5", "--no-confidence", *NQ],
        f"{R}/nq-dev.jsonl.gz",
    ),
    "nq-offline-cascade.json": (
        [f"{R}/nq-train.jsonl.gz", f"{R}/nq-train-rest.jsonl.gz", "--voter", "cascade", "--max-loss", "0.5"]
        + ["--no-confidence", *NQ, *BEYOND],
        f"{R}/nq-dev.jsonl.gz",
    ),
    "nq-offline-cascade-600.json": (
        [f"{R}/nq-train.jsonl.gz", "--voter", "cascade", "--max-loss", "0.5", "--no-confidence", *RECORDED, *NQ],
        f"{R}/nq-dev.jsonl.gz",
    ),
    "nq-offline-cascade-contains.json": (
        [
            f"{R}/nq-train.jsonl.gz",
            "--voter",
            "cascade",
            "--max-loss",
            "0.5",
            "--no-confidence",
            "--metric",
            "contains",
            *NQ,
        ],
        f"{R}/nq-dev.jsonl.gz",
    ),
    "nq-offline16.json": ([f"{R}/nq16-train.jsonl.gz", "--voter", "paper", *NQ16_DEV], f"{R}/nq16-dev.jsonl.gz"),
    "nq-offline16-grounding.json": (
        [f"{R}/nq16-train.jsonl.gz", "--voter", "grounding", *NQ16_DEV],
        f"{R}/nq16-dev.jsonl.gz",
    ),
    "nq-offline16-cascade.json": (
        [f"{R}/nq16-train400.jsonl.gz", "--voter", "cascade", "--max-loss", "0.5", "--rates", "281,60"] + NQ16_400,
        f"{R}/nq16-dev.jsonl.gz",
    ),
    "nq-offline16-auto.json": ([f"{R}/nq16-train400.jsonl.gz", "--voter", "auto", *NQ16_400], f"{R}/nq16-dev.jsonl.gz"),
}


def eor(*args: str, out_file: Path) -> None:
    """Run `eor ARGS` from the repository root; its standard output is kept in `out_file`."""
    done = subprocess.run(
        [sys.executable, "-m", "eor.cli", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    out_file.write_text(done.stdout, encoding="utf-8")
    if done.returncode:
        raise SystemExit(f"eor {' '.join(args)} failed:\n{done.stderr[-3000:]}")


#: `eor design` folder -> its arguments after the records (docs/pool-design.md)
DESIGNS = {
    "design": ["--config", "configs/nq-candidates.yaml", "--rates", "281,60"],
    "design-2.5s": ["--config", "configs/nq-candidates.yaml", "--rates", "281,60", "--budget", "2.5"],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the folder to write (relative to the repository root; replaced)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    shutil.rmtree(ROOT / out, ignore_errors=True)
    (ROOT / out / "weights").mkdir(parents=True)
    (ROOT / out / "printed").mkdir()
    train_and_bench(out)
    bench_uniform_and_judged(out)
    for name, design_args in DESIGNS.items():
        folder = out / name
        eor(
            "design",
            f"{R}/nq-train.jsonl.gz",
            *design_args,
            "--out",
            str(folder),
            out_file=ROOT / out / "printed" / f"{name}.txt",
        )
        print(f"{name}: designed", flush=True)
    for shipped in sorted((ROOT / "docs" / "reports").glob("*/erag.json")):
        target = ROOT / out / "erag" / shipped.parent.name
        target.mkdir(parents=True)
        (target / "erag.md").write_text(
            render_markdown("erag", json.loads(shipped.read_text(encoding="utf-8"))), encoding="utf-8"
        )
    print(f"written to {out}")
    return 0


def train_and_bench(out: Path) -> None:
    """Each weights file of TRAINED trained, and benched on its dev records."""
    for name, (train_args, dev) in TRAINED.items():
        weights = out / "weights" / name
        eor("train", *train_args, "--out", str(weights), out_file=ROOT / out / "printed" / f"train-{name}.txt")
        report = out / "reports" / Path(name).stem
        eor(
            "bench",
            "--frontier",
            dev,
            *(NQ if dev.startswith(f"{R}/nq-") else []),
            "--weights",
            str(weights),
            "--out",
            str(report),
            out_file=ROOT / out / "printed" / f"bench-{name}.txt",
        )
        print(f"{name}: trained and benched", flush=True)


def bench_uniform_and_judged(out: Path) -> None:
    """The uniform voter benched on each dev records, and the cascade judged by containment."""
    for dev in (f"{R}/nq-dev.jsonl.gz", f"{R}/nq16-dev.jsonl.gz"):
        stem = Path(dev).name.split(".")[0]
        eor(
            "bench",
            "--frontier",
            dev,
            *(NQ if stem == "nq-dev" else []),
            "--out",
            str(out / "reports" / f"{stem}-uniform"),
            out_file=ROOT / out / "printed" / f"bench-{stem}-uniform.txt",
        )
    cascade = out / "weights" / "nq-offline-cascade.json"
    eor(
        "bench",
        "--frontier",
        f"{R}/nq-dev.jsonl.gz",
        *NQ,
        "--weights",
        str(cascade),
        "--metric",
        "contains",
        "--out",
        str(out / "reports" / "nq-offline-cascade-contains-judged"),
        out_file=ROOT / out / "printed" / "bench-nq-offline-cascade-contains-judged.txt",
    )


if __name__ == "__main__":
    raise SystemExit(main())
