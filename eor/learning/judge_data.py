"""The judge voter trained from run records (`trained_judge`, what `eor train --voter judge` runs; the policy of
each choice is eor.learning.judge_training's), and its data: which judge scored the records (`judge_identity`,
`scored_rule`), the members trained on, the questions the corpus cannot answer (`load_unanswerable`) and the held-out
ones (`held_out`), each judged as the training records were; and what the weights file keeps of how the voter was
trained (`training_meta`, `beyond_meta`, `top_r`, `held_out_meta`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.config import JudgeConfig
from eor.core.correctness import members_right
from eor.core.data import ABLATED_FROM
from eor.core.errors import ConfigError, InputError
from eor.core.formatting import small_data_warning
from eor.evaluation.upper_bound import top_member
from eor.learning.beyond_corpus import ABLATED, NOCORPUS
from eor.learning.judge_training import (
    FitReport,
    JudgedQuestion,
    Unanswerable,
    accuracy,
    judged_questions,
    train_judge_voter,
)
from eor.learning.trained import Trained
from eor.pipeline.abstention import DEFAULT_SHARE
from eor.pipeline.judging import judged_members
from eor.pipeline.members import demonstration_ids
from eor.pipeline.pool import runs_pool
from eor.pipeline.validation import load_valid_config
from eor.runs.records import read_records
from eor.runs.run_data import named_runs, read_runs, run_paths
from eor.runs.run_folder import recorded_config
from voters.judge_selector import JudgeVoter

log = logging.getLogger(__name__)


@dataclass
class TrainedJudge(Trained):
    """What `trained_judge` gives back: the judge voter and its weights file's meta, each fit's report (how its
    setting was chosen, eor.learning.judge_training.FitReport), the questions the corpus cannot answer it was
    trained with (None: none), and how many training questions there were and the reader scored."""

    reports: list[FitReport]
    beyond: Unanswerable | None
    questions: int
    scored: int


def trained_judge(
    records: Path | Sequence[Path],
    *,
    pool_config: Path | None = None,
    members: list[str] | None = None,
    folds: int = 5,
    seed: int = 0,
    dev: Path | None = None,
    ablated: Path | Sequence[Path] | None = None,
    nocorpus: Path | None = None,
    share: float = DEFAULT_SHARE,
    retrieval: bool | None = None,
) -> TrainedJudge:
    """The judge voter trained on `records` (several runs: read as one, their pools the same; members: `members`,
    else the pool config's, else those the records' scores were made for), with what its weights file records.
    `ablated`, `nocorpus`: records of questions the corpus cannot answer (ablated copies of training questions;
    real ones), for P(right) beyond the corpus and thresholds for a mix with `share` of them
    (eor.learning.judge_training.fit_beyond). `retrieval`: whether P(right) reads the retrieved passages'
    relevance (None: beyond the corpus, as cross-validation on training chose, docs/abstention.md). `dev`: held-out
    records, scored into `meta.dev`."""
    relevance = (ablated is not None or nocorpus is not None) if retrieval is None else retrieval
    config = None if pool_config is None else load_valid_config(pool_config)  # the door
    runs = run_paths(records)
    source = ", ".join(map(str, runs))
    pool = runs_pool(runs)  # before any work: runs of different pools are refused
    loaded = [record for record in read_runs(runs) if record.answers]
    identity = judge_identity(loaded, source)
    names = trained_members(config, members, identity, loaded, runs)
    skip = demonstration_ids(config) if config is not None else set()
    rule_k = scored_rule(identity)
    questions = judged_questions([r for r in loaded if r.id not in skip], names, *rule_k, relevance=relevance)
    if warning := small_data_warning(len(questions), "training the judge voter"):
        log.warning(warning)
    beyond = load_unanswerable(ablated, nocorpus, names, rule_k, skip, share, relevance)
    voter, reports = train_judge_voter(
        questions, names, k=folds, seed=seed, progress=log.info, beyond=beyond, retrieval=relevance
    )
    scored = sum(bool(q.features.scored) for q in questions)
    rule, k = rule_k
    meta: dict[str, Any] = {
        "records": named_runs(runs),
        **({} if beyond is None else beyond_meta(ablated, nocorpus, share)),
        "judge": identity,
        "candidates": {"rule": rule, "k": k},  # what live answering must make them with (eor.pipeline.judging)
        "training": training_meta(len(questions), scored, folds, seed, reports),
        "top_r_train": top_r(loaded, names),
        **({} if pool is None else {"pool": pool}),
    }
    if dev is not None:
        meta["dev"] = held_out_meta(voter, held_out(dev, source, identity, names, rule_k, relevance))
    return TrainedJudge(voter, meta, reports, beyond, len(questions), scored)


def held_out_meta(voter: JudgeVoter, questions: list[JudgedQuestion]) -> dict[str, Any]:
    """The voter on held-out questions, as its weights file keeps it: their number, its EM, and how many each fit
    answered."""
    hits: list[float] = []
    used: dict[str, int] = {}
    for question in questions:
        choice, fit = voter.choose(question.features)
        hits.append(accuracy([question], [choice])[0])
        used[fit.label] = used.get(fit.label, 0) + 1
    return {"questions": len(questions), "em": float(np.mean(hits)) if hits else 0.0, "fits": used}


def judge_identity(records: list[Any], source: Any) -> dict[str, Any] | None:
    """The identity of the scores the records hold (eor.pipeline.judging); None when no record is scored.
    Records scored by different judges are refused; records scored with and without each passage alone are one
    judge's (each fit trains on the questions holding its level, eor.learning.judge_training `holding`), and the
    identity then says `passages: true`."""
    found = [r.judge["identity"] for r in records if r.judge]
    judges = {repr(sorted(judge_of(identity).items())) for identity in found}
    if len(judges) > 1:
        raise InputError(f"{source}: the records were scored by {len(judges)} different judges; train on one")
    if not found:
        return None
    levels = {bool(identity.get("passages")) for identity in found}
    return found[0] if len(levels) == 1 else {**found[0], "passages": True}


def judge_of(identity: dict[str, Any]) -> dict[str, Any]:
    """What makes the scores one judge's: the identity less whether each passage alone was scored too."""
    return {key: value for key, value in identity.items() if key != "passages"}


