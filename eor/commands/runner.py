"""`eor run`: every member on every question of a file, in batches, appended to `records.jsonl`.

The resolved config and the pool's identity are saved beside the records (eor.runs.run_folder: the folder's
files); a re-run with the same folder skips the questions already done. `generation.json` holds what the
reader did in the latest invocation: prompts generated and read back, prompt tokens evaluated and reused,
generated tokens, and the seconds of each phase; with the questions answered and the wall seconds they took
(a pilot for eor.commands.plan_command), and `grew` when the invocation grew records (its figures then count some
members only: no pilot).

Records grow by members (eor.commands.run_growth), once eor.commands.run_identity has said the config may grow
them; records of a run with a `judge:` section grow by the judge's scores (eor.commands.judge_records); what is
printed at the end is eor.commands.run_summary's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eor.commands.judge_records import grow_by_scores
from eor.commands.run_growth import (
    answering_config,
    grow_records,
    growing_ensemble,
    resumed_reader,
    retry_failed_members,
    save_pool,
)
from eor.commands.run_identity import lacking_members, recorded_run, save_config
from eor.commands.run_summary import cache_summary, records_summary
from eor.core.data import load_questions
from eor.core.errors import ConfigError, InputError
from eor.pipeline.ensemble import Ensemble
from eor.pipeline.executor import LOCAL
from eor.pipeline.jobs import Executor, RunJob
from eor.pipeline.stages.failures import LeftOut
from eor.pipeline.stages.generation import GenerationStage, GenerationStats
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.generation_cache import CacheSetting, open_cache
from eor.runs.run_folder import RunFolder
from voters.judge_step import ends_with_judge
from voters.loading import load_voter


def run(
    config_path: Path,
    data: Path,
    out: Path,
    limit: int | None = None,
    batch_size: int | None = None,
    weights: str | None = None,
    cache: CacheSetting = True,
    retry_failed: bool = False,
    executor: Executor = LOCAL,
) -> str:
    """`cache`: the generation cache (see `Ensemble`); the records are the same with or without it, apart
    from the timings. `retry_failed`: afterwards, run again only the members that failed on a question
    (`degraded` in its record), merge what they answer now and vote again (see `retry_failed_members`);
    this runs here, whatever the executor. `executor`: where the questions are answered (eor.pipeline.executor)."""
    config = load_valid_config(config_path)  # the door: the ensembles below are built with validated=True
    config.voter.weights = None  # the recorded vote is --weights' (uniform without), never the config's default
    if config.judge is not None:
        config.judge.after = "members"  # records hold every member's answer: no cascade's steps come first
    if weights is not None and ends_with_judge(load_voter(weights)) is not None:
        raise ConfigError(
            f"{weights} is a cascade whose last step is the judge: it answers live (eor ask, eor serve) and is "
            "replayed by eor bench --config; eor run records every member, with another voter's vote"
        )
    questions = load_questions(data, limit=limit)
    size = config.batch_size if batch_size is None else batch_size
    if size < 1:
        raise InputError(f"--batch-size must be at least 1, got {size}")
    folder = RunFolder(out)
    with folder.writing():  # one writer a folder: a second eor run into it is refused at once
        recorded = recorded_run(folder, config, weights)  # the config and pool the records were made with, if other
        if recorded is None:
            save_config(folder, config, weights)
        notes: list[str] = []
        stats = GenerationStats()
        ensemble = reader = None
        if recorded is not None and lacking_members(folder, config):
            ensemble = growing_ensemble(folder, config, weights, cache, recorded)
            notes.append(_counted(stats, ensemble, lambda: grow_records(ensemble, folder, size)))
        elif recorded is not None:  # the same run resumed (its corpus elsewhere): checked, no index built
            reader = resumed_reader(folder, config, weights, recorded)
        job = RunJob(answering_config(config), weights, cache, questions, size, ensemble)
        answered = _answer_new(folder, job, executor, retry_failed, stats, notes)
        ensemble = answered.ensemble
        if retry_failed and ensemble is not None:
            notes.append(_counted(stats, ensemble, lambda: retry_failed_members(ensemble, folder, questions, size)))
        if config.judge is not None:  # the judge's scores grown into the records (eor.commands.judge_records)
            stage = ensemble.generation if ensemble is not None else _generation(config, reader, cache)
            notes.append(grow_by_scores(folder, config, stage, size))
            save_config(folder, config, weights, replace=True)
        lines = [*notes, *records_summary(folder, questions, answered.skipped)]
        if answered.questions or retry_failed or recorded is not None:
            store = ensemble.cache if ensemble is not None else open_cache(cache)
            lines.append(cache_summary(stats, None if store is None else store.where, executor))
            _save_generation(folder, stats, answered, grew=recorded is not None, retried=retry_failed)
        return "\n".join(lines)


def _generation(config: Any, reader: Any, cache: CacheSetting) -> GenerationStage:
    """The generation stage of a run that built no ensemble here: the resumed run's reader, or one built now."""
    return GenerationStage(reader or build_reader(config.reader), open_cache(cache))


