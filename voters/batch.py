"""`VoteBatch`: what every voter kind fits on, predicts and is scored on (`fit(X, y=None)`, `predict(X)`,
`score(X, y=None)`): the recorded answers of a pool's members to a batch of questions.

A batch holds, per question, each member's answer (in the pool's member order) and, where they are known,
each member's passages (a list of texts), the question's text, its gold answers, the reader's confidence
summaries (eor.core.confidence), each member's cost (e.g. its recorded seconds) and the judge's candidates (the
members' answers and spans of their passages, with the reader's scores where it gave them:
voters.judge_features.JudgeFeatures, as eor.learning.judge_training makes them from records).

A voter chooses among a question's *options* (`chooses`, voters.protocol): the members' answers for most kinds,
the judge's candidates for the judge voter; `option_correctness` is what `score` measures either way.

What voters compute from a batch (the similarity tensor under a set of metrics, each answer's correctness, the
grounding feature, the candidate feature blocks of the learned selectors) is computed when a voter first asks,
once, over the whole batch, and kept.

`take(rows)` gives the batch of some of its questions: a view that shares what the whole batch computes.
A cross-validation (eor.learning.crossval) fits and predicts on views of one batch, so every question's similarities
and features are computed once, and are the same, bit for bit, whichever fold reads them (a model metric
scores all of a batch's pairs in one call, so a batch computed on its own could differ in the last bits).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np

from eor.core.cache_policy import KeyedMemo
from eor.core.correctness import correctness_matrix, correctness_rows
from eor.core.errors import InputError
from voters.features import CandidateBlocks, candidate_blocks
from voters.grounding import grounding_features
from voters.judge_features import JudgeFeatures
from voters.relevance import Relevance
from voters.similarity import check_answers, similarity_tensor
from voters.spend import FixedCosts, StepCosts, TakenCosts

Answers = Sequence[Sequence[str]]
Golds = Sequence[Sequence[str]]  # [question] -> its acceptable answers
Passages = Sequence[Sequence[Sequence[str]]]  # [question][member] -> that member's passage texts
Confidence = Sequence[Sequence[Mapping[str, Any] | None]]  # [question][member] -> a summary, or None

T = TypeVar("T")

#: the optional per-question fields, and what an error calls them
_FIELDS = {
    "passages": "passages",
    "questions": "question texts",
    "golds": "gold answers",
    "confidence": "confidence",
    "retrieved": "retrieved passages",
    "candidates": "judge candidates",
}
#: what a voter chooses among (voters.protocol `chooses`): the members' answers, or the judge's candidates
OPTIONS = ("members", "candidates")


class VoteBatch:
    """The members' answers to a batch of questions (`answers[q][m]`), with what else is known of them.

    passages[q][m]: member m's passage texts; questions[q]: the question; golds[q]: its acceptable answers
    (what `fit` and `score` read when no `y` is given); confidence[q][m]: the reader's confidence summary of
    the answer (None where unknown); costs (Q, M): each member's cost per question, in `cost_unit`, and
    `step_costs` what it costs run right after another member (voters.spend.StepCosts: prefix reuse; None: as
    `costs`, whatever ran before);
    retrieved[q][m]: the texts of member m's passages that a retriever found in a corpus (not PK's or @CP's
    documents), for the relevance of what was retrieved (voters.relevance);
    candidates[q]: the judge's candidates of question q and their features (voters.judge_features.JudgeFeatures).
    """

    def __init__(
        self,
        answers: Answers,
        passages: Passages | None = None,
        questions: Sequence[str] | None = None,
        *,
        golds: Golds | None = None,
        confidence: Confidence | None = None,
        costs: np.ndarray | None = None,
        cost_unit: str = "seconds",
        retrieved: Passages | None = None,
        step_costs: StepCosts | None = None,
        candidates: Sequence[JudgeFeatures] | None = None,
    ) -> None:
        self.n_members = check_answers(answers)
        self.answers = answers
        self.passages = passages
        self.questions = questions
        self.golds = golds
        self.confidence = confidence
        self.retrieved = retrieved
        self.candidates = candidates
        for name, label in _FIELDS.items():
            values = getattr(self, name)
            if values is not None and len(values) != len(answers):
                raise InputError(f"got answers for {len(answers)} questions but {label} for {len(values)}")
        if passages is not None and any(isinstance(texts, str) for row in passages for texts in row):
            raise InputError("passages[q][m] is the list of member m's passage texts, not one string")
        self.costs = None if costs is None else _cost_matrix(costs, (len(answers), self.n_members))
        self.cost_unit = cost_unit
        self._step_costs = step_costs
        #: the batch this one was taken from (itself when it was not), and this batch's questions among its
        self.whole = self
        self.rows = np.arange(len(answers))
        self._computed: KeyedMemo[tuple[Any, ...], Any] = KeyedMemo()  # shared by the batches taken from it

    def __len__(self) -> int:
        return len(self.answers)

    # -- other batches ---------------------------------------------------------------------------------

    def take(self, rows: Sequence[int] | np.ndarray) -> VoteBatch:
        """The batch of the questions at `rows` (in that order), sharing what the whole batch computes."""
        index = np.asarray(rows, dtype=int).reshape(-1)
        if index.size and (index.min() < 0 or index.max() >= len(self)):
            raise InputError(f"question positions must lie in 0..{len(self) - 1}")
        view = copy.copy(self)
        view.rows = self.rows[index]
        view.answers = [self.answers[i] for i in index]
        for name in _FIELDS:
            values = getattr(self, name)
            setattr(view, name, None if values is None else [values[i] for i in index])
        view.costs = None if self.costs is None else self.costs[index]
        return view

    def with_golds(self, golds: Golds | None) -> VoteBatch:
        """This batch with `golds` as its gold answers (None: this batch): what `fit(X, y)` and `score(X, y)`
        read. A new whole batch, which computes what it needs anew."""
        if golds is None:
            return self
        return VoteBatch(
            self.answers,
            self.passages,
            self.questions,
            golds=golds,
            confidence=self.confidence,
            costs=self.costs,
            cost_unit=self.cost_unit,
            retrieved=self.retrieved,
            step_costs=self.step_costs,
            candidates=self.candidates,
        )

    def with_costs(self, costs: np.ndarray, unit: str = "seconds", step_costs: StepCosts | None = None) -> VoteBatch:
        """This whole batch with each member's cost per question (Q, M) and, where the member run before changes
        it, `step_costs` (voters.spend), sharing what it computed (no cost changes any of it); batches taken from
        the result carry their rows' costs."""
        if self.whole is not self:
            raise InputError("costs are given to a whole batch, before questions are taken from it")
        batch = copy.copy(self)
        batch.costs = _cost_matrix(costs, (len(self), self.n_members))
        batch.cost_unit = unit
        batch._step_costs = step_costs
        batch.whole = batch
        return batch

    @property
    def step_costs(self) -> StepCosts | None:
        """Each member's cost on this batch's questions run right after another (voters.spend): those given,
        else `costs` whatever ran before; None without costs."""
        whole = self.whole
        if whole._step_costs is not None:
            return whole._step_costs if whole is self else TakenCosts(whole._step_costs, self.rows)
        return None if self.costs is None else FixedCosts(self.costs)

    # -- what voters compute, once per whole batch -------------------------------------------------------

    def similarity(
        self, metrics: Sequence[str], metric_params: Mapping[str, Any] | None = None, cache_dir: Any = None
    ) -> np.ndarray:
        """sim_k(y_m, y_n) of the answers under `metrics` (voters.similarity), shape (Q, M, M, K); `cache_dir`:
        the pair scores' disk cache (which changes no score)."""
        answers = self.whole.answers
        key = ("similarity", tuple(metrics), _frozen(metric_params))
        tensor = self._shared(
            key, lambda: similarity_tensor(answers, list(metrics), cache=cache_dir, metric_params=metric_params)
        )
        return tensor[self.rows]

    def correctness(self, metric: str) -> np.ndarray:
        """Each answer's correctness against the gold answers (eor.core.correctness's `metric`), shape (Q, M)."""
        answers, golds = self.whole.answers, self.whole.golds
        if golds is None:
            raise InputError("this batch has no gold answers: give them (y, or golds=...)")
        return self._shared(("correctness", metric), lambda: correctness_matrix(answers, golds, metric))[self.rows]

    def option_correctness(self, chooses: str, metric: str) -> np.ndarray:
        """Each option's correctness against the gold answers: the members' answers' (`correctness`, shape
        (Q, M)) or, for `chooses` "candidates", the judge's candidates', shape (Q, the most candidates of a
        question), 0 past a question's last candidate."""
        if chooses == "members":
            return self.correctness(metric)
        if chooses != "candidates":
            raise InputError(f"a voter chooses among one of {', '.join(OPTIONS)}, not {chooses!r}")
        whole = self.whole
        if whole.candidates is None:
            raise InputError("this voter chooses among the judge's candidates: give them (candidates=...)")
        if whole.golds is None:
            raise InputError("this batch has no gold answers: give them (y, or golds=...)")
        texts, golds = [list(found.texts) for found in whole.candidates], whole.golds
        width = max((len(row) for row in texts), default=0)

        def compute() -> np.ndarray:
            matrix = np.zeros((len(texts), width))
            for q, scores in enumerate(correctness_rows(texts, golds, metric)):
                matrix[q, : len(scores)] = scores
            return matrix

        return self._shared(("option_correctness", metric), compute)[self.rows]

    def grounding(self) -> np.ndarray:
        """g_m per question and member (voters.grounding), shape (Q, M)."""
        answers, passages = self.whole.answers, self.whole.passages
        if passages is None:
            raise InputError("this voter uses grounding: give each member's passages (passages=...)")
        return self._shared(("grounding",), lambda: grounding_features(answers, passages))[self.rows]

    def relevance(self) -> list[Relevance] | None:
        """Per question, the relevance of the retrieved passages to it (voters.relevance); None without them."""
        whole = self.whole
        if whole.retrieved is None or whole.questions is None:
            return None
        questions, retrieved = whole.questions, whole.retrieved
        found = self._shared(("relevance",), lambda: Relevance.of(questions, retrieved))
        return [found[i] for i in self.rows]

    def blocks(
        self,
        metrics: Sequence[str],
        metric_params: Mapping[str, Any] | None = None,
        cache_dir: Any = None,
        *,
        confidence: bool = True,
    ) -> tuple[CandidateBlocks, np.ndarray]:
        """The candidate blocks (voters.features) of the WHOLE batch this one was taken from, with the
        reader's confidence where it is known and `confidence` asks for it, and this batch's rows among the
        whole's questions: the features of any member subset are computed over the whole batch and taken at
        the rows, so a view's features are the whole batch's, bit for bit."""
        whole = self.whole
        passages, questions = whole.passages, whole.questions
        if passages is None or questions is None:
            raise InputError("this voter needs each member's passages and the question texts")
        key = ("blocks", tuple(metrics), _frozen(metric_params))
        blocks = self._shared(
            key,
            lambda: candidate_blocks(
                whole.similarity(metrics, metric_params, cache_dir),
                whole.answers,
                passages,
                questions,
                metrics,
                whole.confidence,
            ),
        )
        return (blocks if confidence else replace(blocks, confidence=None)), self.rows

    def _shared(self, key: tuple[Any, ...], compute: Callable[[], T]) -> T:
        """What `compute` gives for the whole batch, computed at the first call for `key` and kept."""
        found = self._computed.get(key)
        return self._computed.keep(key, compute()) if found is None else found


def _frozen(params: Mapping[str, Any] | None) -> str:
    """Metric parameters as a key (two equal dicts give the same key)."""
    return json.dumps(params, sort_keys=True, default=str)


def _cost_matrix(costs: Any, shape: tuple[int, int]) -> np.ndarray:
    matrix = np.asarray(costs, dtype=float)
    if matrix.shape != shape:
        raise InputError(f"costs must have one value per question and member {shape}, got {matrix.shape}")
    return matrix
