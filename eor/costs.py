"""What running a member costs on a question, from records alone.

Two measures (DESIGN §9):

- `seconds`: the member's recorded wall seconds (retrieval plus generation, PK's and @CP's documents
  included). Measured in batches, sometimes beside other jobs: contention inflates it.
- `tokens`: the member's token counts (prompt tokens evaluated, generated tokens; records written since
  they were recorded hold them) at the reader's rates, cost = prompt / prompt_rate + generated /
  generation_rate, in seconds. Contention does not change a token count. The rates are given, or fitted to
  the records' own seconds by non-negative least squares (the reader's mean rates over the run).

`member_costs(data, "auto")` uses tokens where every member of every question has them, else seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eor.errors import InputError
from eor.run_data import RunData

UNITS = ("auto", "seconds", "tokens")


@dataclass(frozen=True)
class MemberCosts:
    """Cost per question and member (Q, M) in seconds, by `unit` ("seconds" or "tokens"), with the rates
    (tokens per second) used for tokens; `seconds` is always the recorded seconds."""

    matrix: np.ndarray
    unit: str
    seconds: np.ndarray
    rates: dict[str, float] | None = None

    def mean(self) -> np.ndarray:
        return self.matrix.mean(axis=0)


def token_counts(data: RunData) -> np.ndarray | None:
    """(Q, M, 2): prompt tokens evaluated and generated tokens per member, or None unless every record has
    them for every member."""
    if not data.tokens or any(entry is None for row in data.tokens for entry in row):
        return None
    return np.array([[[entry.get("prompt", 0), entry.get("generated", 0)] for entry in row] for row in data.tokens])


def recorded_seconds(data: RunData) -> np.ndarray:
    if not data.seconds or any(value is None for row in data.seconds for value in row):
        raise InputError("the records lack members' seconds: costs need records written by `eor run`")
    return np.asarray(data.seconds, dtype=float)


def fit_rates(tokens: np.ndarray, seconds: np.ndarray) -> dict[str, float]:
    """Prompt and generation rates (tokens per second) such that seconds ≈ prompt / p + generated / g,
    by non-negative least squares over every (question, member)."""
    from scipy.optimize import nnls

    design = tokens.reshape(-1, 2).astype(float)
    inverse, _ = nnls(design, seconds.reshape(-1))
    if np.any(inverse <= 0):
        raise InputError("the records' seconds do not determine both token rates; give the rates")
    return {"prompt": float(1 / inverse[0]), "generated": float(1 / inverse[1])}


def member_costs(data: RunData, unit: str = "auto", rates: dict[str, float] | None = None) -> MemberCosts:
    """Each member's cost per question (see the module docstring)."""
    if unit not in UNITS:
        raise InputError(f"unknown cost unit {unit!r}; available: {', '.join(UNITS)}")
    seconds = recorded_seconds(data)
    tokens = token_counts(data)
    if unit == "seconds" or (unit == "auto" and tokens is None):
        return MemberCosts(seconds, "seconds", seconds)
    if tokens is None:
        raise InputError("the records hold no token counts (written before eor recorded them); use seconds")
    used = rates or fit_rates(tokens, seconds)
    matrix = tokens[..., 0] / used["prompt"] + tokens[..., 1] / used["generated"]
    return MemberCosts(matrix, "tokens", seconds, dict(used))
