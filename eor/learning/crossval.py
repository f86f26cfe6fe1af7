"""Voter candidates and K-fold cross-validation over training records (folds by question, seeded).

Every candidate learns from the rows (questions) of a training fold and chooses a member for each row of
the held-out fold. The records are one batch (voters.batch.VoteBatch, `VoteArrays.batch`), and every fold
fits and predicts on views of it through the voters' one API (`fit(X)`, `predict(X)`): the similarity
tensor, correctness, grounding and selector features are computed once for all questions, so a fold only
slices arrays. Top R is itself a candidate: the member most often right on the training fold. The
out-of-fold choices give each candidate one correctness value per question, compared with Top R's on the
same questions (paired bootstrap interval of the difference, exact McNemar test). A candidate's P(right),
fitted on its out-of-fold choices: eor.learning.calibration.

    top         the best member of the training fold alone (Top R)
    paper       the paper's voter: metric and member weights by Nelder-Mead on the step objective
    grounding   the paper's voter plus the grounding weight ω^g
    smooth      the paper's voter fitted on the softmax surrogate, polished on the step objective
    smooth-grounding   the same with ω^g
    selector    the learned answer selector (logistic regression over candidate features)
    cascade     the cascade of answer selectors (cost-aware: see COST_AWARE)

Other code adds candidates with `register_candidate` (a `Candidate` subclass whose `voter_class` is the
fitted voter's class, voters.protocol), and other packages through the entry point group `eor.voters` (each
naming such a subclass, by its name); they come after eor's own, in `auto`'s choice too.

`auto` is not a candidate of its own: it is the choice among candidates by inner cross-validation on the
training data (`choose_candidate`), never below Top R's inner-CV score (ties go to the earlier candidate
in the order above, so to Top R first).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np
from sklearn.base import clone

from eor.core.errors import ConfigError, InputError
from eor.core.registry import Registry
from eor.evaluation.stats import Bootstrap, paired_test
from eor.evaluation.upper_bound import top_member
from eor.runs.costs import MemberCosts, member_costs
from eor.runs.run_data import RunData
from voters import Voter
from voters.batch import VoteBatch
from voters.cascade import DEFAULT_MAX_LOSS, Cascade
from voters.choice_evidence import ALL, Evidence, choice_evidence, evidence
from voters.features import CandidateBlocks
from voters.folds import cross_fit, folds
from voters.loading import register_voter_kind
from voters.protocol import FittedVoter, check_voter_class
from voters.selector import AnswerSelector

log = logging.getLogger(__name__)

AUTO = "auto"
DEFAULT_FOLDS = 5


@dataclass
class VoteSettings:
    """What every candidate shares: similarity metrics (with parameters), pooling, objective, seed."""

    metrics: tuple[str, ...] = ("em", "f1", "cosine")
    metric_params: dict[str, dict[str, Any]] | None = None
    pooling: str = "mean"
    correctness: str = "em"
    restarts: int = 4
    seed: int = 0
    selector_c: float = 1.0
    cache_dir: str | None = None
    max_loss: float | None = None  # the cascade's tolerance (a fraction); None: its default
    budget: float | None = None  # the cascade's most mean cost per question, instead of max_loss
    cost_unit: str = "auto"  # eor.runs.costs
    rates: dict[str, float] | None = None  # the reader's tokens per second for token costs; None: fitted
    confidence: bool = True  # the selector's (and the cascade's) confidence features, where records have them


def run_batch(data: RunData, retrieval: bool = False) -> VoteBatch:
    """A run's records as the batch every voter reads (voters.batch): answers, passages, question texts, gold
    answers and the reader's confidence; with `retrieval`, also the passages each member found in a corpus, for
    P(right)'s retrieval family (voters.choice_evidence: read only beyond the corpus, where it is learned)."""
    return VoteBatch(
        data.answers,
        data.passages,
        data.texts,
        golds=data.golds,
        confidence=data.confidence or None,
        retrieved=(data.retrieved or None) if retrieval else None,
    )


