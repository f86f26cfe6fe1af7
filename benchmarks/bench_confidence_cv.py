"""The learned selector with and without the reader's confidence among its features, by K-fold
cross-validation on training records (folds by question, seeded; both on the same folds): each one's
out-of-fold exact match, Top R chosen in each fold, and the paired difference with its bootstrap 95% interval
and exact McNemar test. Records only: seconds, no reader.

    python -m benchmarks.bench_confidence_cv [RECORDS] [--config CONFIG] [--folds 5] [--seed 0] [--out FILE.json]

Default: docs/records/nq-train.jsonl.gz (its records must hold each member's confidence); `--config`: that
config's members only (records that grew beyond its pool, as the NQ records did: configs/nq-offline.yaml).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from eor.core.config import load_config
from eor.core.errors import InputError
from eor.evaluation.stats import Bootstrap, paired_test
from eor.learning.crossval import VoteSettings, out_of_fold, vote_arrays
from eor.runs.run_data import load_run

ROOT = Path(__file__).resolve().parent.parent


def shown(path: str) -> str:
    """`path` relative to the repository when it lies inside it (written files name no machine's paths)."""
    resolved = Path(path).resolve()
    return str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="?", default=str(ROOT / "docs/records/nq-train.jsonl.gz"))
    parser.add_argument("--config", help="this config's members only (records that grew beyond its pool)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the figures as JSON")
    args = parser.parse_args(argv)

    data = load_run(args.records, load_config(args.config).members if args.config else None)
    if not data.has_confidence:
        raise InputError(f"{args.records}: no member answer carries the reader's confidence")
    settings = VoteSettings()
    results = {}
    arrays = vote_arrays(data, settings)
    for label, use in (("with confidence", True), ("without confidence", False)):
        results[label] = out_of_fold(
            arrays, ["top", "selector"], replace(settings, confidence=use), args.folds, args.seed
        ).scores
    with_conf, without = results["with confidence"]["selector"], results["without confidence"]["selector"]
    top = results["with confidence"]["top"]
    shared = Bootstrap.draw(data.questions, 2000, args.seed)
    test = paired_test(with_conf, without, shared)
    rows = {
        "Top R (chosen in each fold)": top,
        "selector without confidence": without,
        "selector with confidence": with_conf,
    }
    print(f"{args.folds}-fold cross-validation over {data.questions} questions of {args.records} (EM)")
    for label, values in rows.items():
        against = paired_test(values, top, shared)
        low, high = against["ci"]
        interval = f"[{100 * low:+.1f}, {100 * high:+.1f}]"
        print(f"  {label:<30} {100 * values.mean():5.1f}  − Top R {100 * against['difference']:+5.1f} {interval}")
    low, high = test["ci"]
    print(
        f"with − without confidence: {100 * test['difference']:+.1f} EM, paired 95% interval [{100 * low:+.1f}, "
        f"{100 * high:+.1f}], exact McNemar p {test['p_value']:.3g}"
    )
    if args.out:
        document = {
            "records": shown(args.records),
            "folds": args.folds,
            "seed": args.seed,
            "em": {label: float(values.mean()) for label, values in rows.items()},
            "with_minus_without": {key: test[key] for key in ("difference", "ci", "p_value", "test")},
        }
        Path(args.out).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
