"""Training the judge voter (voters.judge_selector) on recorded questions, every choice by cross-validation on
the training records alone.

Steps, each a function: `judged_questions` (records → each question's candidate features and which candidates are
right) → `choices_out_of_fold` (a setting's choices, each from a fit that did not see its question) →
`choose_setting` (the setting with the highest out-of-fold accuracy among a small grid: the span count K and whether
the answer-type family is used; ties to the first, the simpler) → `train_fit` (that setting fitted on every training
question, P(right) calibrated on its out-of-fold choices, abstention thresholds chosen on them) →
`train_judge_voter` (one fit per likelihood level a question may have: the reader's scores under the members'
prompts and the passages alone, under the members' prompts only, none).

The grid is kept small on purpose: a search over many choices on a few hundred questions overfits, so each fit
chooses among `GRID_SPANS` × {with, without the type family} (6 settings) at C = 1; `benchmarks/judge_cv.py`
estimates the whole procedure by nested cross-validation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eor.core.answers import matches_gold
from eor.core.config import JudgeConfig
from eor.core.errors import InputError
from eor.core.formatting import fixed
from eor.learning.beyond_corpus import ABLATED, ANSWERABLE, mix_thresholds, taught_kinds
from eor.pipeline.abstention import ALPHAS, DELTA, thresholds
from voters.candidates import candidates
from voters.folds import cross_fit, fold_labels
from voters.folds import folds as fold_parts
from voters.judge_features import SCORED_FAMILIES, Evidence, JudgeFeatures, judge_features, relevance_of
from voters.judge_selector import Choice, JudgeSelector, JudgeVoter

JUDGE = "judge"  # `eor train --voter judge`
#: the likelihood levels a judge voter carries a fit for, richest first, with the families each fit reads
LEVELS: dict[str, tuple[str, ...]] = {
    "scores+passages": ("votes", "evidence", "scores", "passages"),
    "scores": ("votes", "evidence", "scores"),
    "text": ("votes", "evidence"),
}
GRID_SPANS = (0, 5, 10)
TYPE_FAMILY = "type"
#: a level's fit is trained only from this many questions holding its scores up (10 per fold of 5)
MIN_QUESTIONS = 50

Progress = Callable[[str], None]


@dataclass(frozen=True)
class JudgedQuestion:
    """A training question's candidate features and, per candidate, whether it is right (exact match)."""

    id: str
    features: JudgeFeatures
    right: np.ndarray


@dataclass(frozen=True)
class Setting:
    """One point of the grid: the feature families and the number of competing spans; `retrieval`, `null`:
    whether P(right) reads the retrieved passages' relevance and the null candidate's likelihood (the same for
    every point of a grid)."""

    families: tuple[str, ...]
    spans: int
    retrieval: bool = False
    null: bool = False

    def build(self) -> JudgeSelector:
        return JudgeSelector(self.families, self.spans, retrieval=self.retrieval, null=self.null)


def judged_questions(
    records: Iterable[Any],
    members: Sequence[str],
    rule: str | None = "entities",
    k: int = 10,
    relevance: bool = False,
) -> list[JudgedQuestion]:
    """Each record with gold answers as a judged question: its `judge` candidates and scores where it has them,
    else its candidates made from its text (`rule`, `k`; voters.candidates) with no scores; `relevance`: with
    the retrieved passages' relevance to the question (voters.judge_features.relevance_of, one encoder call)."""
    labelled = [record for record in records if record.answers]
    if not labelled:
        raise InputError("no record has gold answers to train the judge voter on")
    outputs = [{member: r.members[member] for member in members if member in r.members} for r in labelled]
    found = relevance_of([r.question for r in labelled], outputs) if relevance else [None] * len(labelled)
    out = []
    for record, given, related in zip(labelled, outputs, found, strict=True):
        evidence = Evidence.from_outputs(record.question, given, related)
        if record.judge is not None:
            made = list(record.judge.get("candidates") or [])
        else:
            read = list(dict.fromkeys(text for texts in evidence.passages.values() for text in texts))
            spans = candidates(record.question, dict(evidence.answers), read, rule=rule, k=k)
            made = [{"text": c.text, "members": list(c.members), "rule": c.rule, "scores": {}} for c in spans]
        features = judge_features(made, members, evidence, None if record.judge is None else record.judge.get("null"))
        right = np.array([matches_gold(text, record.answers) for text in features.texts], bool)
        out.append(JudgedQuestion(record.id, features, right))
    return out


