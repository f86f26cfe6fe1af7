"""`eor bench`'s report section of a voter's P(right): its figures (eor.evaluation.selective) and, for each error
rate of the weights file's thresholds, the coverage and realised error among the answered questions."""

from __future__ import annotations

from typing import Any

import numpy as np

from eor.evaluation.selective import at_threshold, calibration_noise, risk_coverage, summary


def section(
    probability: np.ndarray | None, right: np.ndarray, metric: str, model: Any, fits: np.ndarray | None = None
) -> dict[str, Any] | None:
    """`eor bench`'s report section of a voter's P(right) (None without one): `summary`, the ECE of a perfectly
    calibrated P on these questions (`calibration_noise`), the risk–coverage curve, how many questions each of
    its fits scored (`fits`, voters.choice_evidence.FITS), and for each error rate of the weights file's thresholds the
    coverage and realised error among answered questions, each question judged by its own fit's threshold."""
    if probability is None:
        return None
    p = np.asarray(probability, dtype=float)
    y = np.asarray(right, dtype=float) >= 0.5
    coverage, risk = risk_coverage(p, y)
    names = np.full(len(p), model.fit().name) if fits is None else np.asarray(fits, dtype=str)
    used = list(dict.fromkeys(names.tolist())) or [model.fit().name]
    levels = []
    for row in model.fit().thresholds:
        at = {name: _at_alpha(model.fit(name).thresholds, row["alpha"]) for name in used}
        own = np.array([np.nan if at[n]["threshold"] is None else at[n]["threshold"] for n in names], dtype=float)
        level = {"alpha": row["alpha"], **at_threshold(p, y, own)}
        level["threshold"], level["train_coverage"] = _by_fit(at, "threshold"), _by_fit(at, "coverage")
        levels.append(level)
    return {
        "metric": metric,
        "calibrated_on": model.correctness,
        "fits": {name: int((names == name).sum()) for name in used},
        **summary(p, y),
        "ece_noise": calibration_noise(p),
        "risk_coverage": {"coverage": coverage, "risk": risk},
        "risk_levels": levels,
    }


def _by_fit(at: dict[str, dict[str, Any]], key: str) -> Any:
    """One fit's value of `key`, or each fit's by name when several judged these questions."""
    return next(iter(at.values()))[key] if len(at) == 1 else {name: row[key] for name, row in at.items()}


def _at_alpha(thresholds: list[dict[str, Any]], alpha: float) -> dict[str, Any]:
    """A fit's threshold row at `alpha` (every fit is given the same grid of error rates)."""
    return next(row for row in thresholds if row["alpha"] == alpha)
