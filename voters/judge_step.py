"""A cascade trained with the reader as judge as its last step (`eor train --voter cascade --judge`,
eor.learning.judge_cascade): what its weights file says of that judge (`meta.last_step`: the judge's file by path and
digest, its fit, and the abstention thresholds chosen for the judge's answers), read where the cascade answers
(eor.pipeline.stages.judged), is benchmarked (eor.evaluation.bench) and is trained
(eor.commands.train_judge_cascade)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: the weights-file metadata key of a cascade trained with the judge as its last step (eor.learning.judge_cascade)
LAST_STEP = "last_step"


def ends_with_judge(voter: Any) -> dict[str, Any] | None:
    """The judge a cascade was trained to end with (its weights file's `meta.last_step`); None for any other
    voter."""
    entry = voter.metadata_.get(LAST_STEP)
    return dict(entry) if isinstance(entry, Mapping) else None


@dataclass(frozen=True)
class StepRisk:
    """Abstention thresholds (eor.pipeline.abstention) of the judge's answers in a cascade trained with the judge
    as its last step, chosen on its held-out answers on the questions the cascade runs to its end
    (`meta.last_step.risk.judged`, eor.commands.train_judge_cascade); the answers its steps stop at have the
    cascade's own P(right) and thresholds (`meta.probability`, voters.right)."""

    thresholds: list[dict[str, Any]]
    delta: float | None
    correctness: str = "em"

    @classmethod
    def of(cls, voter: Any) -> StepRisk | None:
        risk = (ends_with_judge(voter) or {}).get("risk")
        if not isinstance(risk, Mapping):
            return None
        return cls([dict(row) for row in risk.get("judged") or []], risk.get("delta"), risk.get("correctness", "em"))
