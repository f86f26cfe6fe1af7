"""Numbers as eor prints them, one precision everywhere (reports, `eor bench`, `eor compare`, `eor train`):
a fraction as a percentage with one decimal ("48.0"), a ratio such as MRLR with three significant digits
("0.0362"), and "–" for a value that is undefined."""

from __future__ import annotations

DASH = "–"


def pct(value: float | None, digits: int = 1) -> str:
    """A fraction as a percentage ("48.0"); "–" when undefined."""
    return DASH if value is None else f"{100 * value:.{digits}f}"


def ratio(value: float | None) -> str:
    """A ratio such as MRLR with three significant digits ("0.0362"); "–" when undefined."""
    return DASH if value is None else f"{value:.3g}"