@dataclass
class VoteArrays:
    """A run's records as one batch (`batch`), and what cross-validation reads of them for every question
    under the settings they were made with: each answer's correctness (Q, M), the candidate feature blocks
    (voters.features), and each member's cost per question (eor.runs.costs; None when the records hold no
    seconds)."""

    data: RunData
    batch: VoteBatch
    correctness: np.ndarray
    blocks: CandidateBlocks
    costs: MemberCosts | None = None

    @property
    def questions(self) -> int:
        return len(self.batch)

    def take(self, rows: np.ndarray) -> VoteBatch:
        """The questions at `rows`, with the members' costs: a view of `batch`, which shares what it computed."""
        whole = (
            self.batch
            if self.costs is None
            else self.batch.with_costs(self.costs.matrix, self.costs.unit, self.costs.replay)
        )
        return whole.take(rows)


def vote_arrays(data: RunData, settings: VoteSettings, retrieval: bool = False) -> VoteArrays:
    """The records of `data` as one batch (`run_batch`), with the similarities, correctness and candidate blocks
    that `settings` ask for computed for every question (the reader's confidence in the blocks where
    `settings.confidence` and the records hold it), and the members' costs (`settings.cost_unit`)."""
    batch = run_batch(data, retrieval)
    s = settings
    blocks, _ = batch.blocks(s.metrics, s.metric_params, s.cache_dir, confidence=s.confidence)
    try:
        costs = member_costs(data, s.cost_unit, s.rates)
    except InputError:
        costs = None
    return VoteArrays(data, batch, batch.correctness(s.correctness), blocks, costs)


def without_confidence(arrays: VoteArrays) -> VoteArrays:
    """The same arrays with the reader's confidence left out of the candidate blocks (what settings with
    `confidence=False` compute)."""
    return replace(arrays, blocks=replace(arrays.blocks, confidence=None))


