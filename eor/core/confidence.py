"""Reader confidence: the log-probability of each generated token as the reader computed it to decode, and
the first token's margin (top-1 minus top-2 log-probability), read where the backend already has them (no
extra evaluation: llama.cpp's logits of each decoding step, transformers' `output_scores`, an
OpenAI-compatible server's `logprobs`).

A `Confidence` travels with its completion through the generation cache (eor.runs.generation_cache) into records,
`eor ask --json`, the API and the selector's features (`summary()`: mean and minimum token log-probability,
first-token margin, tokens).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

SUMMARY_FIELDS = ("mean_logprob", "min_logprob", "first_margin", "tokens")


@dataclass(frozen=True)
class Confidence:
    """`logprobs`: each generated token's log-probability (natural log); `first_margin`: the first token's
    top-1 minus top-2 log-probability (None when the backend gives no alternatives)."""

    logprobs: tuple[float, ...]
    first_margin: float | None = None

    def summary(self) -> dict[str, float | int | None]:
        """What records and the API hold: mean and minimum log-probability, first margin, token count."""
        values = self.logprobs
        return {
            "mean_logprob": round(float(np.mean(values)), 6) if values else None,
            "min_logprob": round(float(np.min(values)), 6) if values else None,
            "first_margin": None if self.first_margin is None else round(float(self.first_margin), 6),
            "tokens": len(values),
        }

    def to_json(self) -> dict[str, Any]:
        """Exact floats (JSON round-trips them), so a cached completion summarises as the fresh one did."""
        return {"logprobs": [float(v) for v in self.logprobs], "first_margin": self.first_margin}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Confidence | None:
        if not isinstance(data, Mapping) or not isinstance(data.get("logprobs"), Sequence):
            return None
        margin = data.get("first_margin")
        return cls(tuple(float(v) for v in data["logprobs"]), None if margin is None else float(margin))


def token_logprob(logits: np.ndarray, token: int) -> float:
    """log softmax(logits)[token]: exponentials in the logits' own precision (float32 for llama.cpp: 0.1 ms
    over a 152k vocabulary), their sum in float64."""
    peak = logits.max()
    total = float(np.exp(logits - peak).sum(dtype=np.float64))
    return float(logits[token]) - float(peak) - math.log(total)


def top_margin(logits: np.ndarray) -> float:
    """Top-1 minus top-2 log-probability: the difference of the two largest logits."""
    two = np.partition(logits, -2)[-2:]
    return float(two[1]) - float(two[0])


class StepRecorder:
    """Collects a decoding's confidence step by step: `step(logits, token)` for each generated token (the
    logits it was chosen from), then `confidence(n)` for the first n tokens (the text's; an end-of-text token
    is not part of it)."""

    def __init__(self) -> None:
        self.logprobs: list[float] = []
        self.first_margin: float | None = None

    def step(self, logits: np.ndarray, token: int) -> None:
        if not self.logprobs:
            self.first_margin = top_margin(logits)
        self.logprobs.append(token_logprob(logits, token))

    def confidence(self, tokens: int | None = None) -> Confidence:
        kept = self.logprobs if tokens is None else self.logprobs[:tokens]
        return Confidence(tuple(kept), self.first_margin if kept else None)
