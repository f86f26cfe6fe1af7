"""Analyse benchmarks.risk_stop_spy's pickle: the judged cascade at each λ with the usual stop and with a risk-aware stop (a step
stops only where its answer's P(right) also reaches λ), the mixed test at α for share s, out of fold on training."""
import pickle
import sys

import numpy as np

from eor.learning.beyond_corpus import ANSWERABLE, NOCORPUS, cross_fitted, taught_kinds
from eor.pipeline.abstention import DELTA, GRID, MIN_COVERAGE, MixedCounts
from voters.choice_evidence import Evidence
from voters.folds import in_row_order
from voters.right import has_features

d = pickle.load(open(sys.argv[1], "rb"))
judge_cost = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
m = d["mix"][0]
rows, right, kind, parts = m["rows"], m["right"], m["kind"], m["parts"]
N = len(rows)
order = in_row_order(parts)
S = len(d["folds"][0]["per_step"])
t = np.concatenate([np.full(len(f["stop_p"]), f["threshold"]) for f in d["folds"]])[order]
stop_p = np.concatenate([f["stop_p"] for f in d["folds"]])[order]
spent = np.concatenate([f["spent"] for f in d["folds"]])[order]
E = [Evidence.concatenate([f["per_step"][j][0] for f in d["folds"]]).take(order) for j in range(S)]
R = np.column_stack([np.concatenate([f["per_step"][j][1] for f in d["folds"]])[order] for j in range(S)])
stopped = m["answers"].astype(bool)
teaches = np.isin(kind, taught_kinds(kind)) & stopped
ext = Evidence.concatenate([rows, *E])
ext_right = np.concatenate([right, *[R[:, j] for j in range(S)]])
ext_parts = [np.concatenate([p + k * N for k in range(S + 1)]) for p in parts]
P = np.full(len(ext), np.nan)
for fit in m["fit_names"]:
    every = np.flatnonzero(has_features(ext, fit))
    taught = every[every < N]
    taught = taught[teaches[taught]]
    _, found = cross_fitted(ext, ext_right, ext_parts, every, taught, fit)
    fresh = every[np.isnan(P[every])]
    P[fresh] = found[fresh]
base = P[:N]
print("check: steps' P as calibrate_mix_rows", np.allclose(base[stopped], m["probability"][stopped], equal_nan=True))
Pj = P[N:].reshape(S, N).T
go = stop_p[:, : S - 1] >= t[:, None]
first = np.where(go.any(axis=1), go.argmax(axis=1), S - 1)
print("check: the usual stop as recorded", np.array_equal(first < S - 1, stopped))
jp, jr = d["judge"][-1], d["joint"][0]["judge_right"]
share = d["joint"][0]["share"]


def policy(lam, aware):
    answered = np.zeros(N, bool)
    good = np.zeros(N, bool)
    step = np.full(N, S - 1)
    for i in range(N):
        for j in range(S - 1):
            if go[i, j] and (not aware or Pj[i, j] >= lam):
                step[i] = j
                answered[i], good[i] = Pj[i, j] >= lam, R[i, j]
                break
        else:
            answered[i], good[i] = jp[i] >= lam, jr[i]
    cost = spent[np.arange(N), step] + np.where(step == S - 1, judge_cost, 0.0)
    return answered, good, step, cost


A, U = kind == ANSWERABLE, kind == NOCORPUS
for aware in (False, True):
    print("risk-aware stop" if aware else "the usual stop")
    for alpha in (0.3, 0.4):
        chosen = None
        for lam in sorted(GRID, reverse=True):
            ans, good, step, cost = policy(lam, aware)
            n, a, w = int(A.sum()), int((ans & A).sum()), int((ans & A & ~good).sum())
            if a < MIN_COVERAGE * n:
                continue
            counts = MixedCounts(n, a, w, int(U.sum()), int((ans & U & ~good).sum()))
            p = counts.p_value(alpha, share)
            line = (f"  α {alpha} λ {lam:.2f}: answerable answered {a}/{n} ({100 * a / n:.1f}%), wrong {w} "
                    f"({100 * w / max(a, 1):.1f}%), no-corpus answered wrongly {counts.wrong_unanswerable}/{counts.m}, "
                    f"p {p:.3f}; answerable: members {np.mean(step[A] + 1):.2f}, judge {np.mean(step[A] == S - 1):.2f}, "
                    f"cost {np.mean(cost[A]):.2f}")
            print(line)
            if p > DELTA:
                break
            chosen = lam
        print(f"  α {alpha}: chosen {chosen}")