@dataclasses.dataclass(frozen=True)
class _Answered:
    """What answering the questions the records lacked did: the ensemble built in this process (None when
    the executor answered elsewhere), the questions answered and those already recorded, the wall seconds."""

    ensemble: Any
    questions: int
    skipped: int
    wall_seconds: float


def _answer_new(
    folder: RunFolder, job: RunJob, executor: Executor, retry_failed: bool, stats: GenerationStats, notes: list[str]
) -> _Answered:
    """Answer those of `job.questions` the records lack and append each batch as it comes (what the reader
    did goes to `stats`); the ensemble is built here when this process answers, or retries failed members."""
    from tqdm.auto import tqdm

    with folder.record_writer() as writer:
        if writer.repaired_bytes:
            notes.append(
                f"repaired: cut a torn last line ({writer.repaired_bytes} bytes) that an interrupted write left in "
                f"{writer.path}; its question runs again"
            )
        todo = [q for q in job.questions if q.id not in writer.done_ids]
        skipped = len(job.questions) - len(todo)
        if todo:
            folder.note_stretch(len(writer.done_ids))
        ensemble = job.ensemble
        if ensemble is None and (retry_failed or (todo and executor.answers_here)):
            ensemble = Ensemble.from_config(job.config, weights=job.weights, cache=job.cache, validated=True)
        save_pool(folder, job.config, ensemble)
        known = folder.read_unanswered()
        job = dataclasses.replace(job, questions=todo, ensemble=ensemble, left_out=LeftOut(known))
        answered = executor.answer(job) if todo else iter(())
        started = time.perf_counter()
        try:
            with tqdm(total=len(todo) + skipped, initial=skipped, desc="questions", unit="q") as progress:
                left_before = 0
                for records, used in answered:
                    writer.write(records)
                    stats.add(used)
                    left_now = len(job.left_out.reasons)  # a question left out is done with too
                    progress.update(len(records) + left_now - left_before)
                    left_before = left_now
        finally:  # those left out named for the next run (its stop does not count them), those recorded dropped
            if known or job.left_out.reasons:
                left = {**known, **job.left_out.reasons}
                folder.write_unanswered({qid: why for qid, why in left.items() if qid not in writer.done_ids})
        return _Answered(ensemble, len(todo), skipped, time.perf_counter() - started)


def _counted(stats: GenerationStats, ensemble: Any, work: Callable[[], str]) -> str:
    """What `work` says, once what the ensemble's reader did meanwhile is added to `stats`."""
    before = dataclasses.replace(ensemble.generation.stats)
    said = work()
    stats.add(ensemble.generation.stats.since(before))
    return said


def _save_generation(
    folder: RunFolder, stats: GenerationStats, answered: _Answered, *, grew: bool, retried: bool
) -> None:
    """What the reader did in this invocation, with the questions answered and their wall seconds: a pilot for
    eor.commands.plan_command, unless the invocation `grew` records (some members on recorded questions: not the
    pool) or `retried` failed members (their prompts are counted with the new questions')."""
    done: dict[str, Any] = {"questions": answered.questions, "wall_seconds": round(answered.wall_seconds, 3)}
    if grew:
        done["grew"] = True
    if retried:
        done["retried"] = True
    folder.write_generation({**stats.to_dict(), **done})
