"""Every voter kind in the registry (`voters.loading.VOTER_KINDS`: the paper's `Voter`, the `AnswerSelector`,
the `Cascade`, the judge voter, and here a `SimpleVoter`-based kind) is a scikit-learn estimator with one API:
`fit(X, y=None)`, `predict(X)`, `decision_function(X)` and `score(X, y=None)`, X a batch of recorded answers
(voters.batch.VoteBatch) and y the gold answers per question. For every kind this runs:

- scikit-learn's checks of the estimator contract, which read hyper-parameters and no data:
  check_no_attributes_set_in_init, check_get_params_invariance, check_set_params,
  check_parameters_default_constructible, check_do_not_raise_errors_in_init_or_set_params,
  check_estimator_cloneable, check_estimator_repr, check_estimator_tags_renamed, check_valid_tag_types and
  check_mixin_order (`SKLEARN_CHECKS`);
- what scikit-learn's data checks check, on a batch of recorded answers: fit returns the estimator
  (check_estimators_fit_returns_self), fit takes y second and score takes it too (check_fit_score_takes_y),
  an unfitted voter raises NotFittedError and `check_is_fitted` passes once it is fitted
  (check_estimators_unfitted, check_fit_check_is_fitted), fit changes no hyper-parameter
  (check_estimators_overwrite_params) and adds only fitted attributes, names ending in `_`
  (check_dont_overwrite_parameters), fitting again gives the same choices (check_fit_idempotent), a pickled
  voter chooses the same (check_estimators_pickle), and `score` is the mean correctness of `predict`'s choices;
- `clone` of a fitted voter (loaded from the weights files the repository ships) carries no fitted or cached
  attribute.

The other checks of `sklearn.utils.estimator_checks` do not apply: they feed numeric arrays (dtypes, NaN and
inf, sparse input, 1-D and 2-D shapes, `n_features_in_`, sample weights, the array API, pandas and polars
output, read-only memmaps, invariance to the order or a subset of samples), where a voter reads a batch of
answer strings with their passages and questions; or they check classifiers, regressors, transformers,
clusterers or outlier detectors, which a voter is not (it chooses one member per question). And
check_param_validation expects scikit-learn's InvalidParameterError, where a voter raises eor's ConfigError
(tests/test_voter.py checks those).
"""

from __future__ import annotations

import inspect
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils import estimator_checks
from sklearn.utils.validation import check_is_fitted

from eor.core.errors import NotFittedError
from tests.conftest import ROOT
from voters import VoteBatch, load_voter
from voters.candidates import candidates
from voters.judge_features import Evidence, judge_features
from voters.judge_selector import JudgeSelector
from voters.loading import VOTER_KINDS, register_voter_kind
from voters.protocol import SimpleVoter
from voters.scoring import mean_correctness

WEIGHTS = ROOT / "docs" / "weights"
SHIPPED = {
    "paper": "nq-offline.json",
    "selector": "nq-offline-auto.json",
    "cascade": "nq-offline-cascade.json",
    "judge": "nq-offline-judge.json",
}
KINDS = ["paper", "selector", "cascade", "judge", "longest"]
NAMES = ["A", "B", "C"]
#: hyper-parameters that keep the fits small (no model metric, few starts and folds)
PARAMS = {
    "paper": {"metrics": ("em", "f1"), "restarts": 1, "max_evals": 40},
    "selector": {"metrics": ("em", "f1")},
    "cascade": {"metrics": ("em", "f1"), "folds": 2},
    "judge": {"fits": [JudgeSelector(("votes", "evidence"), 3)]},  # the text alone: the batch has no scores
    "longest": {"members": NAMES},
}
SKLEARN_CHECKS = [
    "check_no_attributes_set_in_init",
    "check_get_params_invariance",
    "check_set_params",
    "check_parameters_default_constructible",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_estimator_cloneable",
    "check_estimator_repr",
    "check_estimator_tags_renamed",
    "check_valid_tag_types",
    "check_mixin_order",
]


class LongestVoter(SimpleVoter):
    """A `SimpleVoter`-based kind: the longest answer wins, plus a learned bonus per member (its accuracy)."""

    kind = "longest"

    def fit(self, X, y=None):
        accuracy = X.with_golds(y).correctness(self.correctness).mean(axis=0)
        self.bonus_ = {name: float(value) for name, value in zip(self.members_, accuracy, strict=True)}
        return self

    def decision_scores(self, answers, passages=None, questions=None, members=None):
        positions = range(self.n_members_) if members is None else members
        bonus = [self.bonus_.get(self.members_[m], 0.0) for m in positions]
        return np.asarray([[len(a) + bonus[i] for i, a in enumerate(row)] for row in answers], dtype=float)

    def state(self):
        return {"bonus": self.bonus_}

    def set_state(self, state):
        self.bonus_ = dict(state["bonus"])
        return self


@pytest.fixture
def kinds():
    with VOTER_KINDS.scoped():
        register_voter_kind(LongestVoter)
        yield dict(VOTER_KINDS.items())


