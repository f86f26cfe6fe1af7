"""What each family of candidate members adds to a base pool, by cross-validation on training records alone.

The candidates of a config (`eor design`'s) fall in families by the notation: a prompt variant (`X:VARIANT`),
a fusion (`X+Y`), a dense source over another encoder than the default (`MPNet`, `E5`), one passage other
than the first (`X#r`); the first that applies names a member's family, the rest are the base pool. For the
base pool, the base plus each family, and all candidates: the learned selector's exact match cross-validated
as `eor design` does (5 repeated 5-fold splits, eor.learning.design.SplitScores), its paired gain over the base pool
with the standard error, the oracle, and reader seconds per question with every member run in order
(eor.runs.costs.PromptReplay at the rates given). Records only: the reader's tokenizer, no generation.

    python -m benchmarks.design_families RECORDS --config configs/nq-candidates.yaml \\
        [--base configs/nq-offline.yaml] [--rates 281,60] [--repeats 5] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from eor.core.config import load_config
from eor.core.rates import parse_rates
from eor.evaluation.stats import paired_difference
from eor.learning.crossval import VoteSettings, vote_arrays
from eor.learning.design import SplitScores, pool_cost
from eor.learning.judge_cascade import chat_tokenizer
from eor.pipeline.members import demonstration_ids
from eor.readers import build_reader
from eor.runs.costs import PromptReplay, prompt_replay
from eor.runs.run_data import load_run
from retrievers import notation
from voters.cascade_fit import SelectorSettings

ROOT = Path(__file__).resolve().parent.parent
FAMILIES = ("prompt variant", "fusion", "other encoder", "one passage other than the first")


def family(name: str, dense_sources: set[str]) -> str | None:
    """The family of a candidate member (None: none of them)."""
    tree = notation.parse(name)
    nodes = list(notation.walk(tree))
    if notation.variant_of(tree) is not None:
        return FAMILIES[0]
    if any(isinstance(node, notation.Fuse) for node in nodes):
        return FAMILIES[1]
    if any(isinstance(node, notation.Source) and node.name in dense_sources for node in nodes):
        return FAMILIES[2]
    if any(isinstance(node, notation.Pick) for node in nodes):
        return FAMILIES[3]
    return None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="training records holding every candidate")
    parser.add_argument("--config", required=True, help="the candidates' config")
    parser.add_argument("--base", default=str(ROOT / "configs/nq-offline.yaml"), help="the base pool's config")
    parser.add_argument("--rates", type=parse_rates, default=parse_rates("281,60"), help="PROMPT,GENERATED tok/s")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="also write the figures as JSON")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = load_config(args.config)
    data = load_run(args.records, config.members).without(demonstration_ids(config))
    base = [data.names.index(name) for name in load_config(args.base).members]
    dense = {name for name, source in config.sources.items() if source.type == "dense"}
    groups: dict[str, list[int]] = {}
    for m, name in enumerate(data.names):
        kind = family(name, dense)
        if m not in base and kind is not None:
            groups.setdefault(kind, []).append(m)
    replay = prompt_replay(
        data, chat_tokenizer(build_reader(config.reader)), args.rates, config.reader.llama_cpp.prefix_chunk
    )
    arrays = vote_arrays(data, VoteSettings(confidence=False))
    labels = arrays.correctness >= 0.5
    scores = SplitScores(arrays.blocks, labels, data.names, SelectorSettings(), args.folds, args.repeats, args.seed)
    pools = {"base pool": base}
    pools.update({f"base + {kind}": base + members for kind, members in groups.items()})
    pools["every candidate"] = list(range(len(data.names)))
    print(f"{data.questions} questions; {args.repeats} × {args.folds}-fold cross-validation of the selector")
    rows = pool_rows(pools, base, scores, replay, data.names)
    if args.out:
        Path(args.out).write_text(json.dumps({"rates": args.rates, "pools": rows}, indent=2) + "\n", encoding="utf-8")
    return 0


def pool_rows(
    pools: dict[str, list[int]], base: list[int], scores: SplitScores, replay: PromptReplay, names: list[str]
) -> list[dict[str, Any]]:
    """Each pool's figures against the base pool's, printed as a table."""
    reference = scores.right(base)
    rows: list[dict[str, Any]] = []
    print(f"{'pool':<44} {'members':>7} {'CV EM':>6} {'gain':>6} {'SE':>5} {'oracle':>7} {'s/q':>6}")
    for label, subset in pools.items():
        right = scores.right(subset)
        gain, se = paired_difference(right, reference) if subset != base else (0.0, 0.0)
        row: dict[str, Any] = {
            "pool": label,
            "members": [names[m] for m in subset],
            "cv_em": float(right.mean()),
            "gain": gain,
            "se": se,
            "oracle": scores.oracle(subset),
            "seconds": pool_cost(replay, subset),
        }
        rows.append(row)
        print(
            f"{label:<44} {len(subset):>7} {100 * row['cv_em']:6.1f} {100 * gain:+6.1f} {100 * se:5.1f} "
            f"{100 * row['oracle']:7.1f} {row['seconds']:6.2f}"
        )
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