def candidate_rule(voter: JudgeVoter, records: Sequence[Any], source: Any) -> tuple[str | None, int]:
    """The span rule (None: the members' answers alone) and K the voter's training made its candidates with
    (its `meta.candidates`, else JudgeConfig's defaults); InputError when the scored `records` (of `source`)
    hold candidates made otherwise."""
    defaults = JudgeConfig()
    made = voter.metadata_.get("candidates") or {"rule": defaults.rule, "k": defaults.k}
    expected = (made.get("rule"), int(made.get("k", defaults.k)))
    found = {(r.judge["identity"].get("rule"), r.judge["identity"].get("k")) for r in records if r.judge}
    if found and found != {expected}:
        raise InputError(
            f"{source}: candidates made with (rule, k) {sorted(found, key=str)}; the voter's are {expected}"
        )
    return expected


def without_scores(question: JudgedQuestion, keep: Iterable[str] = ()) -> JudgedQuestion:
    """The question as a voter sees it when the reader scored only the likelihood families `keep`."""
    features = question.features
    scored = features.scored & frozenset(keep)
    return JudgedQuestion(
        question.id, JudgeFeatures(features.texts, features.matrix, features.names, scored), question.right
    )


def settings_grid(level: str, retrieval: bool = False, null: bool = False) -> list[Setting]:
    """The settings a fit of `level` chooses among (simplest first), P(right) reading the retrieval family and
    the null candidate or not."""
    base = LEVELS[level]
    return [Setting(f, spans, retrieval, null) for f in (base, (*base, TYPE_FAMILY)) for spans in GRID_SPANS]


def choices_out_of_fold(
    questions: Sequence[JudgedQuestion], setting: Setting, parts: Sequence[np.ndarray]
) -> list[Choice | None]:
    """Each question's choice by `setting` fitted on the other parts (`parts`: disjoint held-out positions)."""
    choices: list[Choice | None] = [None] * len(questions)

    def chosen(fit: JudgeSelector, held: np.ndarray) -> None:
        for i in held:
            choices[i] = fit.choose(questions[i].features)

    cross_fit(parts, np.arange(len(questions)), lambda train: fitted_on(setting, questions, train), chosen)
    return choices


def fitted_on(setting: Setting, questions: Sequence[JudgedQuestion], train: np.ndarray) -> JudgeSelector:
    """`setting` fitted on the questions at the positions `train`."""
    return setting.build().fit([questions[i].features for i in train], [questions[i].right for i in train])


def accuracy(questions: Sequence[JudgedQuestion], choices: Sequence[Choice | None]) -> np.ndarray:
    """Per question, 1.0 when its choice is right."""
    return np.array([c is not None and bool(q.right[c.index]) for q, c in zip(questions, choices, strict=True)], float)


@dataclass
class FitReport:
    """How a level's fit was chosen: every setting's out-of-fold accuracy, the chosen one, its choices, and its
    out-of-fold P(right) and rightness on every row it was cross-fitted on: the training questions, then, beyond
    the corpus, the unanswerable ones, each row's kind in `kind` (eor.learning.beyond_corpus.KINDS)."""

    level: str
    table: dict[str, float]
    chosen: str
    choices: list[Choice | None] = field(repr=False)
    probability: np.ndarray = field(repr=False)
    right: np.ndarray = field(repr=False)
    kind: np.ndarray = field(repr=False, default_factory=lambda: np.zeros(0, dtype=object))


def choose_setting(
    questions: Sequence[JudgedQuestion], grid: Sequence[Setting], k: int, seed: int
) -> tuple[Setting, dict[str, float], list[Choice | None]]:
    """The grid's setting with the highest out-of-fold accuracy over a seeded k-fold split (ties: the first),
    every setting's accuracy by its label, and the chosen setting's out-of-fold choices."""
    parts = fold_parts(len(questions), k, seed)
    table: dict[str, float] = {}
    best: tuple[float, Setting, list[Choice | None]] | None = None
    for setting in grid:
        choices = choices_out_of_fold(questions, setting, parts)
        score = float(accuracy(questions, choices).mean())
        table[setting.build().label] = score
        if best is None or score > best[0]:
            best = (score, setting, choices)
    assert best is not None  # the grid is never empty
    return best[1], table, best[2]


def train_fit(
    questions: Sequence[JudgedQuestion],
    level: str,
    k: int = 5,
    seed: int = 0,
    beyond: Unanswerable | None = None,
    retrieval: bool = False,
    null: bool = False,
) -> tuple[JudgeSelector, FitReport]:
    """The fit of `level` (LEVELS): its setting chosen by `choose_setting`, fitted on every question, P(right)
    calibrated on the chosen setting's out-of-fold choices, and the abstention thresholds chosen on the
    out-of-fold probabilities cross-fitted on the same folds. With `beyond` (questions whose answer the corpus
    does not hold) the voter is the same, and P(right), its thresholds and P(unanswerable) are `fit_beyond`'s.
    `retrieval`, `null`: P(right) (and P(unanswerable)) also read the retrieved passages' relevance and the null
    candidate's likelihood (where the level reads the members' scores); every question must hold what they read
    (`judged_questions(..., relevance=True)`; records scored with `judge.null_candidate`)."""
    seen = [without_scores(q, LEVELS[level]) for q in questions]
    null = null and "scores" in LEVELS[level]
    for column, wanted in (("retr:cosine", retrieval), ("null:mix", null)):
        if wanted and any(np.isnan(q.features.matrix[:, q.features.names.index(column)]).any() for q in seen):
            raise InputError(
                f"P(right) of the {level} fit reads {column}, which some training questions lack (the retrieved "
                "passages' relevance: judged_questions(..., relevance=True); the null candidate: records scored "
                "with judge.null_candidate)"
            )
    setting, table, choices = choose_setting(seen, settings_grid(level, retrieval, null), k, seed)
    fit = setting.build().fit([q.features for q in seen], [q.right for q in seen])
    right = accuracy(seen, choices).astype(bool)
    parts = fold_parts(len(seen), k, seed)
    fit.delta_ = DELTA
    if beyond is not None and beyond.questions:
        probability, every, kind = fit_beyond(fit, seen, setting, parts, choices, beyond.seen(level), k, seed)
        return fit, FitReport(level, table, fit.label, choices, probability, every, kind)
    made = [(c, r) for c, r in zip(choices, right, strict=True) if c is not None]
    fit.calibrate([c for c, _ in made], [r for _, r in made])
    probability = cross_fitted(choices, right, parts)
    # a question without a choice is never answered: its P(right) is NaN, below every threshold
    fit.thresholds_ = [t.to_dict() for t in thresholds(probability, right, delta=DELTA)]
    kind = np.full(len(seen), ANSWERABLE, dtype=object)
    return fit, FitReport(level, table, fit.label, choices, probability, right, kind)


@dataclass(frozen=True)
class Unanswerable:
    """Training questions whose answer the corpus does not hold, for a judge voter's P(right) beyond the corpus
    (eor.learning.beyond_corpus): each judged, its kind (ABLATED, NOCORPUS), the question an ablated copy was made
    from (its own id otherwise), and the unanswerable share the thresholds hold for."""

    questions: list[JudgedQuestion]
    kind: np.ndarray
    origin: list[str]
    share: float

    def seen(self, level: str) -> Unanswerable:
        """Those whose candidates were scored as `level` reads them, as its fit sees them."""
        keep = [i for i, q in enumerate(self.questions) if holding([q], level)]
        return Unanswerable(
            [without_scores(self.questions[i], LEVELS[level]) for i in keep],
            self.kind[keep],
            [self.origin[i] for i in keep],
            self.share,
        )


