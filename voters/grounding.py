"""The grounding feature (beyond the paper): does a member's answer occur in its own retrieved passages?

g_m = 1 when the normalised answer occurs as a whole-token span in the member's normalised passage text
(eor.core.answers.contains, the paper's hallucination indicator of appendix B read the other way), else 0; an
empty answer, or a member with no passages (e.g. ReFree), is ungrounded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from eor.core.answers import contains
from eor.core.errors import InputError

Passages = str | Sequence[str]


def passage_text(passages: Passages) -> str:
    """One member's passages as a single text (a list of passage strings is joined by newlines)."""
    if isinstance(passages, str):
        return passages
    if passages is None:
        return ""
    if any(not isinstance(text, str) for text in passages):
        raise InputError("passages must be strings (or lists of strings), one entry per member")
    return "\n".join(passages)


def grounding_features(answers: Sequence[Sequence[str]], passages: Sequence[Sequence[Passages]]) -> np.ndarray:
    """g_m per question and member, shape (Q, M)."""
    if len(passages) != len(answers):
        raise InputError(f"got passages for {len(passages)} questions but answers for {len(answers)}")
    rows = []
    for q, (row, texts) in enumerate(zip(answers, passages, strict=True)):
        if len(texts) != len(row):
            raise InputError(f"question {q}: {len(texts)} passage entries for {len(row)} members")
        rows.append([contains(passage_text(text), answer) for answer, text in zip(row, texts, strict=True)])
    width = len(answers[0]) if len(answers) else 0
    return np.array(rows, dtype=float).reshape(len(answers), width)
