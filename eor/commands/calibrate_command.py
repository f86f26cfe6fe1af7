"""`eor calibrate RECORDS --weights W --out OUT`: a trained voter's P(right) and `--risk` thresholds fitted to
labelled questions of one's own (eor.learning.recalibration), the voter kept.

The records are those of `eor run` on the labelled questions, with the pool the weights file was trained for
(its members; the reader and corpus may differ: that is the point). The weights file: a path, or
`eor:weights/NAME.json`, one shipped with eor. The voter chooses on them as it would answer; its P(right) of each
choice, as shipped (a file recalibrated before is rescaled from its shipped P again), and whether the choice was
right (by the correctness the P(right) was fitted for) are what is recalibrated on. Records of questions the
documents cannot answer (`--nocorpus`) certify the thresholds for a mix. The weights file written is the input's
with its `meta.probability` recalibrated and the records named (`meta.recalibration_records`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from eor.core.config import shipped_or_path
from eor.core.correctness import correctness_matrix
from eor.core.errors import InputError
from eor.evaluation.bench.vote import vote
from eor.learning.recalibration import Labelled, recalibrate
from eor.pipeline.pool import runs_pool
from eor.runs.records import records_file
from eor.runs.run_data import RunData, load_run
from eor.runs.run_folder import recorded_pool
from voters.right import RightModel
from voters.weights_file import read_document, with_probability


def calibrate(records: Path, given: str, out: Path, nocorpus: Path | None = None, share: float = 0.33) -> str:
    """Recalibrate the P(right) of the weights file `given` (`eor:` names one shipped with eor) on the labelled
    questions of `records` (and `nocorpus`, for a mix at `share`), write the result to `out`, and give back what
    was found (eor.learning.recalibration)."""
    weights = shipped_or_path(given)
    document = read_document(weights)
    judged = document.get("voter") == "judge" or (document.get("meta") or {}).get("last_step") is not None
    if judged:
        kind = "a judge voter" if document.get("voter") == "judge" else "a cascade ending with the judge"
        raise InputError(
            f"{weights} is {kind}: eor calibrate recalibrates the P(right) of the other voters (cascade, "
            "selector, the paper's voter)"
        )
    pool = _pool(records)
    if nocorpus is not None:
        _pool(nocorpus)
        runs_pool([records, nocorpus])  # ConfigError naming what differs: another reader or corpus
    data = load_run(records, unlabelled=True)
    model, answerable = _labelled(data, weights, records, labelled=True)
    other = (
        None
        if nocorpus is None
        else _labelled(load_run(nocorpus, unlabelled=True), weights, nocorpus, labelled=False)[1]
    )
    found = recalibrate(model, answerable, other, share if other is not None else None, pool)
    with_probability(
        weights,
        out,
        found.model.to_dict(),
        recalibration_records={"answerable": str(records), "nocorpus": None if nocorpus is None else str(nocorpus)},
    )
    head = f"recalibrated the P(right) of {weights} on {len(answerable)} labelled questions ({records})"
    return "\n".join([head, *found.lines(), f"weights written to {out} (the voter unchanged)"])


def _pool(records: Path) -> dict[str, Any]:
    """The pool identity `records` (a run folder or records file) were answered by; InputError for a path that
    holds no records, or records that do not say (the recalibrated P(right) holds for that pool alone)."""
    records_file(records)
    pool = recorded_pool(records)
    if pool is None:
        raise InputError(
            f"{records} does not say which pool answered it (no pool.json or header: made by an older eor); run the "
            "questions again with this eor: the recalibrated P(right) holds for that pool alone"
        )
    return pool


def _labelled(data: RunData, weights: Path, records: Path, labelled: bool) -> tuple[RightModel, Labelled]:
    """The voter's P(right) model and its choices on `data`: P(right), fit and rightness of each. `labelled`:
    every question must hold its answers (questions the documents cannot answer may hold none: never right)."""
    if not data.questions:
        raise InputError(f"{records} holds no question")
    lacking = sum(not golds for golds in data.golds)
    if labelled and lacking:
        raise InputError(
            f"{lacking} of the {data.questions} questions of {records} have no answers: recalibration needs each "
            "question's acceptable answers (`answers` in the questions file given to eor run)"
        )
    chosen = vote(data, weights)
    model = RightModel.from_voter(chosen.voter)
    if model is None or chosen.evidence is None or chosen.fits is None:
        raise InputError(f"{weights} holds no P(right) to recalibrate: train it with this eor (eor train stores one)")
    scored = correctness_matrix(data.answers, data.golds, model.correctness, data.texts)
    right = scored[np.arange(data.questions), chosen.chosen] >= 0.5
    fits = np.asarray(chosen.fits, dtype=str)
    # the P as trained, whatever a recalibration before rescaled it to (a rescaling is never inverted: its clipped
    # tails would merge probabilities)
    shipped = np.asarray(model.shipped().probability(chosen.evidence, fits), dtype=float)
    return model, Labelled(shipped, fits, right)