def fit_beyond(
    fit: JudgeSelector,
    seen: Sequence[JudgedQuestion],
    setting: Setting,
    parts: Sequence[np.ndarray],
    choices: Sequence[Choice | None],
    beyond: Unanswerable,
    k: int,
    seed: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`fit`'s P(right), thresholds and P(unanswerable) beyond the corpus, as eor.learning.beyond_corpus makes the
    selectors': each unanswerable question is chosen for by `setting` fitted on the answerable questions of the
    other folds (an ablated copy falls in its origin's fold, the no-corpus questions in seeded folds of their
    own); P(right) and P(unanswerable) are fitted on the kinds that teach (`taught_kinds`: the ablated copies
    where there are any) and cross-fitted on every row; the thresholds bound the error on a mix at the share,
    one test of the answerable and the no-corpus questions together (`mix_thresholds`). Gives back every row's (the
    answerable, then `beyond`'s) out-of-fold P(right), whether its choice was right, and its kind."""
    fold_of = {q.id: f for f, held in enumerate(parts) for q in (seen[i] for i in held)}
    theirs = fold_labels(len(beyond.questions), k, seed)
    for i, origin in enumerate(beyond.origin):
        if beyond.kind[i] == ABLATED and origin in fold_of:
            theirs[i] = int(fold_of[origin])
    extra: list[Choice | None] = [None] * len(beyond.questions)
    whole = [np.concatenate([held, len(seen) + np.flatnonzero(theirs == f)]) for f, held in enumerate(parts)]

    def chosen(trained: JudgeSelector, held: np.ndarray) -> None:
        for row in held[held >= len(seen)] - len(seen):
            extra[row] = trained.choose(beyond.questions[row].features)

    cross_fit(whole, np.arange(len(seen)), lambda train: fitted_on(setting, seen, train), chosen)
    every = [*choices, *extra]
    right = np.concatenate([accuracy(seen, choices), accuracy(beyond.questions, extra)]).astype(bool)
    kind = np.concatenate([np.full(len(seen), ANSWERABLE, dtype=object), beyond.kind.astype(object)])
    taught = np.isin(kind, taught_kinds(kind))
    rows = [i for i, choice in enumerate(every) if taught[i] and choice is not None]
    made = [choice for choice in (every[i] for i in rows) if choice is not None]  # the choices of `rows`
    fit.calibrate(made, right[rows])
    fit.fit_unanswerable(made, kind[rows] != ANSWERABLE, beyond.share)
    probability = cross_fitted(every, right, whole, taught)
    fit.thresholds_ = mix_thresholds(probability, right, kind, beyond.share, DELTA, ALPHAS)
    return probability, right, kind


def cross_fitted(
    choices: Sequence[Choice | None], right: np.ndarray, parts: Sequence[np.ndarray], taught: np.ndarray | None = None
) -> np.ndarray:
    """Each question's P(right) from a calibration fitted on the other parts' choices (NaN where no choice);
    `taught`: the questions a calibration may fit on (None: every one)."""
    probability = np.full(len(choices), np.nan)
    teach = [i for i, c in enumerate(choices) if c is not None and (taught is None or taught[i])]

    def calibrated(train: np.ndarray) -> JudgeSelector:
        made = [(choice, bool(right[i])) for i in train if (choice := choices[i]) is not None]
        return JudgeSelector(("votes",), 0).calibrate([c for c, _ in made], [r for _, r in made])

    def scored(scratch: JudgeSelector, held: np.ndarray) -> None:
        for i in held:
            choice = choices[i]
            if choice is not None:
                probability[i] = scratch.probability(choice.evidence)

    cross_fit(parts, np.asarray(teach, dtype=int), calibrated, scored)
    return probability


def train_judge_voter(
    questions: Sequence[JudgedQuestion],
    members: Sequence[str],
    levels: Sequence[str] = tuple(LEVELS),
    k: int = 5,
    seed: int = 0,
    progress: Progress | None = None,
    beyond: Unanswerable | None = None,
    retrieval: bool = False,
    null: bool = False,
) -> tuple[JudgeVoter, list[FitReport]]:
    """A judge voter with one fit per likelihood level (richest first), each trained on the questions that
    hold the level's scores (`holding`); a level that fewer than MIN_QUESTIONS hold is left out. `beyond`:
    questions the corpus cannot answer, for P(right) beyond the corpus (`fit_beyond`, on those that hold the
    level's scores)."""
    fits, reports = [], []
    for level in levels:
        held = holding(questions, level)
        if len(held) < MIN_QUESTIONS:
            if progress is not None:
                progress(
                    f"{level}: left out, {len(held)} training questions hold its scores (fewer than {MIN_QUESTIONS})"
                )
            continue
        if beyond is not None and not beyond.seen(level).questions:  # a fit that would see no unanswerable one
            if progress is not None:
                progress(f"{level}: left out, no question the corpus cannot answer holds its scores")
            continue
        fit, report = train_fit(held, level, k, seed, beyond, retrieval, null)
        fits.append(fit)
        reports.append(report)
        if progress is not None:
            em = 100 * report.table[report.chosen]
            progress(f"{level}: {report.chosen}, {fixed(em, 1)} EM out of fold on {len(held)} questions")
    return JudgeVoter.of_fits(fits, members), reports


def holding(questions: Sequence[JudgedQuestion], level: str) -> list[JudgedQuestion]:
    """The questions whose candidates were scored as `level` reads them (a question without candidates holds
    every level: it is answered by none)."""
    needs = frozenset(LEVELS[level]) & frozenset(SCORED_FAMILIES)
    return [q for q in questions if not q.features.texts or needs <= q.features.scored]
