"""`eor design`: choose a pool from training records of candidate members, by cross-validation on those
records alone, then fit its selector and its cascade.

1. **Scores.** A subset's learned answer selector is cross-validated over `repeats` K-fold splits of the
   training questions (voters.cascade_fit.StepScores, seeds seed, seed + 1, ...): every question gets one
   held-out correctness per split, and the subset's score is their mean.
2. **Costs.** A member costs the reader seconds of its tokens at the given rates, charged as it runs right
   after the member before it in the pool's order (eor.runs.costs.PromptReplay: the prefix its prompt shares with
   that prompt is kept in whole chunks; recomputed from the recorded prompts).
3. **Forward.** From no member, each step adds the candidate with the most cross-validated accuracy gained
   per second it costs after the last member added, among those whose paired gain (per question, the mean
   over splits of held-out correctness with the member minus without) is at least one standard error of
   that mean over the questions; candidates before it that fall short are recorded as refused. When no
   candidate reaches one standard error, the forward pass ends (the best of them per second recorded as
   refused).
4. **Backward.** The member whose removal loses least is removed while that loss is below one standard
   error (or nothing at all); the pool keeps the order of the forward pass.
5. **Voters.** The chosen pool's selector and cascade are fitted once on every training question (`eor
   train`), the cascade with the costs of the pool's order.

The rule is fixed before any held-out question is seen; dev scores the frozen design once
(docs/pool-design.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from eor.core.errors import InputError
from eor.evaluation.stats import paired_difference
from eor.evaluation.upper_bound import oracle_accuracy
from eor.runs.costs import PromptReplay
from voters.cascade_fit import SelectorSettings, StepScores
from voters.features import CandidateBlocks

DEFAULT_REPEATS = 5
DEFAULT_FOLDS = 5
#: a gain equal to its standard error (as a gain on one question is) counts as not below it, whatever the rounding
TIE = 1e-12


@dataclass(frozen=True)
class Step:
    """One step of the design path: the member added or dropped (or the step refused), the pool after it,
    its cross-validated accuracy and cost per question, the oracle over its members, and the step's paired
    gain with its standard error."""

    action: str  # "start", "add", "refused", "drop"
    member: str | None
    members: list[str]
    accuracy: float
    cost: float
    oracle: float
    gain: float = 0.0
    se: float = 0.0


@dataclass
class Design:
    """The path (every step, refused ones included), the chosen members in their order, every pool the passes
    evaluated (members, cross-validated accuracy, cost per question), and the settings."""

    steps: list[Step]
    chosen: list[str]
    evaluated: list[dict[str, Any]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    def frontier(self) -> list[dict[str, Any]]:
        """The evaluated pools that no cheaper one matches in accuracy, cheapest first."""
        found: list[dict[str, Any]] = []
        for entry in sorted(self.evaluated, key=lambda e: (e["cost"], -e["accuracy"])):
            if not found or entry["accuracy"] > found[-1]["accuracy"]:
                found.append(entry)
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "chosen": self.chosen,
            "settings": self.settings,
            "steps": [asdict(step) for step in self.steps],
            "evaluated": self.evaluated,
            "frontier": self.frontier(),
        }


class SplitScores:
    """A subset's held-out correctness on every training question under each of `repeats` K-fold splits."""

    def __init__(
        self,
        blocks: CandidateBlocks,
        labels: np.ndarray,
        names: Sequence[str],
        settings: SelectorSettings,
        folds: int,
        repeats: int,
        seed: int,
    ) -> None:
        rows = np.arange(labels.shape[0])
        self.splits = [StepScores(blocks, labels, names, rows, settings, folds, seed + r) for r in range(repeats)]
        self.labels = np.asarray(labels, dtype=bool)

    def right(self, subset: Sequence[int]) -> np.ndarray:
        """(questions,): held-out correctness averaged over the splits (zeros for the empty subset)."""
        if not subset:
            return np.zeros(self.labels.shape[0])
        return np.mean([split.of(tuple(subset)).right for split in self.splits], axis=0)

    def oracle(self, subset: Sequence[int]) -> float:
        return oracle_accuracy(self.labels[:, list(subset)].T) if subset else 0.0


def pool_cost(replay: PromptReplay, order: Sequence[int]) -> float:
    """Mean reader seconds per question of running every member of `order`, in that order (eor.runs.costs)."""
    return float(replay.spent(order).mean()) if order else 0.0


def design_pool(
    scores: SplitScores, replay: PromptReplay, names: Sequence[str], *, max_members: int | None = None
) -> Design:
    """The forward and backward passes of the module's text over members `names`."""
    if len(names) != scores.labels.shape[1]:
        raise InputError(f"{len(names)} member names for {scores.labels.shape[1]} members")
    order: list[int] = []
    steps = [Step("start", None, [], 0.0, 0.0, 0.0)]
    evaluated: dict[tuple[int, ...], dict[str, Any]] = {}

    def note(subset: list[int]) -> float:
        """The subset's cross-validated accuracy, kept with its cost for the frontier."""
        accuracy = float(scores.right(subset).mean())
        evaluated.setdefault(
            tuple(subset),
            {"members": [names[m] for m in subset], "accuracy": accuracy, "cost": pool_cost(replay, subset)},
        )
        return accuracy

    limit = len(names) if max_members is None else max_members
    while len(order) < limit:
        current = scores.right(order)
        options = []
        for m in range(len(names)):
            if m in order:
                continue
            gain = note([*order, m]) - float(current.mean())
            seconds = float(replay.after(order[-1] if order else None, m).mean())
            if gain > 0:
                options.append((gain / max(seconds, 1e-9), -m, m))
        refused: list[Step] = []
        for _, _, member in sorted(options, reverse=True):  # most gain per second first
            gain, se = paired_difference(scores.right([*order, member]), current)
            step = _step("add", names, member, [*order, member], scores, replay, gain, se)
            if gain >= se - TIE:
                break
            refused.append(Step("refused", *_fields(step)))
        else:  # no candidate's gain reaches one standard error: the forward pass ends at the best one's refusal
            steps.extend(refused[:1])
            break
        steps.extend([*refused, step])
        order = [*order, member]
    while len(order) > 1:
        current = scores.right(order)
        for m in order:
            note([x for x in order if x != m])
        losses = [(paired_difference(current, scores.right([x for x in order if x != m])), m) for m in order]
        (loss, se), worst = min(losses, key=lambda item: (item[0][0], order.index(item[1])))
        if loss > 0 and loss >= se - TIE:
            break
        order = [x for x in order if x != worst]
        steps.append(_step("drop", names, worst, order, scores, replay, -loss, se))
    return Design(steps, [names[m] for m in order], list(evaluated.values()))


def _step(
    action: str,
    names: Sequence[str],
    member: int,
    order: list[int],
    scores: SplitScores,
    replay: PromptReplay,
    gain: float,
    se: float,
) -> Step:
    return Step(
        action,
        names[member],
        [names[m] for m in order],
        float(scores.right(order).mean()),
        pool_cost(replay, order),
        scores.oracle(order),
        gain,
        se,
    )


def _fields(step: Step) -> tuple[Any, ...]:
    return (step.member, step.members, step.accuracy, step.cost, step.oracle, step.gain, step.se)
