"""`eor train`: learn a voter from run records and save it as a weights file.

`--voter auto` (the default) picks among the candidates of `eor.learning.crossval` (Top R, the paper's voter, with
grounding, with the smooth objective, the learned answer selector) by inner K-fold cross-validation on the
training records, never below Top R, then fits the choice on every training question; `--voter NAME`
trains that voter alone (`paper` is exactly the paper's voter of section 4.2). `--cv K` reports every
candidate's K-fold figures against Top R before training (with `auto` itself cross-validated, nested).

The steps, their policy and the weights file's metadata are eor.learning.training's (records → candidates →
cross-validated choice → fit → calibration → report → weights file, `train_voter`); this module prints what each
found (eor.commands.train_report) and writes the weights file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from eor.commands.train_report import choice_lines, dev_lines, probability_lines, score_lines
from eor.learning.train_options import TrainOptions
from eor.learning.training import train_voter

__all__ = ["TrainOptions", "train"]


def train(records: Path | Sequence[Path], out: Path, options: TrainOptions) -> str:
    """Train the voter that `options` asks for on the run records `records` (several: read as one, their pools
    the same), save it as the weights file `out` and give back the report's lines."""
    trained = train_voter(records, options)
    choice = trained.choice
    lines = [*choice_lines(choice, options.metric), *([trained.charged] if trained.charged else [])]
    lines.append(f"voter: {choice.name}; weights written to {out}")
    lines += score_lines(trained.voter, choice.arrays, choice.name, trained.meta, options.metric)
    lines += probability_lines(trained.probability, options.metric, choice.arrays.data.questions, options.inner_folds)
    if trained.figures is not None:
        lines += dev_lines(trained.figures, options.metric)
    trained.save(out)
    return "\n".join(lines)
