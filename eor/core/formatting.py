"""Numbers as eor prints them. Every float that the commands and reports show (eor.cli, eor.commands,
eor.evaluation, eor.learning: printed lines, Markdown and HTML reports, figure labels) is formatted by a
function here, so each kind of figure has one precision everywhere: a fraction as a percentage with one decimal
("48.0"), a ratio such as MRLR with three significant digits ("0.0362"), and "–" for a value that is undefined;
the other figures with the fixed, signed or significant digits their place asks for. `tests/test_docs_claims.py`
checks that no float format spec is written by hand in those packages.
"""

from __future__ import annotations

from collections.abc import Sequence

DASH = "–"


def pct(value: float | None, digits: int = 1) -> str:
    """A fraction as a percentage ("48.0"); "–" when undefined."""
    return DASH if value is None else f"{100 * value:.{digits}f}"


def ratio(value: float | None) -> str:
    """A ratio such as MRLR with three significant digits ("0.0362"); "–" when undefined."""
    return DASH if value is None else f"{value:.3g}"


def fixed(value: float | None, digits: int) -> str:
    """`value` with `digits` decimals ("0.25", "3.1", "12"): seconds, costs, scores, thresholds; "–" when undefined
    (a report's NaN, read back from its JSON as null)."""
    return DASH if value is None else f"{value:.{digits}f}"


def signed(value: float | None, digits: int) -> str:
    """`value` with its sign and `digits` decimals ("+1.5", "-0.250"): a difference, a gain; "–" when undefined."""
    return DASH if value is None else f"{value:+.{digits}f}"


def significant(value: float | None, digits: int | None = None) -> str:
    """`value` with `digits` significant digits, as few as it needs by default (Python's `g`: "0.05", "1e-05"):
    a p-value, a risk level, a parameter as given; "–" when undefined."""
    if value is None:
        return DASH
    return f"{value:g}" if digits is None else f"{value:.{digits}g}"


#: fewer questions than this and `eor train` and `eor bench` say how little the figures can tell
SMALL_DATA = 100


def below(value: float, threshold: float) -> str:
    """ "value < threshold" at 2 decimals, or at as many more as it takes not to print the two equal (a value just
    under a threshold is never shown as "0.65 < 0.65")."""
    digits = 2
    while digits < 17 and f"{value:.{digits}f}" == f"{threshold:.{digits}f}":
        digits += 1
    return f"{value:.{digits}f} < {threshold:.{digits}f}"


def small_data_warning(questions: int, doing: str) -> str | None:
    """A warning when `questions` < SMALL_DATA: the half-width of a 95% interval of an accuracy near 50%
    (1.96·√(0.25/n), in points), below which differences are noise; None otherwise."""
    if questions >= SMALL_DATA:
        return None
    half = 196 * (0.25 / max(questions, 1)) ** 0.5
    return (
        f"warning: {doing} on {questions} questions only: an accuracy near 50% is known to ±{fixed(half, 0)} points "
        f"(95% interval), so differences below that are noise; {SMALL_DATA} or more questions are advised"
    )


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines: the header, its rule, a line per row, the cells as given (a caller escapes what
    its cells may hold: `|`, line breaks)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines
