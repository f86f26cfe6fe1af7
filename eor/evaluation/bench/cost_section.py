"""The cost side of a benchmark: what each member costs per question, what EoR's voter ran, the
accuracy-versus-cost frontier of member subsets, and a cascade's operating points, from records alone.

- `members`: each member's mean and 90th-percentile cost per question (eor.runs.costs: recorded seconds, or
  token counts at the reader's rates where the records hold them: the rates of the voter's training records
  when its weights file states them, else fitted on these records; `rates_from` says which) and its accuracy;
- `pool_seconds`: running every member; `eor_seconds` (mean and p90) and `members_run`: what EoR's voter
  ran (every member of its pool, or for a cascade the members up to where it stopped on each question);
- on demand (`frontier=True`, `eor bench --frontier`: an answer selector fitted K times per subset, 2^M − 1
  subsets for M members, so not by default; `frontier` is null without it): `subsets`, every member subset
  (exhaustive up to MAX_EXHAUSTIVE subsets; else those visited by greedy forward and backward selection)
  with the K-fold cross-validated accuracy of an answer selector over it (voters.selector, folds by question
  within these records) and its mean cost; `frontier`: the subsets no other subset beats on both;
  `full_selector`: the subset of every member;
- `cascade`: with a cascade weights file, its replay at the thresholds several tolerances choose.

A cascade's members are charged as it runs them (`charged: "cascade order"`): each right after the member before
it in the cascade's own order, keeping the prompt prefix the reader keeps (eor.runs.costs.PromptReplay), where
the records hold token counts and prompts and the reader's tokenizer is given (`eor bench --config` with a
llama.cpp reader); else as recorded, in the order `eor run` ran them (`charged: "records' order"`).
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import numpy as np

from eor.core.errors import InputError
from eor.runs.costs import PromptReplay, ReaderTokens, member_costs, trained_rates, with_replay
from eor.runs.run_data import RunData
from voters.batch import VoteBatch
from voters.cascade_fit import SelectorSettings, StepScores
from voters.features import candidate_blocks
from voters.similarity import similarity_tensor

#: subsets evaluated one by one up to this many (7 members: 127); beyond, greedy forward and backward selection.
MAX_EXHAUSTIVE = 255
#: the tolerances (EM points) at which a cascade's operating points are replayed.
CASCADE_LOSSES = (0.0, 0.25, 0.5, 1.0, 2.0)
FOLDS = 5


def cost_section(
    data: RunData,
    voted: Any,
    indicator: np.ndarray,
    metric: str,
    seed: int = 0,
    *,
    frontier: bool = False,
    progress: bool = False,
    tokens: ReaderTokens | None = None,
) -> dict[str, Any] | None:
    """The report's `cost` object; None when the records hold no members' seconds. indicator: (M, Q)
    correctness per member and question under the report's metric. `frontier`: also the subset frontier
    (`progress`: with a bar of the subsets on stderr). `tokens` (the reader's): a cascade charged in its own order
    (the module)."""
    trained = trained_rates(voted.voter)
    try:
        costs = member_costs(data, rates=trained)
    except InputError:
        return None
    matrix = costs.matrix
    charged: np.ndarray | PromptReplay = matrix
    if voted.voter.in_steps and tokens is not None and costs.unit == "tokens":
        charged = with_replay(costs, data, tokens).replay or matrix
    members = {
        name: {
            "seconds": float(matrix[:, m].mean()),
            "seconds_p90": float(np.percentile(matrix[:, m], 90)),
            metric: float(indicator[m].mean()),
        }
        for m, name in enumerate(data.names)
    }
    spent, members_run = _eor_spent(data, voted, charged)
    section: dict[str, Any] = {
        "unit": costs.unit,
        "charged": "records' order" if isinstance(charged, np.ndarray) else "cascade order",
        "rates": costs.rates,
        "rates_from": None if costs.rates is None else "the voter's training records" if trained else "these records",
        "members": members,
        "pool_seconds": float(matrix.sum(axis=1).mean()),
        "eor_seconds": float(spent.mean()),
        "eor_seconds_p90": float(np.percentile(spent, 90)),
        "members_run": float(members_run.mean()),
    }
    section["frontier"] = None
    if frontier:
        section.update(subset_frontier(data, indicator >= 0.5, matrix, seed, progress=progress))
    section["cascade"] = _cascade_points(voted, data, charged, indicator)
    return section


def _columns(costs: np.ndarray | PromptReplay, columns: list[int]) -> np.ndarray | PromptReplay:
    """The costs of the members at `columns` (of the records), in that order."""
    return costs[:, columns] if isinstance(costs, np.ndarray) else costs.subset(columns)


def _eor_spent(data: RunData, voted: Any, costs: np.ndarray | PromptReplay) -> tuple[np.ndarray, np.ndarray]:
    """Per question, the cost of the members EoR's voter ran (a cascade: charged as `costs` say), and how many."""
    columns = [data.names.index(name) for name in voted.members]
    if voted.voter.in_steps:
        stops = voted.stops
        return voted.voter.spent(_columns(costs, columns), stops), stops + 1.0
    matrix = np.asarray(costs)
    return matrix[:, columns].sum(axis=1), np.full(data.questions, float(len(columns)))


def subset_frontier(
    data: RunData, labels: np.ndarray, matrix: np.ndarray, seed: int = 0, *, progress: bool = False
) -> dict[str, Any]:
    """Every evaluated subset's cross-validated selector accuracy and mean cost, and the frontier; `progress`:
    a bar of the exhaustive search's subsets on stderr."""
    from tqdm.auto import tqdm

    settings = SelectorSettings()
    tensor = similarity_tensor(data.answers, list(settings.metrics))
    confidence = data.confidence if data.has_confidence else None
    blocks = candidate_blocks(tensor, data.answers, data.passages, data.texts, settings.metrics, confidence)
    rows = np.arange(data.questions)
    scores = StepScores(blocks, labels.T, data.names, rows, settings, min(FOLDS, data.questions), seed)
    n_members = len(data.names)
    if 2**n_members - 1 <= MAX_EXHAUSTIVE:
        subsets = [s for size in range(1, n_members + 1) for s in itertools.combinations(range(n_members), size)]
        search = "exhaustive"
    else:
        subsets = _greedy_subsets(scores, n_members)
        search = "greedy forward and backward selection"
    entries: list[dict[str, Any]] = [
        {
            "members": [data.names[m] for m in subset],
            "accuracy": scores.of(subset).accuracy,
            "seconds": float(matrix[:, list(subset)].sum(axis=1).mean()),
        }
        for subset in tqdm(subsets, desc="subset frontier", unit="subset", disable=not progress, file=sys.stderr)
    ]
    frontier: list[dict[str, Any]] = []
    for entry in sorted(entries, key=lambda e: (e["seconds"], -e["accuracy"])):
        if not frontier or entry["accuracy"] > frontier[-1]["accuracy"]:
            frontier.append(entry)
    full = next(entry for entry in entries if len(entry["members"]) == n_members)
    return {
        "selector_cv": {"folds": len(scores.parts), "seed": seed, "search": search},
        "subsets": entries,
        "frontier": frontier,
        "full_selector": full,
    }


def _greedy_subsets(scores: Any, n_members: int) -> list[tuple[int, ...]]:
    """The subsets visited by greedy forward selection (add the member that helps most) and backward
    elimination (drop the member whose loss hurts least), each ranked by cross-validated accuracy."""
    visited: dict[tuple[int, ...], None] = {}
    chosen: list[int] = []
    while len(chosen) < n_members:
        options = [tuple(sorted([*chosen, m])) for m in range(n_members) if m not in chosen]
        best = max(options, key=lambda subset: scores.of(subset).accuracy)
        visited.update(dict.fromkeys(options))
        chosen = list(best)
    kept = list(range(n_members))
    visited[tuple(kept)] = None
    while len(kept) > 1:
        options = [tuple(m for m in kept if m != drop) for drop in kept]
        best = max(options, key=lambda subset: scores.of(subset).accuracy)
        visited.update(dict.fromkeys(options))
        kept = list(best)
    return list(visited)


def _cascade_points(
    voted: Any, data: RunData, costs: np.ndarray | PromptReplay, indicator: np.ndarray
) -> dict[str, Any] | None:
    """A cascade's replay on these records at the threshold each tolerance of CASCADE_LOSSES chooses (on
    the training records, held out), beside the chosen one."""
    cascade = voted.voter
    if not cascade.in_steps:
        return None
    columns = [data.names.index(name) for name in voted.members]
    answers = [[row[c] for c in columns] for row in data.answers]
    passages = [[row[c] for c in columns] for row in data.passages]
    known = [[row[c] for c in columns] for row in data.confidence] if data.has_confidence else None
    batch = VoteBatch(answers, passages, data.texts, confidence=known)
    points = []
    for loss in CASCADE_LOSSES:
        threshold = cascade.at_loss(loss / 100).threshold
        chosen, stops = cascade.replay(batch, threshold)
        spent = cascade.spent(_columns(costs, columns), stops)
        right = indicator[np.asarray(columns)[chosen], np.arange(data.questions)]
        points.append(
            {
                "max_loss": loss,
                "threshold": None if np.isinf(threshold) else threshold,
                "accuracy": float(right.mean()),
                "seconds": float(spent.mean()),
                "seconds_p90": float(np.percentile(spent, 90)),
                "members_run": float((stops + 1).mean()),
            }
        )
    return {
        "order": list(cascade.order_),
        "threshold": None if np.isinf(cascade.threshold_) else cascade.threshold_,
        "points": points,
    }
