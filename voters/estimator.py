"""`VoterEstimator`: scikit-learn's `BaseEstimator` with eor's errors, the base of every voter kind.

scikit-learn gives the estimator contract (`get_params`/`set_params` from `__init__`'s signature, `clone`,
`repr`, the validation of `_parameter_constraints`, and `check_is_fitted`); this base turns its complaints
into eor's errors, so a bad hyper-parameter reads like every other configuration mistake. A voter's
`__init__` stores its arguments unchanged and nothing else; whatever it learns or caches is a fitted
attribute (a name ending in `_`) set by `fit` or by loading a weights file.

Every kind has one signature: `fit(X, y=None)`, `predict(X)` (the chosen option's position per question: a
member's answer, or for the judge voter one of the judge's candidates, `chooses`), `decision_function(X)` (the
scores it chooses by) and `score(X, y=None)` (this base's: the mean correctness of the chosen options), where X is
a `voters.batch.VoteBatch` and y the gold answers per question (None: the batch's own).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Self

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError as SklearnNotFittedError
from sklearn.utils._param_validation import InvalidParameterError  # private, but what BaseEstimator validates with
from sklearn.utils.validation import check_is_fitted

from eor.core.errors import ConfigError, NotFittedError
from voters.batch import Golds, VoteBatch
from voters.scoring import mean_correctness


class VoterEstimator(BaseEstimator):
    """A scikit-learn estimator whose hyper-parameter errors are `ConfigError`s and whose use before fitting
    is a `NotFittedError`; a subclass has a `correctness` hyper-parameter (what `score` measures)."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}
    correctness: str

    # What the pipeline reads of every voter (voters.protocol.FittedVoter), declared here with their defaults,
    # never looked for: a kind that differs says so (a cascade runs in steps, the paper's voter admits a bound).
    in_steps: ClassVar[bool] = False  # answers a question step by step in its own order (voters.cascade)
    # what it chooses among (voters.batch.OPTIONS): the members' answers, or the judge's candidates (the judge voter)
    chooses: ClassVar[str] = "members"
    metadata_: Mapping[str, Any] = MappingProxyType({})  # its weights file's `meta` (set by fit or loading)
    source_: str | None = None  # the weights file it was loaded from
    sha256_: str | None = None  # the digest of the bytes it was loaded from
    train_score_: float | None = None  # its score on the training records, where training measured one
    dev_score_: float | None = None  # and on development records, where `eor train --dev` measured one
    # its P(right) (voters.right.RightModel, of its weights file's `meta.probability`), built once where it is loaded
    right_: Any = None
    # the judge voter a cascade trained with the judge as its last step answers its end with (voters.judge_step),
    # attached where it is loaded beside that judge (voters.loading.load_voter); None for every other voter
    judge_: Any = None

    @property
    def admits_bound(self) -> bool:
        """Whether lazy voting can bound the members still pending (voters.lazy)."""
        return False

    @property
    def uses_confidence_(self) -> bool:
        """Whether its scores read the reader's confidence."""
        return False

    @property
    def active_members_(self) -> list[int] | None:
        """Positions of the members that can matter (None: all of them)."""
        return None

    def set_params(self, **params: Any) -> Self:
        """Set hyper-parameters (unknown names raise ConfigError); learned values are kept until refit."""
        valid = self._get_param_names()
        unknown = sorted(set(params) - set(valid))
        if unknown:
            raise ConfigError(
                f"{type(self).__name__} has no parameter(s) {', '.join(unknown)}; valid: {', '.join(valid)}"
            )
        return super().set_params(**params)

    def _check_params(self) -> None:
        """Validate the hyper-parameters against `_parameter_constraints`; subclasses add the checks that
        depend on registries or on several parameters at once."""
        try:
            self._validate_params()
        except InvalidParameterError as exc:
            raise ConfigError(str(exc)) from None

    def _check_fitted(self) -> None:
        """NotFittedError unless the voter holds what it learned: scikit-learn's `check_is_fitted`, which
        looks for a fitted attribute (a name ending in `_`), as `fit` and a weights file set them."""
        try:
            check_is_fitted(self)
        except SklearnNotFittedError:
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted: call fit(X, y) first, or load a weights file "
                "(voters.load_voter)"
            ) from None

    def predict(self, X: VoteBatch) -> np.ndarray:
        """The chosen option's position per question (a member's, unless the kind `chooses` otherwise), shape (Q,)."""
        raise NotImplementedError

    def score(self, X: VoteBatch, y: Golds | None = None) -> float:
        """Mean correctness (the `correctness` metric) of the options it chooses on X against the gold answers
        `y` (None: X's own): higher is better."""
        X = X.with_golds(y)
        return mean_correctness(X.option_correctness(self.chooses, self.correctness), self.predict(X))