def recorded_batch(n_questions: int = 40, seed: int = 0) -> tuple[VoteBatch, list[list[str]]]:
    """A batch of three members' answers with passages, questions and costs, and its gold answers: member C is
    right when its answer is in its passage, A and B often agree on a decoy."""
    rng = np.random.default_rng(seed)
    answers, golds, passages = [], [], []
    for q in range(n_questions):
        gold, decoy = f"gold{q}", f"decoy{q}"
        right = rng.uniform() < 0.6
        answers.append([decoy if rng.uniform() < 0.7 else gold, decoy, gold if right else f"wrong{q}"])
        golds.append([gold])
        passages.append([["decoy text"], [], [f"the answer is {gold}" if right else "nothing"]])
    costs = np.tile([1.0, 2.0, 4.0], (n_questions, 1)) + rng.uniform(0, 0.1, (n_questions, 3))
    questions = [f"question {q}?" for q in range(n_questions)]
    found = []  # the judge's candidates: the members' answers and entity spans of their passages, no scores
    for question, row, read in zip(questions, answers, passages, strict=True):
        evidence = Evidence(question, dict(zip(NAMES, row, strict=True)), dict(zip(NAMES, read, strict=True)))
        made = candidates(question, evidence.answers, [t for texts in read for t in texts], rule="entities", k=3)
        rows = [{"text": c.text, "members": list(c.members), "scores": {}} for c in made]
        found.append(judge_features(rows, NAMES, evidence))
    return VoteBatch(answers, passages, questions, costs=costs, candidates=found), golds


def unfitted(kinds, kind: str):
    return kinds[kind](**PARAMS[kind], **({} if kind == "longest" else {"members": NAMES}))


@pytest.fixture(scope="module")
def batch():
    return recorded_batch()


def test_the_registry_holds_the_five_kinds(kinds):
    assert set(KINDS) <= set(kinds)


@pytest.mark.parametrize("check", SKLEARN_CHECKS)
@pytest.mark.parametrize("kind", KINDS)
def test_scikit_learns_estimator_checks(kinds, kind, check):
    cls = kinds[kind]
    getattr(estimator_checks, check)(cls.__name__, cls())


@pytest.mark.parametrize("kind", KINDS)
def test_fit_predict_and_score_on_a_batch(kinds, kind, batch):
    X, y = batch
    voter = unfitted(kinds, kind)
    params = voter.get_params(deep=True)
    before = set(vars(voter))
    with pytest.raises(NotFittedError, match="not fitted"):
        voter.predict(X)
    with pytest.raises(SklearnNotFittedError):
        check_is_fitted(voter)
    assert voter.fit(X, y) is voter
    check_is_fitted(voter)
    assert voter.get_params(deep=True) == params  # fit changes no hyper-parameter
    added = set(vars(voter)) - before
    assert added and all(name.endswith("_") and not name.startswith("_") for name in added), sorted(added)
    chosen = voter.predict(X)
    right = X.with_golds(y).option_correctness(voter.chooses, voter.correctness)  # the members' answers' or
    assert right.shape[1] == (len(NAMES) if voter.chooses == "members" else max(len(c.texts) for c in X.candidates))
    assert chosen.shape == (len(X),) and voter.decision_function(X).shape == right.shape
    assert voter.score(X, y) == mean_correctness(right, chosen)
    assert voter.score(X.with_golds(y)) == voter.score(X, y)
    refitted = unfitted(kinds, kind).fit(X.with_golds(y))
    np.testing.assert_array_equal(refitted.predict(X), chosen)  # fitting again: the same choices
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(voter)).predict(X), chosen)
    held = X.take(np.arange(10, 20))
    np.testing.assert_array_equal(voter.predict(held), voter.predict(X)[10:20])  # a view chooses as the whole


@pytest.mark.parametrize("kind", KINDS)
def test_fit_and_score_take_y_second(kinds, kind):
    cls = kinds[kind]
    for method in (cls.fit, cls.score):
        assert list(inspect.signature(method).parameters)[1:3] == ["X", "y"], method


def _fitted(kind: str, cls: type, tmp_path) -> object:
    if kind in SHIPPED:
        return load_voter(WEIGHTS / SHIPPED[kind])
    path = cls(["A", "B"], metrics=["em"]).set_state({"bonus": {"A": 0.5, "B": 0.0}}).save(tmp_path / "v.json")
    return load_voter(path)


@pytest.mark.parametrize("kind", KINDS)
def test_a_clone_of_a_fitted_voter_is_unfitted(kinds, kind, tmp_path):
    fitted = _fitted(kind, kinds[kind], tmp_path)
    assert type(fitted) is kinds[kind]
    learned = [name for name in vars(fitted) if name.endswith("_")]
    assert learned, "the loaded voter holds what it learned"
    copy = clone(fitted)
    assert type(copy) is type(fitted) and copy.get_params().keys() == fitted.get_params().keys()
    leftover = [name for name in vars(copy) if name.endswith("_") or name.startswith("_")]
    assert leftover == [], f"a clone carries {leftover}"
    assert set(vars(copy)) == set(copy.get_params())  # nothing but the hyper-parameters
