"""The reader as judge: the log-probability of a given continuation after a prompt, token by token (teacher
forcing), in the chat tokens the reader answers with, the continuation followed by the end of the assistant's
turn (so that "Paris" is scored as a whole answer, not as the start of a longer one).

A `Likelihood` is what every reader backend's `score(prompt, continuations)` returns per continuation, what the
generation cache keeps (eor.runs.generation_cache) and what records and the judge's features read (`summary()`:
the sum, the per-token mean, the minimum and the token count).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SUMMARY_FIELDS = ("logprob", "mean_logprob", "min_logprob", "tokens")


@dataclass(frozen=True)
class Likelihood:
    """`logprobs`: the natural-log probability of each token of the continuation, its end-of-turn token last
    (when the backend scores it: `ended`)."""

    logprobs: tuple[float, ...]
    ended: bool = True

    @property
    def total(self) -> float:
        """log P(continuation | prompt): the sum of the token log-probabilities (-inf for no tokens)."""
        return math.fsum(self.logprobs) if self.logprobs else -math.inf

    @property
    def mean(self) -> float:
        """The per-token mean (length-normalised log-probability)."""
        return self.total / len(self.logprobs) if self.logprobs else -math.inf

    def summary(self) -> dict[str, float | int]:
        """What records hold: the sum, the per-token mean, the minimum and the token count (rounded to 1e-6)."""
        values = self.logprobs
        return {
            "logprob": round(self.total, 6),
            "mean_logprob": round(self.mean, 6),
            "min_logprob": round(min(values), 6) if values else -math.inf,
            "tokens": len(values),
        }

    def to_json(self) -> dict[str, Any]:
        """Exact floats (JSON round-trips them), so a cached score summarises as the fresh one did."""
        return {"logprobs": [float(v) for v in self.logprobs], "ended": self.ended}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Likelihood | None:
        if not isinstance(data, Mapping) or not isinstance(data.get("logprobs"), Sequence):
            return None
        return cls(tuple(float(v) for v in data["logprobs"]), bool(data.get("ended", True)))


TURN_MARK = "\u2063answer\u2063"  # an assistant message no template alters, to find what follows one


def turn_end_text(rendered: str) -> str | None:
    """What a chat template writes right after an assistant's message, up to the first white space (ChatML's
    `<|im_end|>`, Llama 3's `<|eot_id|>`): `rendered` is a chat whose assistant message is TURN_MARK. None
    when the template writes nothing there."""
    at = rendered.find(TURN_MARK)
    if at < 0:
        return None
    rest = rendered[at + len(TURN_MARK) :].split(maxsplit=1)
    return rest[0] if rest else None


def log_softmax_rows(logits: Any, targets: Sequence[int]) -> list[float]:
    """log softmax(row)[target] for each row of `logits` (rows × vocabulary) and its target token: the
    exponentials in the logits' own precision, their sums in float64 (as eor.core.confidence.token_logprob)."""
    import numpy as np

    rows = np.asarray(logits)
    peak = rows.max(axis=1, keepdims=True)
    totals = np.exp(rows - peak).sum(axis=1, dtype=np.float64)
    picked = rows[np.arange(len(targets)), np.asarray(targets, dtype=np.int64)]
    return [float(p) - float(m) - math.log(t) for p, m, t in zip(picked, peak[:, 0], totals, strict=True)]