class Candidate:
    """A voter to cross-validate. `template(arrays)` gives its unfitted voter (an estimator of `voter_class`,
    voters.protocol); `fit(arrays, rows)` fits an unfitted copy of it (`sklearn.base.clone`) on the training
    questions `rows` (the voter's `fit(X)`, X their batch: `VoteArrays.take`); `predict(arrays, rows)` then
    chooses a member per row (`predict(X)`). `estimator` is the fitted voter; Top R has none (`eor train`
    saves it as a single-member voter)."""

    name = "candidate"
    voter_class: type | None = None

    def __init__(self, settings: VoteSettings):
        self.settings = settings
        self.estimator: Any = None

    def template(self, arrays: VoteArrays) -> Any:
        """The unfitted voter (an estimator of `voter_class`) that `fit` fits a clone of."""
        raise NotImplementedError

    def fit(self, arrays: VoteArrays, rows: np.ndarray) -> Candidate:
        self.estimator = clone(self.template(arrays)).fit(arrays.take(rows))
        return self

    def predict(self, arrays: VoteArrays, rows: np.ndarray) -> np.ndarray:
        return self.estimator.predict(arrays.take(rows))

    def answer(self, arrays: VoteArrays, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(chosen member, cost of the members that ran) per row; a voter of the full pool runs every member
        (costs are NaN when the records hold none)."""
        return self.predict(arrays, rows), _pool_cost(arrays, rows)

    def evidence(self, arrays: VoteArrays, rows: np.ndarray) -> Evidence:
        """The evidence of its choice per row (voters.right)."""
        return choice_evidence(self.estimator, arrays.take(rows))


class TopCandidate(Candidate):
    name = "top"
    voter_class = None  # saved as the paper's Voter with one member (eor.commands.train_command)

    def fit(self, arrays: VoteArrays, rows: np.ndarray) -> Candidate:
        self.member = top_member(arrays.correctness[rows])  # ties: the first member
        return self

    def predict(self, arrays: VoteArrays, rows: np.ndarray) -> np.ndarray:
        return np.full(len(rows), self.member, dtype=int)

    def answer(self, arrays: VoteArrays, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        costs = arrays.costs.matrix[rows, self.member] if arrays.costs is not None else np.full(len(rows), np.nan)
        return self.predict(arrays, rows), costs

    def evidence(self, arrays: VoteArrays, rows: np.ndarray) -> Evidence:
        """The evidence of its member's answer, scored 0; the others −inf (never chosen, no rival)."""
        scores = np.full((len(rows), len(arrays.data.names)), -np.inf)
        scores[:, self.member] = 0.0
        batch = arrays.take(rows)
        passages = [arrays.data.passages[int(i)] for i in rows]
        return evidence(
            scores, batch.answers, passages, batch.confidence, ALL, None, batch.retrieved, batch.relevance()
        )


class PaperCandidate(Candidate):
    """The paper's `Voter` (optionally with grounding and/or the smooth objective)."""

    voter_class = Voter

    def __init__(self, settings: VoteSettings, *, grounding: bool = False, objective: str = "step"):
        super().__init__(settings)
        self.grounding = grounding
        self.objective = objective
        self.name = {("step", False): "paper", ("step", True): "grounding"}.get(
            (objective, grounding), "smooth-grounding" if grounding else "smooth"
        )

    def template(self, arrays: VoteArrays) -> Voter:
        s = self.settings
        return Voter(
            metrics=s.metrics,
            pooling=s.pooling,
            correctness=s.correctness,
            grounding=self.grounding,
            restarts=s.restarts,
            seed=s.seed,
            metric_params=s.metric_params,
            cache_dir=s.cache_dir,
            members=arrays.data.names,
            objective=self.objective,
        )


class SelectorCandidate(Candidate):
    name = "selector"
    voter_class = AnswerSelector

    def template(self, arrays: VoteArrays) -> AnswerSelector:
        s = self.settings
        return AnswerSelector(
            metrics=s.metrics,
            C=s.selector_c,
            correctness=s.correctness,
            metric_params=s.metric_params,
            cache_dir=s.cache_dir,
            members=arrays.data.names,
            confidence=s.confidence,
        )


class CascadeCandidate(Candidate):
    """The cascade (voters.cascade): its out-of-fold correctness is that of the answer it stops at."""

    name = "cascade"
    voter_class = Cascade

    def template(self, arrays: VoteArrays) -> Cascade:
        s = self.settings
        max_loss = s.max_loss if s.max_loss is not None or s.budget is not None else DEFAULT_MAX_LOSS
        return Cascade(
            metrics=s.metrics,
            C=s.selector_c,
            correctness=s.correctness,
            metric_params=s.metric_params,
            max_loss=None if s.budget is not None else max_loss,
            budget=s.budget,
            seed=s.seed,
            members=arrays.data.names,
            confidence=s.confidence,
        )

    def fit(self, arrays: VoteArrays, rows: np.ndarray) -> Candidate:
        if arrays.costs is None:
            raise InputError("a cascade learns from members' costs: the records lack their seconds")
        return super().fit(arrays, rows)

    def answer(self, arrays: VoteArrays, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(chosen member, cost of the steps up to the one it stopped at, each member charged as the cascade runs
        it: voters.spend) per row."""
        batch = arrays.take(rows)
        chosen, stops = self.estimator.replay(batch)
        return chosen, self.estimator.spent(batch.step_costs, stops)


def _check_candidate(candidate: Any) -> type[FittedVoter]:
    if not (isinstance(candidate, type) and issubclass(candidate, Candidate)):
        raise ConfigError(f"a voter candidate is a subclass of eor.learning.crossval.Candidate, got {candidate!r}")
    name = candidate.name
    if not isinstance(name, str) or not name or name in (AUTO, Candidate.name):
        raise ConfigError(f"candidate {candidate.__name__} needs a name of its own, not {name!r}")
    return check_voter_class(candidate.voter_class)


def _is_candidate(value: Any) -> bool:
    try:
        _check_candidate(value)
    except ConfigError:
        return False
    return True


def _under_its_name(name: str, candidate: Any) -> tuple[str, Any] | None:
    if candidate.name != name:
        log.warning("skipping eor.voters plugin %r: it holds the candidate %r", name, candidate.name)
        return None
    return name, candidate


#: every candidate by name: eor's (in the order of the module docstring), those registered in Python, then
#: those of installed packages (entry point group `eor.voters`, the name being the candidate's)
CANDIDATES: Registry[Callable[[VoteSettings], Candidate]] = Registry(
    "voter",
    group="eor.voters",
    accept=_is_candidate,
    expected="a subclass of eor.learning.crossval.Candidate with a voter_class",
    adapt=_under_its_name,
)
for _name, _factory in (
    ("top", TopCandidate),
    ("paper", PaperCandidate),
    ("grounding", partial(PaperCandidate, grounding=True)),
    ("smooth", partial(PaperCandidate, objective="smooth")),
    ("smooth-grounding", partial(PaperCandidate, grounding=True, objective="smooth")),
    ("selector", SelectorCandidate),
    ("cascade", CascadeCandidate),
):
    CANDIDATES.register(_name, _factory)


def register_candidate(candidate: type[Candidate], *, replace: bool = False) -> type[Candidate]:
    """Make `candidate` (a Candidate subclass with a `name` and a `voter_class`) available to `eor train
    --voter NAME`, to cross-validation and to `auto`, and its weights files to `voters.load_voter`."""
    voter_class = _check_candidate(candidate)
    taken = CANDIDATES.get(candidate.name)
    if taken is not None and taken is not candidate and not replace:  # before either registry changes
        raise ConfigError(f"voter {candidate.name!r} is already registered (pass replace=True to replace it)")
    register_voter_kind(voter_class, replace=replace)
    CANDIDATES.register(candidate.name, candidate, replace=replace)
    return candidate


def candidate_factories() -> dict[str, Callable[[VoteSettings], Candidate]]:
    """Every candidate by name (`CANDIDATES`)."""
    return dict(CANDIDATES.items())


#: candidates that trade accuracy for cost: `auto` considers them only under an explicit max_loss or budget.
COST_AWARE = ("cascade",)


def candidate_names(cost_aware: bool = True) -> list[str]:
    """Every candidate's name; without the cost-aware ones (COST_AWARE) unless `cost_aware`."""
    return [name for name in candidate_factories() if cost_aware or name not in COST_AWARE]


def auto_names(settings: VoteSettings) -> list[str]:
    """The candidates `auto` chooses among: the cost-aware ones only under an explicit max_loss or budget."""
    return candidate_names(cost_aware=settings.max_loss is not None or settings.budget is not None)


def build_candidate(name: str, settings: VoteSettings) -> Candidate:
    factories = candidate_factories()
    if name not in factories:
        raise ConfigError(f"unknown voter {name!r}; available: {', '.join([*factories, AUTO])}")
    return factories[name](settings)


@dataclass
class CvResult:
    """Out-of-fold correctness per question of every candidate (`scores[name]`, shape (Q,)), the cost of
    the members it ran (`costs[name]`), the member whose answer it picked (`picks[name]`, an index into the
    records' members), and the candidate that `auto` chose in each outer fold when it was cross-validated."""

    k: int
    seed: int
    scores: dict[str, np.ndarray]
    chosen: dict[str, list[str]] = field(default_factory=dict)
    costs: dict[str, np.ndarray] = field(default_factory=dict)  # per question: the members that ran
    picks: dict[str, np.ndarray] = field(default_factory=dict)


#: called with a label ("selector, fold 2/5") after each candidate's fold of a cross-validation.
Progress = Callable[[str], None]


def out_of_fold(
    arrays: VoteArrays,
    names: Sequence[str],
    settings: VoteSettings,
    k: int,
    seed: int,
    rows: np.ndarray | None = None,
    inner_folds: int = DEFAULT_FOLDS,
    progress: Progress | None = None,
) -> CvResult:
    """K-fold out-of-fold correctness of each named candidate over `rows` (default: every question).

    `auto` among `names` runs a nested cross-validation: in each outer training fold, `choose_candidate`
    picks among the other candidates by an inner `inner_folds`-fold CV, and the choice is refitted on the
    whole outer training fold. `progress(label)` is called after each candidate's fold (k × len(names) calls).
    """
    rows = np.arange(arrays.questions) if rows is None else np.asarray(rows)
    plain = [name for name in names if name != AUTO]
    scores = {name: np.zeros(len(rows)) for name in names}
    costs = {name: np.zeros(len(rows)) for name in names}
    member = {name: np.zeros(len(rows), dtype=int) for name in names}
    chosen: dict[str, list[str]] = {AUTO: []} if AUTO in names else {}
    step = progress or (lambda label: None)
    candidates = {name: build_candidate(name, settings) for name in plain}
    fold = iter(range(1, k + 1))

    def fitted(train: np.ndarray) -> dict[str, Candidate]:
        """Each candidate refitted (in place) on the fold's training rows; `auto`'s choice among them."""
        number, train_rows = next(fold), rows[train]
        models = {}
        for name in plain:
            models[name] = candidates[name].fit(arrays, train_rows)
            step(f"{name}, fold {number}/{k}")
        if AUTO in names:
            pick, _ = choose_candidate(arrays, plain or auto_names(settings), settings, inner_folds, seed, train_rows)
            chosen[AUTO].append(pick)
            models[AUTO] = models.get(pick) or build_candidate(pick, settings).fit(arrays, train_rows)
            step(f"{AUTO} (nested), fold {number}/{k}")
        return models

    def answered(models: dict[str, Candidate], held: np.ndarray) -> None:
        for name, model in models.items():
            member[name][held], costs[name][held] = model.answer(arrays, rows[held])
            scores[name][held] = _correct(arrays, rows[held], member[name][held])

    cross_fit(folds(len(rows), k, seed), np.arange(len(rows)), fitted, answered)
    return CvResult(k, seed, scores, chosen, costs, member)


def choose_candidate(
    arrays: VoteArrays,
    names: Sequence[str],
    settings: VoteSettings,
    k: int,
    seed: int,
    rows: np.ndarray | None = None,
    progress: Progress | None = None,
) -> tuple[str, dict[str, float]]:
    """The candidate with the best inner-CV mean correctness over `rows` (Top R is always among them and
    wins ties, so the choice never scores below Top R by this CV); returns (name, mean per candidate).

    Under `settings.budget`: the best among the candidates whose mean cost per question is at most the
    budget. Under `settings.max_loss`: the cheapest candidate within max_loss of the best mean."""
    ordered = ["top", *[name for name in candidate_names() if name in names and name != "top"]]
    ordered += [name for name in names if name not in ordered and name != AUTO]
    if (settings.budget is not None or settings.max_loss is not None) and arrays.costs is None:
        raise InputError("choosing by cost (max_loss, budget) needs records with each member's seconds")
    result = out_of_fold(arrays, ordered, settings, k, seed + 1, rows, progress=progress)
    means = {name: float(values.mean()) for name, values in result.scores.items()}
    cost = {name: float(values.mean()) for name, values in result.costs.items()}
    eligible = list(ordered)
    if settings.budget is not None:
        eligible = [name for name in ordered if cost[name] <= settings.budget] or ["top"]
    best = max(eligible, key=lambda name: (means[name], -ordered.index(name)))
    if settings.max_loss is not None and settings.budget is None:
        near = [name for name in ordered if means[name] >= means[best] - settings.max_loss - 1e-12]
        best = min(near, key=lambda name: (cost[name], -means[name], ordered.index(name)))
    return best, means


def _correct(arrays: VoteArrays, rows: np.ndarray, picks: np.ndarray) -> np.ndarray:
    return arrays.correctness[rows, np.asarray(picks, dtype=int)]


def _pool_cost(arrays: VoteArrays, rows: np.ndarray) -> np.ndarray:
    if arrays.costs is None:
        return np.full(len(rows), np.nan)
    return arrays.costs.matrix[rows].sum(axis=1)


def compare_with_top(result: CvResult, resamples: int = 2000) -> dict[str, dict[str, Any]]:
    """Per candidate: mean, and the paired test of it against Top R (interval of the mean difference)."""

    if "top" not in result.scores:
        raise InputError("cross-validation results lack Top R ('top')")
    top = result.scores["top"]
    shared = Bootstrap.draw(len(top), resamples, result.seed)
    table = {}
    for name, values in result.scores.items():
        test = paired_test(values, top, shared)
        table[name] = {
            "mean": float(values.mean()),
            "minus_top": test["difference"],
            "ci": test["ci"],
            "p_value": test["p_value"],
            "test": test["test"],
        }
        costs = result.costs.get(name)
        if costs is not None and len(costs) and np.all(np.isfinite(costs)):
            table[name]["cost"] = float(costs.mean())
        if name in result.chosen:
            table[name]["chosen_per_fold"] = list(result.chosen[name])
    return table
