"""`VoterEstimator`: scikit-learn's `BaseEstimator` with eor's errors, the base of every voter kind.

scikit-learn gives the estimator contract (`get_params`/`set_params` from `__init__`'s signature, `clone`,
`repr`, and the validation of `_parameter_constraints`); this base only turns its complaints into
`ConfigError`, so a bad hyper-parameter reads like every other configuration mistake. A voter's `__init__`
stores its arguments unchanged and nothing else; whatever it learns or caches is a fitted attribute (a name
ending in `_`) set by `fit` or by loading a weights file.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import InvalidParameterError  # private, but what BaseEstimator validates with

from eor.errors import ConfigError


class VoterEstimator(BaseEstimator):
    """A scikit-learn estimator whose hyper-parameter errors are `ConfigError`s."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}

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
