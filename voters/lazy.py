"""Exact lazy voting: can the members still pending change the paper's voter's chosen answer, whatever they
answer? If not, an ensemble may stop running members (`eor ask`, `eor serve`), and its answer is the one the
full vote would give.

With every similarity in [0, 1] and every weight ≥ 0, a pending member's combined similarity (eq. 6) to anyone
lies in [0, S⁺] with S⁺ = Σ_k ω^s_k. For a member m that has answered, its pool over the N = (active members − 1)
others is bounded by setting the pending similarities to 0 (below) and to S⁺ (above): exact for `mean`, `max`
and `majority` pooling, which are monotone in each similarity (their registrations give the bound;
`plurality` is not monotone: no early stop). A pending
member p scores at most ω^r_p · (P⁺ + ω^g), with P⁺ = S⁺ (mean, max) or 1 (majority), and its grounding at
most 1. The vote can stop once the leader's lower bound exceeds, by a margin, the upper bound of every pending
member and of every answered member whose answer differs from the leader's; members with the leader's answer
may still overtake it, but the chosen answer stays the same. Members dropped by their weight (ω^r ≤ t) never
need to run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from eor.core.errors import ConfigError
from voters.grounding import grounding_features
from voters.pooling import POOLINGS, pooling_bound

#: the leader must lead by more than this (relative; above the vote's tie tolerance of 1e-9), so float noise
#: cannot decide an early stop.
MARGIN = 1e-8


class SizedVoter(Protocol):
    """A fitted voter's kind and number of members (every voter has them)."""

    kind: str

    @property
    def n_members_(self) -> int: ...

    @property
    def active_members_(self) -> list[int] | None: ...


class BoundedVoter(SizedVoter, Protocol):
    """What lazy voting reads of a fitted voter (voters.voter.Voter): its learned weights, pooling and
    threshold, the members that take part in the vote, and the similarities of answers."""

    @property
    def metric_weights_(self) -> np.ndarray: ...
    @property
    def retriever_weights_(self) -> np.ndarray: ...
    @property
    def grounding_weight_(self) -> float | None: ...
    @property
    def pooling_(self) -> str: ...
    @property
    def threshold(self) -> float: ...
    @property
    def active_members_(self) -> list[int]: ...

    def similarity_tensor(self, answers: Sequence[Sequence[str]]) -> np.ndarray: ...


@dataclass(frozen=True)
class LazyState:
    """Decision of one check: stop (and the leading answer), or go on."""

    stop: bool
    leader: int | None  # position (among the voter's members) of the leading answered member
    answer: str | None


def supports_lazy_voting(voter: Any) -> bool:
    """Whether `lazy_decision` can bound this voter: it says it admits a bound (`admits_bound`, the paper's
    voter whose pooling has an upper bound, voters.pooling)."""
    return bool(voter.admits_bound)


def needed_members(voter: SizedVoter) -> list[int]:
    """Positions of the members whose answers can matter: a voter's `active_members_` where it drops some
    (the paper's voter: ω^r above the threshold), else all of them."""
    active = voter.active_members_
    return list(range(int(voter.n_members_))) if active is None else list(active)


def lazy_decision(
    voter: BoundedVoter,
    answers: dict[int, str],
    passages: dict[int, Sequence[str]],
    pending: Sequence[int],
    tensor: np.ndarray | None = None,
) -> LazyState:
    """Can the answered members (`answers`: position -> answer) already decide the vote of `voter` whatever
    the `pending` positions answer? Positions are among the voter's members; members dropped by their weight
    are ignored wherever they appear. `tensor`: the similarities (M, M, K) of every member's answer when
    they are known in advance (a replay), else they are computed."""
    if not answers:
        return LazyState(False, None, None)
    active = set(voter.active_members_)
    done = [m for m in sorted(answers) if m in active]
    waiting = [p for p in pending if p in active]
    if not done:
        return LazyState(not waiting, None, None)
    if waiting and not supports_lazy_voting(voter):
        return LazyState(False, None, None)
    similarities = (
        voter.similarity_tensor([[answers[m] for m in done]])[0] if tensor is None else tensor[np.ix_(done, done)]
    )
    low, high = _bounds(voter, done, answers, passages, len(waiting), similarities)
    leader = int(np.argmax(low))  # ties: the earliest member, as the full vote breaks them
    if not waiting:
        return LazyState(True, done[leader], answers[done[leader]])
    metric_sum = float(np.sum(voter.metric_weights_))
    bound = pooling_bound(voter.pooling_)
    assert bound is not None  # supports_lazy_voting: the voter's pooling has an upper bound
    pool_max = bound(metric_sum)
    grounding = voter.grounding_weight_ or 0.0
    weights = voter.retriever_weights_
    rivals = [float(weights[p]) * (pool_max + grounding) for p in waiting]
    rivals += [high[i] for i, m in enumerate(done) if answers[m] != answers[done[leader]]]
    threshold = low[leader] - MARGIN * max(1.0, abs(low[leader]))
    stop = all(rival < threshold for rival in rivals)
    return LazyState(stop, done[leader], answers[done[leader]])


def _bounds(
    voter: BoundedVoter,
    done: list[int],
    answers: dict[int, str],
    passages: dict[int, Sequence[str]],
    n_pending: int,
    similarities: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper decision scores of the answered members, pending similarities at 0 and at S⁺."""
    texts = [answers[m] for m in done]
    combined = similarities @ np.asarray(voter.metric_weights_, dtype=float)  # (D, D)
    n_done = len(done)
    peak = float(np.sum(voter.metric_weights_))
    width = n_done + n_pending
    bounds = []
    for fill in (0.0, peak):
        full = np.full((1, width, width), fill)
        full[0, :n_done, :n_done] = combined
        pooled = POOLINGS[voter.pooling_](full, np.ones((1, width), dtype=bool), float(voter.threshold))[0, :n_done]
        bounds.append(pooled)
    weights = np.asarray(voter.retriever_weights_, dtype=float)[done]
    if voter.grounding_weight_ is not None:
        grounded = grounding_features([texts], [[list(passages.get(m, ())) for m in done]])[0]
        bounds = [pooled + voter.grounding_weight_ * grounded for pooled in bounds]
    return weights * bounds[0], weights * bounds[1]


def simulate(
    voter: BoundedVoter, answers: Sequence[str], passages: Sequence[Sequence[str]], order: Sequence[int]
) -> tuple[str, list[int]]:
    """Run the members of one question lazily in `order` (positions), using their known answers: the chosen
    answer and the positions that had to run. The replay of recorded runs (benchmarks/bench_lazy_voting.py)
    checks the answer against the full vote. Only for voters that `supports_lazy_voting`."""
    if not supports_lazy_voting(voter):
        raise ConfigError(f"lazy voting cannot bound a {voter.kind} voter")
    needed = set(needed_members(voter))
    queue = [m for m in order if m in needed]
    tensor = voter.similarity_tensor([list(answers)])[0]
    done: dict[int, str] = {}
    ran: list[int] = []
    for i, m in enumerate(queue):
        done[m] = answers[m]
        ran.append(m)
        state = lazy_decision(voter, done, {n: passages[n] for n in done}, queue[i + 1 :], tensor)
        if state.stop:
            return state.answer if state.answer is not None else answers[m], ran
    return answers[0], ran  # no member can take part in the vote: the voter falls back to member 0
