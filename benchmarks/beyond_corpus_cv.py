"""What each kind of unanswerable training question and each evidence family teaches P(right), by cross-validation
on training records alone (the answerable training questions, their ablated copies and the no-corpus questions set
aside to learn from; never dev, never the 200 kept no-corpus questions).

One voter, chosen and fitted as `eor train` would on the answerable questions (the default: today's cascade,
`--voter cascade --max-loss 0.5 --no-confidence`), gives every question's evidence out of fold on folds where a
question and its ablated copy fall together (eor.learning.beyond_corpus). Then, on those same rows and folds, the
logistic of P(right) is cross-fitted for each variant: which kinds it is fitted on (answerable alone, + ablated,
+ no corpus, + both) and which feature set it reads (voters.choice_evidence.FITS: with or without the reader's
confidence, with or without the retrieval family), each on the rows that have its features. Each variant's
out-of-fold P(right) gives the mixed thresholds at the share `--share` (one test of the mix, from the answerable and
the no-corpus questions at once), and at α = 0.3 the report gives, out of fold: the share of the no-corpus questions
answered, the coverage of the answerable, the error among answered on the mix at the share, and ECE on
the natural mix; and, whatever was certified, at the threshold answering the most probable 28% of the answerable
questions: their error, and the share of the no-corpus and ablated questions answered. P(unanswerable) is scored
the same way (AUC of telling the answerable from each kind). One more form is scored beside the variants: P(right)
as P(answerable) × P(right | answerable), the logistic fitted on the answerable rows alone times one minus
P(unanswerable) at the share (an unanswerable question taken never to be right).

    python -m benchmarks.beyond_corpus_cv docs/records/nq-train.jsonl.gz \
        --ablated docs/records/nq-train-ablated.jsonl.gz --nocorpus docs/records/nq-nocorpus-learn200.jsonl.gz \
        --config configs/nq-offline.yaml [--json FILE]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from eor.core.config import load_config
from eor.evaluation.selective import ece
from eor.learning.beyond_corpus import (
    ABLATED,
    ANSWERABLE,
    NOCORPUS,
    cross_fitted,
    mix_evidence,
    mix_folds,
    mix_records,
    mix_weights,
    unanswerable_out_of_fold,
)
from eor.learning.calibration import within
from eor.learning.crossval import VoteSettings, vote_arrays
from eor.pipeline.abstention import DEFAULT_SHARE, Stratum, mixed_risk_threshold
from eor.runs.costs import member_costs
from eor.runs.run_data import load_run, load_runs
from voters.choice_evidence import FITS, WITH_BOTH, WITH_CONFIDENCE, WITH_RETRIEVAL, WITHOUT_CONFIDENCE, Evidence
from voters.folds import cross_fit
from voters.right import Logistic, fit_logistic, has_features

#: the coverage of the answerable questions at which the variants are compared, whatever the threshold certified
#: (about what the shipped cascade answers at α = 0.3 on the training questions)
COVERAGE = 0.28
TRAINED_ON = {
    "answerable": (ANSWERABLE,),
    "+ ablated": (ANSWERABLE, ABLATED),
    "+ no corpus": (ANSWERABLE, NOCORPUS),
    "+ both": (ANSWERABLE, ABLATED, NOCORPUS),
}
FAMILIES = {
    "no confidence": WITHOUT_CONFIDENCE,
    "confidence": WITH_CONFIDENCE,
    "retrieval": WITH_RETRIEVAL,
    "confidence, retrieval": WITH_BOTH,
}


def variant(
    rows: Evidence,
    right: np.ndarray,
    kind: np.ndarray,
    parts: list[np.ndarray],
    trained_on: tuple[str, ...],
    fit: str,
    share: float,
    alpha: float,
    weighted: bool = False,
) -> dict[str, Any]:
    """One variant's out-of-fold figures (see the module); `weighted`: the unanswerable rows weighted to make up the
    share of the training rows (eor.learning.beyond_corpus.mix_weights)."""
    keep = np.flatnonzero(has_features(rows, fit) & np.isin(kind, trained_on))
    every = np.flatnonzero(has_features(rows, fit))
    weigh = (lambda train: mix_weights(kind[train], share)) if weighted else None  # noqa: E731
    _, p = cross_fitted(rows, right, parts, every, keep, fit, weigh)
    scored = np.zeros(len(rows), dtype=bool)
    scored[every] = True  # a fit's figures are over the rows that have its features
    return figures(p, right, kind, scored, share, alpha)


def product(
    rows: Evidence, right: np.ndarray, kind: np.ndarray, parts: list[np.ndarray], fit: str, share: float, alpha: float
) -> dict[str, Any]:
    """P(right) as P(answerable) × P(right | answerable), out of fold: the logistic of fit `fit` cross-fitted on
    the answerable rows alone, times one minus P(unanswerable) at the share (fitted on the kinds that teach, as
    `eor train` fits it: eor.learning.beyond_corpus); an unanswerable question is taken never to be right."""
    every = np.flatnonzero(has_features(rows, fit))
    _, p = cross_fitted(rows, right, parts, every, every[kind[every] == ANSWERABLE], fit)
    counts = {name: int((kind == name).sum()) for name in (ANSWERABLE, ABLATED, NOCORPUS)}
    _, unanswerable = unanswerable_out_of_fold(rows, kind, parts, share, counts, np.ones(len(rows), dtype=bool))
    scored = np.zeros(len(rows), dtype=bool)
    scored[every] = True
    scored &= ~np.isnan(unanswerable)
    return figures(np.where(scored, p * (1 - unanswerable), 0.0), right, kind, scored, share, alpha)


def figures(
    p: np.ndarray, right: np.ndarray, kind: np.ndarray, scored: np.ndarray, share: float, alpha: float
) -> dict[str, Any]:
    """The out-of-fold figures of P(right) `p` over the rows `scored` (see the module): at the mixed threshold
    certified at `alpha` for the share `share`, and at the most probable 28% of the answerable questions."""
    a, u = (kind == ANSWERABLE) & scored, (kind == NOCORPUS) & scored
    chosen = mixed_risk_threshold(Stratum(p[a], right[a]), Stratum(p[u], right[u]), alpha, share)
    t = chosen.threshold
    answered = (p >= t) if t is not None else np.zeros(len(p), dtype=bool)
    wrong = lambda mask: (answered & mask & ~right).sum() / mask.sum()  # noqa: E731
    cover = lambda mask: (answered & mask).sum() / mask.sum()  # noqa: E731
    mixed_cover = (1 - share) * cover(a) + share * cover(u)
    natural = a | u
    top = p >= np.quantile(p[a], 1 - COVERAGE)  # the most probable 28% of the answerable questions, and those above
    ablated = (kind == ABLATED) & scored
    return {
        "at_coverage": {
            "answerable_error": float((~right[a & top]).mean()),
            "nocorpus_answered": float(top[u].mean()),
            "ablated_answered": float(top[ablated].mean()) if ablated.any() else None,
        },
        "threshold": t,
        "answerable_coverage": float(cover(a)),
        "nocorpus_answered": float(cover(u)),
        "ablated_answered": float(cover(ablated)) if ablated.any() else None,
        "rows": {"answerable": int(a.sum()), "no corpus": int(u.sum())},
        "mix_error": float(((1 - share) * wrong(a) + share * wrong(u)) / mixed_cover) if mixed_cover else None,
        "ece_natural_mix": float(ece(p[natural], right[natural])),
    }


def rounded(found: dict[str, Any]) -> str:
    """A variant's figures on one line, floats to 3 places."""
    return json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in found.items()})


