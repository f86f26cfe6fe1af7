"""EoR against Top R when there are too few questions to split three ways: nested cross-validation over the
records alone. An outer K-fold split (one per seed; the first seed is the result): in each outer training fold
every voter (Top R, the paper's voter, the selector, `auto` choosing among `eor train`'s candidates by its own
inner cross-validation, and with `--max-loss` the cascade at each tolerance given: fitted once, at the first,
each tolerance choosing its threshold from the same held-out operating points) is chosen and fitted on the
training folds only and answers the held-out fold (eor.learning.crossval.out_of_fold). `auto` chooses by
accuracy, as `eor train --voter auto` does without a tolerance; the tolerances are the cascade's alone. Over the
out-of-fold answers: each voter's EM, its difference to Top R (chosen inside each fold) with a paired bootstrap
95% interval and the exact McNemar p, MRLR (the share of its failures a member gets right, eq. 3 against the
members), the oracle, and for each cascade its reader seconds per question beside the full pool's (every member
run, as the selector needs) and its EM beside the selector's, and the least any voter running members one by
one could spend to be right where the selector is (`least_cost`); and for every voter the questions where it and
Top R disagree, with the members that gave the answers it picked there (printed for the selector and `auto`).

Costs are the members' token counts at `--rates` (prompt, generated tokens per second; default: fitted to the
records' own seconds), each member charged its own retrieval's generation (PK's document, @CP's summary), as
eor.runs.costs counts them.

    python -m benchmarks.nested_cv docs/records/nq16-train400.jsonl.gz [--config configs/nq-offline16.yaml]
        [--limit 400] [--seeds 0,1,2] [--folds 5] [--max-loss 0.5,0.25,1,2] [--rates 281,60]
        [--no-confidence] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.answers import normalize_answer
from eor.core.config import load_config
from eor.core.rates import parse_rates
from eor.evaluation.inconsistency import mrlr_against
from eor.evaluation.upper_bound import oracle_accuracy
from eor.learning.crossval import (
    AUTO,
    CvResult,
    VoteArrays,
    VoteSettings,
    build_candidate,
    compare_with_top,
    out_of_fold,
    vote_arrays,
)
from eor.runs.costs import describe_rates
from eor.runs.run_data import RunData, load_run
from voters.folds import cross_fit, folds

ROOT = Path(__file__).resolve().parent.parent
VOTERS = ("top", "paper", "selector")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", help="records (a run folder or .jsonl[.gz])")
    parser.add_argument("--config", help="the pool's config: its members alone (records that grew beyond it)")
    parser.add_argument("--limit", type=int, help="the first N questions of the records")
    parser.add_argument("--seeds", default="0,1,2", help="outer split seeds; the first is the result")
    parser.add_argument("--folds", type=int, default=5, help="outer and inner folds (default 5)")
    parser.add_argument(
        "--max-loss", help="also the cascade at these tolerances (EM points, comma-separated; the first is the result)"
    )
    parser.add_argument(
        "--rates", type=parse_rates, help="the reader's token rates PROMPT,GENERATED per second (default: fitted)"
    )
    parser.add_argument("--no-confidence", action="store_true", help="leave the reader's confidence out")
    parser.add_argument("--json", help="write every figure here")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    members = load_config(args.config).members if args.config else None
    data = load_run(args.records, members)
    if args.limit:
        data = data.subset(list(range(min(args.limit, data.questions))))
    losses = [float(value) for value in args.max_loss.split(",")] if args.max_loss else []
    unit = "tokens" if args.rates else "auto"  # given rates price token counts; without them, fitted where held
    settings = VoteSettings(confidence=not args.no_confidence, cost_unit=unit, rates=args.rates)
    arrays = vote_arrays(data, settings)
    if args.rates and arrays.costs is None:
        parser.error(f"--rates prices token counts, and {args.records} lacks them for some member")
    oracle = oracle_accuracy(arrays.correctness.T)
    print(f"{data.questions} questions × {len(data.names)} members of {args.records}; oracle {100 * oracle:.1f} EM")
    seeds: dict[str, Any] = {}
    out: dict[str, Any] = {"questions": data.questions, "members": data.names, "oracle": oracle, "seeds": seeds}
    if arrays.costs is not None:
        full = float(arrays.costs.matrix.sum(axis=1).mean())
        out["full_pool_cost"] = full
        out["cost_unit"] = describe_rates(arrays.costs.rates) if arrays.costs.rates else "recorded seconds"
        print(f"the full pool: {full:.2f} s per question, {out['cost_unit']}")
    for seed in [int(s) for s in args.seeds.split(",")]:
        table = seed_table(data, arrays, settings, losses, args.folds, seed)
        seeds[str(seed)] = table
        print_table(table, args.folds, seed, out.get("full_pool_cost"))
        if args.json:  # after every seed: a run stopped later keeps the seeds done
            Path(args.json).write_text(json.dumps(out, indent=2, default=_plain) + "\n")
    return 0


def seed_table(
    data: RunData, arrays: VoteArrays, settings: VoteSettings, losses: list[float], k: int, seed: int
) -> dict[str, dict[str, Any]]:
    """Every voter's row, out of fold on the outer split of `seed`, against Top R."""
    members_correct = (arrays.correctness >= 0.5).T
    voters = out_of_fold(arrays, VOTERS, settings, k, seed)
    auto = out_of_fold(arrays, [AUTO], settings, k, seed, inner_folds=k)  # eor train's auto
    scores, picks = {**voters.scores, **auto.scores}, {**voters.picks, **auto.picks}
    result = CvResult(k, seed, scores, auto.chosen, voters.costs, picks)
    table = compare_with_top(result)
    for name, row in table.items():
        row["mrlr"] = mrlr_against(result.scores[name] >= 0.5, members_correct)
        row.update(against_top(data, result, name))
        if arrays.costs is not None:
            row["least_cost"] = least_cost(arrays.costs.matrix, arrays.correctness, result.scores[name])
    for loss, found in cascade_at(arrays, settings, losses, voters).items():
        row = compare_with_top(found)["cascade"]
        row["mrlr"] = mrlr_against(found.scores["cascade"] >= 0.5, members_correct)
        row["minus_selector"] = row["mean"] - table["selector"]["mean"]
        row.update(against_top(data, found, "cascade"))
        table[f"cascade@{loss:g}"] = row
    return table


