"""The EoR system of a benchmark: a voter (from a weights file, or uniform) applied to the records' answers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.errors import ConfigError, InputError
from eor.runs.run_data import RunData
from voters.batch import VoteBatch
from voters.choice_evidence import Evidence, choice_evidence
from voters.judge_step import ends_with_judge
from voters.loading import choose_voter
from voters.right import RightModel

REPORTED_META = (
    "objective",
    "reader",
    "dataset",
    "records",
    "dev_records",
    "top_r_train",
    "top_r_dev",
    "uniform",
    "chosen_voter",
    "selection",
    "cv",
)


@dataclass(frozen=True)
class Vote:
    """What EoR chose: `chosen[q]` is an index into the run's member names."""

    chosen: np.ndarray
    voter: Any  # voters.Voter
    members: list[str]  # the members that voted (the weights file's pool, or every member)
    weights_file: Path | None
    stops: np.ndarray | None = None  # a cascade's: the step each question stopped at
    probability: np.ndarray | None = None  # P(right) of each chosen answer, where the weights file has one
    fits: np.ndarray | None = None  # the P(right) fit that gave each (voters.choice_evidence.FITS)
    unanswerable: np.ndarray | None = None  # P(unanswerable) of each, where the weights file has one (else NaN)
    evidence: Evidence | None = None  # what P(right) read of each chosen answer (voters.choice_evidence)

    def describe(self) -> dict[str, Any]:
        """The voter's settings for the report (`weights` holds the learned weights separately)."""
        described = self.voter.describe()
        return {
            "voter": "weights" if self.weights_file is not None else "uniform",
            "kind": described["voter"],
            "weights_file": str(self.weights_file) if self.weights_file is not None else None,
            "metrics": list(described["metrics"]),
            "pooling": described.get("pooling"),
            "members": list(self.members),
        }

    def weights(self) -> dict[str, Any] | None:
        """What the voter learned (figure 6 for the paper's voter, the coefficients of a selector) and the
        weights file's metadata; None for a uniform voter."""
        if self.weights_file is None:
            return None
        voter = self.voter
        meta = dict(voter.metadata_)
        return {
            "file": str(self.weights_file),
            "members": list(self.members),
            **voter.describe(),
            "train_score": voter.train_score_,
            "dev_score": voter.dev_score_,
            "meta": {key: meta[key] for key in REPORTED_META if key in meta},
        }

    @property
    def top_r_train(self) -> str | None:
        """The member the weights file names as best on the training records, if it does."""
        meta = self.voter.metadata_
        entry = meta.get("top_r_train")
        return str(entry["member"]) if isinstance(entry, dict) and entry.get("member") else None


def vote(
    data: RunData, weights: str | Path | None = None, metrics: Sequence[str] | None = None, *, with_judge: bool = False
) -> Vote:
    """Run EoR over the records: the weights file's voter, or a uniform one over `metrics` (default: those of
    `Voter.uniform`); voters.loading.choose_voter decides.

    A weights file trained on a sub-pool of the records' members votes among those members only; a weights
    file naming members the records lack is an error. A cascade trained with the judge as its last step
    (voters.judge_step.ends_with_judge) is refused unless `with_judge` (the caller answers its last step
    with the judge: eor.evaluation.bench.judge_cascade_report): its last step's selector never answers.
    """

    if weights is not None and metrics is not None:
        raise ConfigError("give either a weights file or metrics for a uniform voter, not both")
    path = Path(weights) if weights is not None else None
    uniform: dict[str, Any] = {"metrics": tuple(metrics)} if metrics else {}
    voter = choose_voter(path, data.names, sub_pool=True, **uniform)
    if not with_judge and ends_with_judge(voter) is not None:
        raise ConfigError(
            f"{path} is a cascade whose last step is the judge: benchmark it with the config that names that judge "
            "(eor bench RECORDS --weights CASCADE.json --config CONFIG, judge: {weights: ..., after: cascade})"
        )
    members = _voting_members(voter, data, path)
    columns = [data.names.index(name) for name in members]
    answers = [[row[c] for c in columns] for row in data.answers]
    passages = [[row[c] for c in columns] for row in data.passages]
    confidence = [[row[c] for c in columns] for row in data.confidence] or None
    model = RightModel.from_voter(voter)
    # the passages found in a corpus, for a P(right) that reads how well they match the question
    retrieved = [[row[c] for c in columns] for row in data.retrieved] if model and model.reads_retrieval else None
    batch = VoteBatch(answers, passages, data.texts, confidence=confidence, retrieved=retrieved or None)
    stops = None
    if not data.questions:
        picks = np.zeros(0, dtype=int)
    elif voter.in_steps:
        picks, stops = voter.replay(batch)
    else:
        picks = voter.predict(batch)
    chosen = np.asarray([columns[int(p)] for p in picks], dtype=int)
    probability = fits = unanswerable = found = None
    if model is not None and data.questions:
        found = choice_evidence(voter, batch)
        if not np.array_equal(np.asarray([columns[int(p)] for p in found.pick]), chosen):
            raise RuntimeError("the voter's P(right) scored other answers than it chose")
        fits = model.fit_names(found)
        probability = model.probability(found, fits)
        if model.unanswerable is not None:
            each = (model.unanswerable_of(found.take(np.array([q]))) for q in range(len(found)))
            unanswerable = np.array([np.nan if value is None else value for value in each], dtype=float)
    return Vote(chosen, voter, members, path, stops, probability, fits, unanswerable, found)


def _voting_members(voter: Any, data: RunData, path: Path | None) -> list[str]:
    """The members the voter votes among: its own pool (a weights file's, which the records must hold), or
    every member of the records for a file that names none (it must hold as many)."""
    if voter.members_ is None:
        if voter.n_members_ != len(data.names):
            raise ConfigError(
                f"weights file {str(path)!r} holds weights for {voter.n_members_} unnamed members, "
                f"the records have {len(data.names)}"
            )
        return list(data.names)
    missing = [name for name in voter.members_ if name not in data.names]
    if missing:
        raise InputError(
            f"weights file {str(path)!r} was trained for member(s) the records lack: {', '.join(missing)}; "
            f"the records have {', '.join(data.names)}"
        )
    return list(voter.members_)