def unanswerable_auc(rows: Evidence, kind: np.ndarray, parts: list[np.ndarray]) -> dict[str, float]:
    """P(unanswerable) out of fold (fitted on every kind), its AUC against the answerable for each other kind."""
    from sklearn.metrics import roc_auc_score

    keep = np.flatnonzero(has_features(rows, WITH_RETRIEVAL))
    label = kind[keep] != ANSWERABLE
    out = np.full(len(keep), np.nan)

    def fitted(train: np.ndarray) -> Logistic:
        return fit_logistic(rows.features[keep[train]], label[train], FITS[WITH_RETRIEVAL])

    def scored(logistic: Logistic, held: np.ndarray) -> None:
        out[held] = logistic.probability(rows.features[keep[held]])

    cross_fit(within(list(parts), keep, len(rows)), np.arange(len(keep)), fitted, scored)
    found = {}
    for other in (ABLATED, NOCORPUS):
        mask = np.isin(kind[keep], (ANSWERABLE, other))
        if (kind[keep] == other).any():
            found[other] = float(roc_auc_score(kind[keep][mask] == other, out[mask]))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", nargs="+", help="the answerable training records (several: read as one)")
    parser.add_argument("--ablated", required=True, nargs="+", help="records of their ablated copies (several: as one)")
    parser.add_argument("--nocorpus", required=True, help="records of the no-corpus questions set aside to learn from")
    parser.add_argument("--config", required=True, help="the pool's config (its members)")
    parser.add_argument("--voter", default="cascade", help="the voter whose choices P(right) judges (default cascade)")
    parser.add_argument("--share", type=float, default=DEFAULT_SHARE, help="the unanswerable share (default 0.33)")
    parser.add_argument("--alpha", type=float, default=0.3, help="the error rate (default 0.3)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the table here")
    args = parser.parse_args(argv)
    members = load_config(args.config).members
    train = load_runs(args.records, members)
    mix = mix_records(train, load_runs(args.ablated, members), load_run(args.nocorpus, members))
    # token costs at the answerable records' rates, as `eor train` prices them (eor.learning.training)
    settings = VoteSettings(max_loss=0.005, confidence=False, rates=member_costs(train).rates)
    arrays = vote_arrays(mix.data, settings, retrieval=True)
    parts = mix_folds(mix, args.folds, args.seed)
    rows = mix_evidence(arrays, mix, args.voter, settings, parts, lambda done: print(done, flush=True))
    right = arrays.correctness[np.arange(len(rows)), rows.pick] >= 0.5
    table: dict[str, Any] = {"questions": {k: int((mix.kind == k).sum()) for k in (ANSWERABLE, ABLATED, NOCORPUS)}}
    for family, fit in FAMILIES.items():
        for trained, kinds in TRAINED_ON.items():
            for weighted in (False, True) if len(kinds) > 1 else (False,):
                found = variant(rows, right, mix.kind, parts, kinds, fit, args.share, args.alpha, weighted)
                name = f"{family} / {trained}" + (", weighted to the share" if weighted else "")
                table[name] = found
                print(f"{name:60s} {rounded(found)}")
    for family in ("confidence", "confidence, retrieval"):
        name = f"P(answerable) × P(right | answerable), {family}"
        table[name] = found = product(rows, right, mix.kind, parts, FAMILIES[family], args.share, args.alpha)
        print(f"{name:60s} {rounded(found)}")
    table["unanswerable_auc"] = unanswerable_auc(rows, mix.kind, parts)
    print("P(unanswerable) AUC:", table["unanswerable_auc"])
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(table, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
