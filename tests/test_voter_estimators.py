"""Every voter kind in the registry is a scikit-learn estimator: scikit-learn's own checks that `__init__`
only stores its parameters and that `get_params` is consistent, and `clone` of a fitted voter (loaded from
the weights files the repository ships) carries no fitted or cached attribute."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import check_get_params_invariance, check_no_attributes_set_in_init

from tests.conftest import ROOT
from voters import load_voter
from voters.loading import VOTER_KINDS, register_voter_kind
from voters.protocol import SimpleVoter

WEIGHTS = ROOT / "docs" / "weights"
SHIPPED = {"paper": "nq-offline.json", "selector": "nq-offline-auto.json", "cascade": "nq-offline-cascade.json"}


class LongestVoter(SimpleVoter):
    """A `SimpleVoter`-based kind: the longest answer wins, by learned per-member bonuses."""

    kind = "longest"

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


def _fitted(kind: str, cls: type, tmp_path) -> object:
    if kind in SHIPPED:
        return load_voter(WEIGHTS / SHIPPED[kind])
    path = cls(["A", "B"], metrics=["em"]).set_state({"bonus": {"A": 0.5, "B": 0.0}}).save(tmp_path / "v.json")
    return load_voter(path)


def test_the_registry_holds_the_four_kinds(kinds):
    assert {"paper", "selector", "cascade", "longest"} <= set(kinds)


@pytest.mark.parametrize("kind", ["paper", "selector", "cascade", "longest"])
def test_scikit_learn_estimator_checks(kinds, kind):
    cls = kinds[kind]
    check_no_attributes_set_in_init(cls.__name__, cls())
    check_get_params_invariance(cls.__name__, cls())


@pytest.mark.parametrize("kind", ["paper", "selector", "cascade", "longest"])
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