def print_table(table: dict[str, dict[str, Any]], k: int, seed: int, full_pool_cost: float | None) -> None:
    print(f"seed {seed} ({k}-fold outer, {k}-fold inner; Top R chosen in each fold):")
    print(f"  {'voter':<12} {'EM':>6} {'− Top R':>8}  95% interval      McNemar p  MRLR   cost/question")
    for name, row in table.items():
        low, high = row["ci"]
        cost = f"{row['cost']:.2f} s" if "cost" in row else "-"
        if "minus_selector" in row and full_pool_cost is not None:
            share = row["cost"] / full_pool_cost
            cost += f" ({100 * share:.0f}% of the pool; − selector {100 * row['minus_selector']:+.1f})"
        if "least_cost" in row and name == "selector":
            cost += f" (least to be right where it is: {row['least_cost']:.2f} s)"
        chosen = f"  (chose {', '.join(row['chosen_per_fold'])})" if row.get("chosen_per_fold") else ""
        print(
            f"  {name:<12} {100 * row['mean']:6.1f} {100 * row['minus_top']:+8.1f}  "
            f"[{100 * low:+5.1f}, {100 * high:+5.1f}]  {row['p_value']:<9.3g}  {row['mrlr']:.3f}  {cost}{chosen}"
        )
    for name in ("selector", AUTO):
        row = table[name]
        print(f"  {name}: {len(row['wins'])} right where Top R is wrong, {len(row['losses'])} the other way;")
        for side in ("wins", "losses"):
            given = ", ".join(f"{member} {count}" for member, count in row[f"{side}_given_by"].items() if count)
            print(f"    answers of its {side} given by: {given or 'none'}")


def cascade_at(arrays: VoteArrays, settings: VoteSettings, losses: list[float], top: CvResult) -> dict[float, CvResult]:
    """The cascade out of fold at each tolerance (EM points), on `top`'s outer split, beside its Top R. In each
    outer fold the cascade is fitted once, at the first tolerance (its order, step selectors and stop target),
    and answers the held-out fold at the threshold that each tolerance chooses from the same held-out operating
    points (`Cascade.at_loss`), as `eor train` reports its operating points: a fit per tolerance would differ
    only in the stop target it may pick, and costs as much again each time."""
    n = arrays.questions
    found = {
        loss: CvResult(
            top.k,
            top.seed,
            {"top": top.scores["top"], "cascade": np.zeros(n)},
            costs={"top": top.costs["top"], "cascade": np.zeros(n)},
            picks={"top": top.picks["top"], "cascade": np.zeros(n, dtype=int)},
        )
        for loss in losses
    }
    candidate = build_candidate("cascade", replace(settings, max_loss=losses[0] / 100))

    def replayed(cascade: Any, held: np.ndarray) -> None:
        batch = arrays.take(held)
        for loss in losses:
            chosen, stops = cascade.replay(batch, cascade.at_loss(loss / 100).threshold)
            found[loss].picks["cascade"][held] = chosen
            found[loss].scores["cascade"][held] = arrays.correctness[held, chosen]
            found[loss].costs["cascade"][held] = cascade.spent(batch.step_costs, stops)  # as it runs (voters.spend)

    cross_fit(folds(n, top.k, top.seed), np.arange(n), lambda train: candidate.fit(arrays, train).estimator, replayed)
    return found


def against_top(data: RunData, result: CvResult, name: str) -> dict[str, object]:
    """The questions where the voter `name` and Top R disagree on correctness (`wins`: it is right and Top R
    wrong, `losses` the other way round, by question id), with how many of each set's picked answers each
    member gave (SQuAD-normalised; most first): which members its gains and losses rest on. Also each
    question's out-of-fold correctness and picked member, in record order."""
    right, top = result.scores[name] >= 0.5, result.scores["top"] >= 0.5
    picks = result.picks[name]
    found: dict[str, object] = {"correct": result.scores[name], "picked": [data.names[m] for m in picks]}
    for side, rows in (("wins", np.flatnonzero(right & ~top)), ("losses", np.flatnonzero(top & ~right))):
        given = dict.fromkeys(data.names, 0)
        for q in rows:
            picked = normalize_answer(data.answers[q][picks[q]])
            for m, member in enumerate(data.names):
                given[member] += normalize_answer(data.answers[q][m]) == picked
        found[side] = [data.ids[q] for q in rows]
        found[f"{side}_given_by"] = dict(sorted(given.items(), key=lambda item: -item[1]))
    return found


def least_cost(costs: np.ndarray, correctness: np.ndarray, right: np.ndarray) -> float:
    """The least mean cost per question at which a voter that runs members one by one could be right wherever
    the voter with out-of-fold correctness `right` is (an oracle that knows which member to run): on each
    question it gets right, the cheapest member that is right there; elsewhere the cheapest member. How far
    a cascade's cost is above it is the price of not knowing which member is right."""
    cheapest_right = np.where(correctness >= 0.5, costs, np.inf).min(axis=1)
    return float(np.where(right >= 0.5, cheapest_right, costs.min(axis=1)).mean())


def _plain(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else float(value)


if __name__ == "__main__":
    raise SystemExit(main())
