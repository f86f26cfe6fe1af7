"""A trained voter and what its weights file records of its training (`Trained`): what every trainer of eor.learning
gives back (`eor train`'s steps, the judge voter's, the cascade ending with the judge), for its command to print and
save; and the parts of that record that `eor train`'s steps write (`choice_meta`, `run_meta`, `pool_meta`,
`dev_meta`). The weights file's metadata is made here and in the trainers, never in a command."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eor.core.config import EnsembleConfig
from eor.core.errors import ConfigError
from eor.pipeline.pool import pool_identity
from eor.readers import build_reader
from eor.runs.run_folder import recorded_config
from voters.codecs import save_voter


@dataclass
class Trained:
    """A fitted voter and its weights file's `meta` (JSON values, in the order the file keeps them)."""

    voter: Any
    meta: dict[str, Any]

    def save(self, path: Path) -> Path:
        """Write the weights file (voters.codecs); the path written."""
        return save_voter(self.voter, path, **self.meta)


def choice_meta(choice: Any) -> dict[str, Any]:
    """What the cross-validated choice found (eor.learning.training.Choice), as the weights file keeps it."""
    meta: dict[str, Any] = {}
    if choice.confidence is not None:
        meta["confidence_features"] = choice.confidence
    if choice.cv is not None:
        meta["cv"] = {"folds": choice.cv_folds, "seed": choice.seed, "voters": choice.cv}
    if choice.selection is not None:
        meta["selection"] = {"folds": choice.folds, "seed": choice.seed, "means": choice.selection}
    return meta


def dev_meta(meta: dict[str, Any], figures: Any, metric: str) -> None:
    """The held-out figures (eor.learning.training.DevFigures) into the weights file's meta, beside the training
    ones."""
    meta["top_r_train"]["dev"] = figures.top_train[1]
    meta["uniform"]["dev"] = figures.uniform
    meta["top_r_dev"] = {"member": figures.top_dev[0], "dev": figures.top_dev[1]}
    meta["dev"] = {
        "questions": figures.questions,
        metric: figures.score,
        "f1": figures.f1,
        "oracle": figures.oracle,
        "gap_closed": figures.gap_closed,
        "vs": figures.tests,
    }


def run_meta(records: Path) -> dict[str, Any]:
    """The reader and the corpus's file name the records were made with (no machine paths in weights files)."""
    config = recorded_config(records)
    if config is None:
        return {}
    corpus = (config.get("corpus") or {}).get("path")
    return {"reader": config.get("reader", {}).get("model"), "dataset": Path(corpus).name if corpus else None}


def pool_meta(
    recorded: dict[str, Any] | None, pool_config: Path | None, config: EnsembleConfig | None, names: list[str]
) -> dict[str, Any] | None:
    """The identity of the records' pool: from `config`, that of `pool_config` (its reader built for its
    identity, which for llama.cpp hashes the model file without loading it), else the one the records hold
    (`recorded`)."""
    if config is None:
        return recorded
    if sorted(config.members) != sorted(names):
        raise ConfigError(f"{pool_config} has members {', '.join(config.members)}; the records have {', '.join(names)}")
    return pool_identity(config, build_reader(config.reader))
