"""The one check of a config, `validate`: every mistake a config can hold that shows without loading a model
fails at once, before anything heavy loads, as a ConfigError whose message starts with the value's YAML path
and lists the valid choices (the rule of eor.core.errors). `load_config` has checked the file's keys, types and
ranges; `validate` checks what its values name:

- `members[i]`: valid notation (every `@WORD` a registered operator), only sources the config has (its
  `sources:` and the defaults), and only a prompt variant it has;
- `sources.NAME.type`: a registered source type (retrievers.registry.SOURCE_TYPES);
- `voter`: registered similarity metrics and pooling, and `metric_params` for those metrics only;
- `prompts`: the answer style, and the placeholders of every template and of each variant's worked examples
  (eor.core.prompts.templates_for);
- `reader.backend`: a registered backend, with no option of another backend (`auto` is resolved from the
  model's files when the reader is built);
- `judge`: a registered span rule, members of the config and what it answers after (`members` or `cascade`);
  its weights file is read, before the reader loads, only where the judge answers (`eor run` records and
  `eor train --voter judge` trains without it: voters.loading.choose_voter through eor.pipeline.ensemble.config_voter).

A config is validated once, at its door, before any model loads; nothing past a door validates it again.
A command's door is where it reads its config file, `load_valid_config` (eor ask, run, serve, retrieve,
design, erag, utility, bench --config, and train's `--config` in `train`, `train_judge` and
`train_judge_cascade`); Python's doors are `Ensemble(config)`, `Ensemble.from_config` and `create_app(config)`,
which a door that validated already tells so (`validated=True`). Every call goes through this module's
`validate`. Members named on a command line (`eor retrieve --members`, `eor erag --member`) are checked as
the config's are (`check_member`).

What needs a loaded object is checked where it loads: a source's parameters when the source is built, a
weights file's members when it is read, `voter.risk` against the voter's thresholds (`check_config_risk`);
and a member timeout is asked at run time (`check_timeout`, an InputError).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eor.core.config import JUDGE_AFTER, EnsembleConfig, ReaderConfig, VoterConfig, load_config
from eor.core.errors import ConfigError, InputError, RetrieverError
from eor.core.prompts import check_variant, templates_for
from eor.readers import check_backend
from retrievers import notation
from retrievers.registry import SOURCE_TYPES, source_names
from voters.candidates import span_rules
from voters.voter_params import check_metric_names, check_pooling_name


def validate(config: EnsembleConfig) -> None:
    """ConfigError for the first mistake of `config` that shows without loading a model, naming the value's
    YAML path and the valid choices (see the module's docstring)."""
    _check_members(config)
    _check_source_types(config)
    _check_voter(config.voter)
    for variant in (None, *config.prompts.variants):
        templates_for(config, variant)  # its errors name prompts.KEY or prompts.variants.NAME.KEY
    _check_reader(config.reader)
    _check_judge(config)


def load_valid_config(path: str | Path) -> EnsembleConfig:
    """A command's door: the config of the file at `path` (eor.core.config.load_config), validated."""
    config = load_config(path)
    validate(config)
    return config


@contextmanager
def located(where: str) -> Iterator[None]:
    """A mistake found inside the block, as a ConfigError whose message starts with `where`: the value's
    YAML path, or the command-line flag that set it."""
    try:
        yield
    except (ConfigError, RetrieverError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _check_members(config: EnsembleConfig) -> None:
    for i, member in enumerate(config.members):
        check_member(config, member, f"members[{i}]")


def check_member(config: EnsembleConfig, member: str, where: str) -> None:
    """ConfigError starting with `where` (a YAML path, or the flag that named the member) unless `member` is
    valid notation over `config`'s sources, with only a prompt variant it has."""
    with located(where):
        tree = notation.parse(member)  # the notation's own message names the member
    known = source_names(config.sources)
    unknown = sorted(notation.sources(tree) - known)
    if unknown:
        raise ConfigError(
            f"{where} {member!r}: unknown source(s) {', '.join(unknown)}; available: {', '.join(sorted(known))}"
        )
    variant = notation.variant_of(tree)
    if variant is not None:
        with located(f"{where} {member!r}"):
            check_variant(config.prompts, variant)


def _check_source_types(config: EnsembleConfig) -> None:
    for name, source in config.sources.items():
        if source.type not in SOURCE_TYPES:
            raise ConfigError(
                f"sources.{name}.type: unknown source type {source.type!r}; available: {', '.join(SOURCE_TYPES)}"
            )


def _check_voter(voter: VoterConfig) -> None:
    with located("voter.metrics"):
        check_metric_names(voter.metrics)
    with located("voter.pooling"):
        check_pooling_name(voter.pooling, search=False)  # a config's voter votes; it is not fitted
    voter.resolved_metric_params()  # ConfigError naming voter.metric_params for a metric not in voter.metrics


def _check_reader(reader: ReaderConfig) -> None:
    if reader.backend != "auto":
        check_backend(reader, reader.backend)


def check_config_risk(answering: Any, risk: float | None) -> None:
    """The config's `voter.risk` needs the thresholds of what answers (`answering.check_risk`: the ensemble's):
    a ConfigError at start, not at the first answer."""
    try:
        answering.check_risk(risk)
    except InputError as exc:
        raise ConfigError(f"voter.risk: {exc}") from None


def check_timeout(value: float | None) -> float | None:
    """A member timeout: a positive number of seconds, or None (InputError otherwise)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InputError(f"member_timeout must be a positive number of seconds or None, got {value!r}")
    return float(value)


def _check_judge(config: EnsembleConfig) -> None:
    judge = config.judge
    if judge is None:
        return
    if judge.rule is not None and judge.rule not in span_rules():
        raise ConfigError(
            f"judge.rule: unknown span rule {judge.rule!r}; choose one of {', '.join(span_rules())}, or null for "
            "the members' answers alone"
        )
    unknown = [name for name in judge.members or [] if name not in config.members]
    if unknown or judge.members == []:
        raise ConfigError(
            f"judge.members: {', '.join(unknown) or 'none named'}: name members of the config "
            f"({', '.join(config.members)}), or leave it out for all of them"
        )
    if judge.after not in JUDGE_AFTER:
        raise ConfigError(f"judge.after: {judge.after!r} is not one of {', '.join(JUDGE_AFTER)}")
