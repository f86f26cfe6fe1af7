"""`eor train`: learn a voter from run records and save it as a weights file.

`--voter auto` (the default) picks among the candidates of `eor.learning.crossval` (Top R, the paper's voter, with
grounding, with the smooth objective, the learned answer selector) by inner K-fold cross-validation on the
training records, never below Top R, then fits the choice on every training question; `--voter NAME`
trains that voter alone (`paper` is exactly the paper's voter of section 4.2). `--cv K` reports every
candidate's K-fold figures against Top R before training (with `auto` itself cross-validated, nested).

The steps and their policy are eor.learning.training's (records → candidates → cross-validated choice → fit →
calibration → report → weights file); this module runs them in order, prints what each found
(eor.commands.train_report) and writes the weights file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from eor.commands.train_options import TrainOptions
from eor.commands.train_report import choice_lines, dev_lines, probability_lines, score_lines
from eor.core.config import EnsembleConfig
from eor.core.errors import ConfigError, InputError
from eor.learning.calibration import Calibrated
from eor.learning.crossval import VoteArrays, vote_arrays
from eor.learning.judge_cascade import reader_tokens
from eor.learning.training import (
    beyond_records,
    calibrated,
    calibrated_beyond,
    choose,
    dev_figures,
    fit,
    train_baselines,
    training_records,
    uniform_baseline,
    with_costs,
)
from eor.pipeline.pool import pool_identity, runs_pool
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.costs import token_counts, training_costs, with_replay
from eor.runs.run_data import RunData, load_run, named_runs, run_paths
from eor.runs.run_folder import recorded_config
from voters.codecs import save_voter


def train(records: Path | Sequence[Path], out: Path, options: TrainOptions) -> str:
    """Train the voter that `options` asks for on the run records `records` (several: read as one, their pools
    the same), save it as the weights file `out` and give back the report's lines."""
    runs = run_paths(records)
    name = options.checked_voter()
    pool = _pool_config(options)
    recorded = runs_pool(runs)  # before any work: runs of different pools are refused
    data = training_records(runs, options.members, pool, options.confidence)
    if options.rates is not None and token_counts(data) is None:  # before any similarity is computed
        raise InputError(
            f"--rates prices token counts, and {', '.join(map(str, runs))} lack them for some member (old records)"
        )
    settings = options.vote_settings()
    arrays, charged = in_cascade_order(with_costs(vote_arrays(data, settings), options.costs), data, pool, options)
    choice = choose(name, arrays, settings, options.inner_folds, options.seed, options.cv)
    fitted = fit(choice)
    probability: Calibrated | None
    if options.beyond_corpus:
        ablated, nocorpus = (
            None if path is None else beyond_records(path, data.names, pool)
            for path in (options.ablated, options.nocorpus)
        )
        probability = calibrated_beyond(choice, ablated, nocorpus, options.unanswerable_share)
    else:
        probability = calibrated(choice)
    uniform = uniform_baseline(data.names, choice.settings)
    meta: dict[str, Any] = {
        "records": named_runs(runs),
        "dev_records": str(options.dev) if options.dev else None,
        **options.beyond_meta(),
        **_choice_meta(choice),
    }
    if probability is not None:
        meta["probability"] = probability.model.to_dict()
    meta["chosen_voter"] = choice.name
    meta.update(train_baselines(choice.arrays, uniform))
    meta.update(_run_meta(runs[0]))
    if choice.arrays.costs is not None:  # the cost model of the training records, for bench and lazy voting
        meta["costs"] = training_costs(choice.arrays.costs, data.names)
    identity = _pool(recorded, options.pool_config, pool, data.names)
    if identity is not None:
        meta["pool"] = identity
    lines = [*choice_lines(choice, options.metric), *([charged] if charged and choice.name == "cascade" else [])]
    lines.append(f"voter: {choice.name}; weights written to {out}")
    lines += score_lines(fitted, choice.arrays, choice.name, meta, options.metric)
    lines += probability_lines(probability, options.metric, data.questions, options.inner_folds)
    if options.dev is not None:
        figures = dev_figures(
            fitted,
            load_run(options.dev, data.names),
            meta["top_r_train"]["member"],
            uniform,
            options.metric,
            options.seed,
        )
        fitted.dev_score_ = figures.score
        _dev_meta(meta, figures, options.metric)
        lines += dev_lines(figures, options.metric)
    save_voter(fitted, out, **meta)
    return "\n".join(lines)


def in_cascade_order(
    arrays: VoteArrays, data: RunData, pool: EnsembleConfig | None, options: TrainOptions
) -> tuple[VoteArrays, str | None]:
    """The arrays with each member's cost replayed as a cascade runs it, right after the member before it
    (eor.runs.costs.with_replay: the prefix its prompt shares with that one), where `options` may train a
    cascade (`auto` considers one only under a tolerance or a budget) and ask its own order (`cost_order`), and the
    records' token counts and prompts can be replayed in the pool's reader's own tokens; and what the cascade is
    charged, said for the report (None where no cascade is trained)."""
    costs = arrays.costs
    name = options.checked_voter()
    tolerant = options.max_loss is not None or options.budget is not None
    if not (name == "cascade" or (name == "auto" and tolerant)) or costs is None:
        return arrays, None
    if options.cost_order == "recorded":
        return arrays, "cascade costs: as recorded, in the records' order (--cost-order recorded)"
    if costs.replay is not None:
        return arrays, "cascade costs: replayed in the cascade's own order (given)"
    if pool is None or costs.unit != "tokens":
        why = "no --config names the reader" if pool is None else "the records' costs are seconds"
        return arrays, f"cascade costs: as recorded, in the records' order ({why}: no replay of prefix reuse)"
    try:
        replayed = with_replay(costs, data, reader_tokens(build_reader(pool.reader), pool))
    except (ConfigError, InputError) as error:
        return arrays, f"cascade costs: as recorded, in the records' order (no replay of prefix reuse: {error})"
    return replace(arrays, costs=replayed), (
        "cascade costs: each member replayed right after the member before it in the cascade's own order "
        "(prefix reuse, in the reader's tokens)"
    )


def _pool_config(options: TrainOptions) -> EnsembleConfig | None:
    """The pool's config: `options.pool`, else the file of `--config` through the door (eor.pipeline.validation);
    None without one."""
    if options.pool is not None or options.pool_config is None:
        return options.pool
    return load_valid_config(options.pool_config)


def _choice_meta(choice: Any) -> dict[str, Any]:
    """What the cross-validated choice found, as the weights file keeps it."""
    meta: dict[str, Any] = {}
    if choice.confidence is not None:
        meta["confidence_features"] = choice.confidence
    if choice.cv is not None:
        meta["cv"] = {"folds": choice.cv_folds, "seed": choice.seed, "voters": choice.cv}
    if choice.selection is not None:
        meta["selection"] = {"folds": choice.folds, "seed": choice.seed, "means": choice.selection}
    return meta


def _dev_meta(meta: dict[str, Any], figures: Any, metric: str) -> None:
    """The held-out figures into the weights file's meta, beside the training ones."""
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


def _run_meta(records: Path) -> dict[str, Any]:
    config = recorded_config(records)
    if config is None:
        return {}
    corpus = (config.get("corpus") or {}).get("path")
    # the file name only: no machine paths in weights files
    return {"reader": config.get("reader", {}).get("model"), "dataset": Path(corpus).name if corpus else None}


def _pool(
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
