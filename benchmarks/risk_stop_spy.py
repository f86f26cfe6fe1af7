"""Probe (training only): run `eor train --judge` and keep what a risk-aware stop needs: per fold, each step's
evidence, stop P and pick for the held rows; the steps' P(right) rows; the judge's out-of-fold P on every row."""
import pickle
import sys

import numpy as np

import eor.learning.judge_cascade as jc
from eor.cli import main
from voters.cascade import step_positions
from voters.cascade_fit import step_probabilities
from voters.choice_evidence import EARLY, LAST, evidence

folds, mix, judge, joint = [], [], [], []

original_evidence = jc.choice_evidence


def spy_evidence(cascade, X):
    blocks, rows = cascade._blocks(X)
    steps = step_positions(cascade)
    probability, picks, scored = step_probabilities(blocks, steps, rows)
    em = X.correctness("em")
    retrieved, relevance = X.retrieved, X.relevance()
    per_step = []
    for j, (positions, _, _) in enumerate(steps):
        scores = np.full((len(X), cascade.n_members_), -np.inf)
        scores[:, list(positions)] = scored[j]
        group = EARLY if j < len(steps) - 1 else LAST
        ev = evidence(scores, X.answers, X.passages, X.confidence, group, picks[:, j], retrieved, relevance)
        per_step.append((ev, em[np.arange(len(X)), picks[:, j]] >= 0.5))
    spent = np.column_stack([cascade.spent(X.step_costs, np.full(len(X), j)) for j in range(len(steps))])
    folds.append(dict(threshold=cascade.threshold_, stop_p=probability, per_step=per_step, spent=spent))
    return original_evidence(cascade, X)


original_mix = jc.calibrate_mix_rows


def spy_mix(rows, right, kind, parts, *args, **kwargs):
    out = original_mix(rows, right, kind, parts, *args, **kwargs)
    mix.append(dict(rows=rows, right=np.array(right), kind=np.array(kind), parts=[np.array(p) for p in parts],
                    answers=np.array(kwargs.get("answers")), probability=np.array(out.probability),
                    fits=np.array(out.fits), fit_names=list(out.model.fits)))
    return out


original_cf = jc.cross_fitted


def spy_cf(*args, **kwargs):
    out = original_cf(*args, **kwargs)
    judge.append(np.array(out))
    return out


original_joint = jc.joint_thresholds


def spy_joint(steps, ended, judged, judge_right, share):
    joint.append(dict(ended=np.array(ended), judge_right=np.array(judge_right), share=share,
                      p_steps=np.array(steps.probability), r_steps=np.array(steps.right)))
    return original_joint(steps, ended, judged, judge_right, share)


jc.choice_evidence, jc.calibrate_mix_rows, jc.cross_fitted, jc.joint_thresholds = spy_evidence, spy_mix, spy_cf, spy_joint
code = main(sys.argv[2:])
pickle.dump(dict(folds=folds, mix=mix, judge=judge, joint=joint), open(sys.argv[1], "wb"))
sys.exit(code)
