"""Per-candidate features of the reader as judge, from a record's `judge` scores (eor.pipeline.judging): the
first step of a voter that chooses among candidates (members' answers and spans), not only among members.

For question q with candidates c (members' answers first, then spans) and prompts p (each member's prompt,
and `#id` for each retrieved passage alone), with L(c|p) the reader's log-probability of c (end of turn
included) and L̄(c|p) its per-token mean:

    wrote:<member>     1 when <member> wrote c
    agreement          #members that wrote c / M
    span               1 when c is a span no member wrote
    log_length         log(1 + tokens of c)
    lp:<member>        L(c|p_member) − max_c' L(c'|p_member)        (0 for the likeliest candidate)
    mean:<member>      L̄(c|p_member) − max_c' L̄(c'|p_member)
    mix:members        log Σ_m exp L(c|p_m) − max_c' (same)         (RAG-Sequence over the members' prompts)
    mix:passages       log Σ_p exp L(c|p) − max_c' (same), over the passages alone; 0 without them
    best:passages      max_p L(c|p) − max_c' max_p L(c'|p)
    rank:members       rank of c by mix:members among the candidates (0 = first), over the candidates
    margin:members     mix:members of c minus that of the best other candidate

Relative values (to the question's best candidate) make a question's features comparable with another's:
a long prompt or a rare answer lowers every candidate's likelihood alike. A prompt a record lacks (a member
that failed) gives that member's features the value 0 for every candidate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

PASSAGE = "#"  # a prompt name that starts so is a passage alone: `#` + its id (eor.pipeline.judging)


@dataclass(frozen=True)
class JudgeFeatures:
    """A question's candidate texts, their features (candidates × features) and the feature names."""

    texts: list[str]
    matrix: np.ndarray
    names: list[str]


def feature_names(members: Sequence[str]) -> list[str]:
    names = [f"wrote:{m}" for m in members] + ["agreement", "span", "log_length"]
    names += [f"lp:{m}" for m in members] + [f"mean:{m}" for m in members]
    return names + ["mix:members", "mix:passages", "best:passages", "rank:members", "margin:members"]


def judge_features(judge: Mapping[str, Any], members: Sequence[str]) -> JudgeFeatures:
    """The features of a record's judged candidates (its `judge` field) for the pool `members`."""
    candidates = list(judge.get("candidates") or [])
    n = len(candidates)
    names = feature_names(members)
    if not n:
        return JudgeFeatures([], np.zeros((0, len(names))), names)
    columns: list[np.ndarray] = []
    for member in members:
        columns.append(np.array([float(member in c["members"]) for c in candidates]))
    columns.append(np.array([len(c["members"]) / max(len(members), 1) for c in candidates]))
    columns.append(np.array([float(not c["members"]) for c in candidates]))
    columns.append(np.array([math.log1p(_tokens(c)) for c in candidates]))
    totals = {m: _scores(candidates, m, "logprob") for m in members}
    means = {m: _scores(candidates, m, "mean_logprob") for m in members}
    columns += [_relative(totals[m]) for m in members] + [_relative(means[m]) for m in members]
    present = [totals[m] for m in members if not np.isnan(totals[m]).all()]
    mix = _relative(_logsumexp(present)) if present else np.zeros(n)
    columns.append(mix)
    passages = sorted({p for c in candidates for p in c["scores"] if p.startswith(PASSAGE)})
    alone = [_scores(candidates, p, "logprob") for p in passages]
    columns.append(_relative(_logsumexp(alone)) if alone else np.zeros(n))
    columns.append(_relative(np.nanmax(np.vstack(alone), axis=0)) if alone else np.zeros(n))
    order = np.argsort(-mix, kind="stable")
    rank = np.empty(n)
    rank[order] = np.arange(n)
    columns.append(rank / max(n - 1, 1))
    columns.append(_margins(mix))
    return JudgeFeatures([c["text"] for c in candidates], np.column_stack(columns), names)


def _tokens(candidate: Mapping[str, Any]) -> int:
    return max((s.get("tokens", 0) for s in candidate["scores"].values()), default=0)


def _scores(candidates: list[Mapping[str, Any]], prompt: str, key: str) -> np.ndarray:
    """Each candidate's `key` under `prompt` (NaN where the record has no such prompt)."""
    return np.array([float(c["scores"][prompt][key]) if prompt in c["scores"] else math.nan for c in candidates])


def _relative(values: np.ndarray) -> np.ndarray:
    """values − their maximum; 0 where unknown."""
    if np.isnan(values).all():
        return np.zeros(len(values))
    return np.nan_to_num(values - np.nanmax(values), nan=0.0)


def _logsumexp(rows: list[np.ndarray]) -> np.ndarray:
    stacked = np.vstack(rows)
    peak = np.nanmax(stacked, axis=0)
    return peak + np.log(np.nansum(np.exp(stacked - peak), axis=0))


def _margins(values: np.ndarray) -> np.ndarray:
    """Each value minus the best of the others (0 for a lone candidate)."""
    if len(values) < 2:
        return np.zeros(len(values))
    top = np.sort(values)[::-1]
    return np.where(values >= top[0], values - top[1], values - top[0])
