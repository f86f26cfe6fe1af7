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


#: fewer questions than this and `eor train` and `eor bench` say how little the figures can tell
SMALL_DATA = 100


def small_data_warning(questions: int, doing: str) -> str | None:
    """A warning when `questions` < SMALL_DATA: the half-width of a 95% interval of an accuracy near 50%
    (1.96·√(0.25/n), in points), below which differences are noise; None otherwise."""
    if questions >= SMALL_DATA:
        return None
    half = 196 * (0.25 / max(questions, 1)) ** 0.5
    return (
        f"warning: {doing} on {questions} questions only: an accuracy near 50% is known to ±{half:.0f} points "
        f"(95% interval), so differences below that are noise; {SMALL_DATA} or more questions are advised"
    )