def scored_rule(identity: dict[str, Any] | None) -> tuple[str | None, int]:
    """The span rule (None: the members' answers alone) and K of the candidates: the scored records', else
    JudgeConfig's defaults (for unscored questions, made from their text)."""
    if identity is None:
        defaults = JudgeConfig()
        return defaults.rule, defaults.k
    rule = identity.get("rule")
    return (None if rule is None else str(rule)), int(identity["k"])


def trained_members(
    config: Any, members: list[str] | None, identity: dict[str, Any] | None, records: list[Any], runs: list[Path]
) -> list[str]:
    """The members trained on: `members`, else the pool config's (its judged members), else those the records'
    scores were made for; ConfigError when the scores were made for others."""
    weighed = None if config is None else (config.members if config.judge is None else judged_members(config))
    names = members or weighed or _recorded_members(identity, records, runs[0])
    scored_for = (identity or {}).get("members")
    if scored_for is not None and sorted(scored_for) != sorted(names):
        raise ConfigError(
            f"{', '.join(map(str, runs))}: the records were scored for members {', '.join(scored_for)}; training "
            f"asks for {', '.join(names)}"
        )
    return names


def _recorded_members(identity: dict[str, Any] | None, records: list[Any], source: Path) -> list[str]:
    if identity is not None and identity.get("members"):
        return list(identity["members"])
    config = recorded_config(source)
    if config is not None and config.get("members"):
        return list(config["members"])
    if records:
        return list(records[0].members)
    raise ConfigError(f"{source}: no record to train on")


def load_unanswerable(
    ablated: Path | Sequence[Path] | None,
    nocorpus: Path | None,
    names: list[str],
    rule_k: tuple[str | None, int],
    skip: set[str],
    share: float,
    relevance: bool = False,
) -> Unanswerable | None:
    """The questions the corpus cannot answer of `ablated` and `nocorpus` (None: neither given), judged with the
    training records' candidates (`relevance`: with their retrieved passages' relevance); a question made from a
    worked example of the pool (`skip`) is left out."""
    if ablated is None and nocorpus is None:
        return None
    questions, kinds, origins = [], [], []
    for kind, path in ((ABLATED, ablated), (NOCORPUS, nocorpus)):
        if path is None:
            continue
        runs = run_paths(path)
        source = ", ".join(map(str, runs))
        loaded = [r for r in read_runs(runs) if r.answers and not {r.id, r.extra.get(ABLATED_FROM)} & skip]
        identity = judge_identity(loaded, source)
        if identity is None:
            raise InputError(f"{source}: no record holds the judge's scores (eor run with a judge: section)")
        if (identity.get("rule"), identity.get("k")) != rule_k or sorted(identity.get("members") or []) != sorted(
            names
        ):
            raise InputError(f"{source}: scored by another judge's candidates or members ({identity})")
        judged = judged_questions(loaded, names, *rule_k, relevance=relevance)
        questions += judged
        kinds += [kind] * len(judged)
        by_id = {r.id: str(r.extra.get(ABLATED_FROM) or r.id) for r in loaded}
        origins += [by_id[q.id] for q in judged]
    return Unanswerable(questions, np.array(kinds, dtype=object), origins, share)


def held_out(
    dev: Path,
    source: str,
    identity: dict[str, Any] | None,
    names: list[str],
    rule_k: tuple[str | None, int],
    relevance: bool,
) -> list[JudgedQuestion]:
    """The held-out questions of `dev`, judged as the training records (of `source`) were (InputError: another
    judge's)."""
    held = [record for record in read_records(dev) if record.answers]
    other = judge_identity(held, dev)
    if other is not None and identity is not None and judge_of(other) != judge_of(identity):
        raise InputError(f"{dev} was scored by another judge than {source}: {other} against {identity}")
    return judged_questions(held, names, *rule_k, relevance=relevance)


def top_r(records: list[Any], members: list[str]) -> dict[str, Any]:
    """The member best on the training records by exact match (ties: the first), and its EM."""
    right = members_right(records, members)
    best = top_member(right)
    return {"member": members[best], "em": float(right[:, best].mean())}


def training_meta(questions: int, scored: int, folds: int, seed: int, reports: list[Any]) -> dict[str, Any]:
    """How the judge voter was trained, as its weights file keeps it: the questions (and those scored), the folds
    and seed of every choice, and each level's chosen setting with every setting's EM out of fold."""
    levels = {r.level: {"chosen": r.chosen, "em": r.table} for r in reports}
    return {"questions": questions, "scored": scored, "folds": folds, "seed": seed, "levels": levels}


def beyond_meta(ablated: Path | Sequence[Path] | None, nocorpus: Path | None, share: float) -> dict[str, Any]:
    """The records of questions the corpus cannot answer P(right) was fitted with, as the file keeps them."""
    return {
        "ablated_records": ablated and named_runs(run_paths(ablated)),
        "nocorpus_records": nocorpus and str(nocorpus),
        "unanswerable_share": share,
    }
