"""`eor run`: every member on every question of a file, in batches, appended to `records.jsonl`.

The resolved config and the pool's identity are saved beside the records (eor.runs.run_folder: the folder's
files); a re-run with the same folder skips the questions already done. `generation.json` holds what the
reader did in the latest invocation: prompts generated and read back, prompt tokens evaluated and reused,
generated tokens, and the seconds of each phase; with the questions answered and the wall seconds they took
(a pilot for eor.commands.plan_command), and `grew` when the invocation grew records (its figures then count some
members only: no pilot).

Records grow: a config that names every member of the folder's run and more runs only the members a
record lacks, on the questions already there, and adds their outputs; every recorded member's output stays
as it was, byte for byte, and the vote is taken again over all of them. A config that changes anything
behind a recorded member (eor.pipeline.pool.member_identity: the corpus, the reader, the prompts, a source's
parameters, an encoder) is refused, naming the member and the difference, and so is one that drops a
recorded member. Grown records are rewritten atomically after every batch, so an interruption loses at
most the batch in flight, and the next run picks up where it stopped.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eor.commands.judge_records import grow_by_scores
from eor.core.config import EnsembleConfig, from_dict
from eor.core.correctness import score_answer
from eor.core.data import Question, load_questions
from eor.core.errors import ConfigError, EorError, InputError
from eor.core.formatting import fixed
from eor.core.results import Record, Vote
from eor.pipeline.ensemble import Ensemble
from eor.pipeline.executor import LOCAL
from eor.pipeline.jobs import Executor, RunJob, batches
from eor.pipeline.judging import ends_with_judge
from eor.pipeline.pool import identity_differences, member_identity, pool_identity
from eor.pipeline.stages.generation import GenerationStage, GenerationStats
from eor.pipeline.stages.voting import ballots
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.generation_cache import CacheSetting, open_cache
from eor.runs.run_folder import CONFIG_FILE, POOL_FILE, RECORDS_FILE, RunFolder
from voters.loading import load_voter

log = logging.getLogger(__name__)


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
    recorded = _recorded_run(folder, config, weights)  # the config and pool the records were made with, if other
    if recorded is None:
        _save_config(folder, config, weights)
    notes: list[str] = []
    stats = GenerationStats()
    ensemble = reader = None
    if recorded is not None and _lacking_members(folder, config):
        ensemble = _growing_ensemble(folder, config, weights, cache, recorded)
        notes.append(_counted(stats, ensemble, lambda: grow_records(ensemble, folder, size)))
    elif recorded is not None:  # the same run resumed (its corpus elsewhere): checked, no index built
        reader = _resumed_reader(folder, config, weights, recorded)
    job = RunJob(_answering(config), weights, cache, questions, size, ensemble)
    answered = _answer_new(folder, job, executor, retry_failed, stats, notes)
    ensemble = answered.ensemble
    if retry_failed and ensemble is not None:
        notes.append(_counted(stats, ensemble, lambda: retry_failed_members(ensemble, folder, questions)))
    if config.judge is not None:
        if ensemble is not None:
            stage = ensemble.generation
        else:
            stage = GenerationStage(reader or build_reader(config.reader), open_cache(cache))
        notes.append(grow_by_scores(folder, config, stage, size))
        _save_config(folder, config, weights, replace=True)
    lines = [*notes, *_summary(folder, questions, answered.skipped)]
    if answered.questions or retry_failed or recorded is not None:
        store = ensemble.cache if ensemble is not None else open_cache(cache)
        lines.append(cache_summary(stats, None if store is None else store.where, executor))
        _save_generation(folder, stats, answered, grew=recorded is not None)
    return "\n".join(lines)


def _answering(config: EnsembleConfig) -> EnsembleConfig:
    """The config the questions are answered with: the recorded vote is --weights' (never the config's judge
    voter, which would score every question live only for `grow_by_scores` to score it again)."""
    if config.judge is None or config.judge.weights is None:
        return config
    return dataclasses.replace(config, judge=dataclasses.replace(config.judge, weights=None))


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
        _save_pool(folder, job.config, ensemble)
        job = dataclasses.replace(job, questions=todo, ensemble=ensemble)
        answered = executor.answer(job) if todo else iter(())
        started = time.perf_counter()
        with tqdm(total=len(todo) + skipped, initial=skipped, desc="questions", unit="q") as progress:
            for records, used in answered:
                writer.write(records)
                stats.add(used)
                progress.update(len(records))
        return _Answered(ensemble, len(todo), skipped, time.perf_counter() - started)


def _counted(stats: GenerationStats, ensemble: Any, work: Callable[[], str]) -> str:
    """What `work` says, once what the ensemble's reader did meanwhile is added to `stats`."""
    before = dataclasses.replace(ensemble.generation.stats)
    said = work()
    stats.add(ensemble.generation.stats.since(before))
    return said


def _summary(folder: RunFolder, questions: list[Question], skipped: int) -> list[str]:
    """The questions recorded, each member's exact match and the vote's, and the members that failed."""
    wanted = {q.id for q in questions}
    records = [record for record in folder.read_records() if record.id in wanted]
    lines = [f"{len(records)} questions in {folder.file(RECORDS_FILE)} ({skipped} were already done)"]
    return lines + exact_match_summary(records) + failed_summary(records)


def _save_generation(folder: RunFolder, stats: GenerationStats, answered: _Answered, *, grew: bool) -> None:
    """What the reader did in this invocation, with the questions answered and their wall seconds: a pilot for
    eor.commands.plan_command, unless the invocation `grew` records (some members on recorded questions: not the
    pool)."""
    done: dict[str, Any] = {"questions": answered.questions, "wall_seconds": round(answered.wall_seconds, 3)}
    if grew:
        done["grew"] = True
    folder.write_generation({**stats.to_dict(), **done})


def _resolved(config: EnsembleConfig, weights: str | None) -> dict[str, Any]:
    return {**config.to_dict(), "weights": str(Path(weights).resolve()) if weights else None}


def _save_config(folder: RunFolder, config: EnsembleConfig, weights: str | None, *, replace: bool = False) -> None:
    """The run's resolved config in the folder; a folder that holds a run of another config is refused (unless
    `replace`: records that grew by the config's new members)."""
    resolved = _resolved(config, weights)
    if not replace and folder.has(CONFIG_FILE) and not same_run_config(folder.read_config(), resolved):
        saved = folder.file(CONFIG_FILE)
        raise InputError(f"{folder.path} holds a run of a different config; choose another --out or remove {saved}")
    folder.write_config(resolved)


@dataclasses.dataclass
class RecordedRun:
    """What a run folder's records were made with: its config (as saved) and its pool's identity."""

    config: EnsembleConfig
    pool: dict[str, Any]


def _recorded_run(folder: RunFolder, config: EnsembleConfig, weights: str | None) -> RecordedRun | None:
    """The folder's recorded run when its records may grow by this config's members, else None (a new folder,
    or a resumed run of the same config whose records hold every member).

    Records grow when this config names more members than the recorded run, or the same config's growth was
    interrupted (some record still lacks a member). A config of the same members that differs only in where
    its corpus lies (records unpacked from a packed file name the corpus file alone) or in its name resumes
    them once their identity is checked. Any other change is refused, as is growing records without the config and pool
    they were made with (nothing would show that their members are this config's)."""
    out, saved = folder.path, folder.file(CONFIG_FILE)
    members = set(config.members)
    if not folder.has(CONFIG_FILE):
        if any(set(r.members) | set(r.degraded) != members for r in folder.iter_records()):
            raise InputError(
                f"{out} holds records of other members and no {CONFIG_FILE}: unpack packed records with "
                f"`eor records unpack FILE --out {out}`, which keeps the config and pool they were made with"
            )
        return None
    data = folder.read_config()
    lacking = any(members - set(r.members) - set(r.degraded) for r in folder.iter_records())
    same = same_run_config(data, _resolved(config, weights))
    if same and not lacking:
        return None
    data = dict(data)
    data.pop("weights", None)
    try:
        recorded = from_dict(EnsembleConfig, data, str(saved))
    except ConfigError as exc:
        raise InputError(f"{out} holds a run of a config this eor cannot read ({exc}); choose another --out") from None
    grows = members > set(recorded.members)
    if members - set(recorded.members) and not grows:  # new members, but some recorded ones left out
        dropped = ", ".join(name for name in recorded.members if name not in members)
        raise InputError(
            f"{out} holds a run of a different config: the records hold member(s) {dropped} that this config "
            "lacks; records grow by members, so name every recorded member in the config, or choose another --out"
        )
    if not (grows or (same and lacking) or _same_but_corpus_path(recorded, config)):
        raise InputError(f"{out} holds a run of a different config; choose another --out or remove {saved}")
    if not folder.has(POOL_FILE):
        raise InputError(f"{out} has no {POOL_FILE}: the identity of its records' pool is unknown, so they cannot grow")
    return RecordedRun(recorded, folder.read_pool())


def _same_but_corpus_path(recorded: EnsembleConfig, config: EnsembleConfig) -> bool:
    """Whether two configs are the same but for the folder of their corpus file (its identity is checked) and
    their name (a label: nothing a record holds depends on it)."""

    def normalised(one: EnsembleConfig) -> dict[str, Any]:
        data = one.to_dict()
        data.pop("name")
        data.pop("judge", None)  # scores grow the records of the same run (eor.commands.judge_records)
        if data.get("corpus") and data["corpus"].get("path"):
            data["corpus"]["path"] = Path(data["corpus"]["path"]).name
        return data

    return normalised(recorded) == normalised(config)


def _growing_ensemble(
    folder: RunFolder, config: EnsembleConfig, weights: str | None, cache: CacheSetting, recorded: RecordedRun
) -> Ensemble:
    """The ensemble that grows the folder's records, once `check_growth` passed; the folder's config and pool
    become this config's before any record grows (records packed mid-way name the grown pool)."""
    reader = build_reader(config.reader)  # loads its model on first use: the check fails before any index builds
    check_growth(recorded, config, pool_identity(config, reader))
    ensemble = Ensemble.from_config(config, weights=weights, cache=cache, reader=reader, validated=True)
    _save_config(folder, config, weights, replace=True)
    _save_pool(folder, config, ensemble)
    return ensemble


def _lacking_members(folder: RunFolder, config: EnsembleConfig) -> bool:
    """Whether some record lacks a member of the config (neither answered nor failed)."""
    return any(set(config.members) - set(r.members) - set(r.degraded) for r in folder.iter_records())


def _resumed_reader(folder: RunFolder, config: EnsembleConfig, weights: str | None, recorded: RecordedRun) -> Any:
    """The reader of a recorded run resumed with nothing to grow, once `check_growth` passed; the folder's
    config and pool become this config's."""
    reader = build_reader(config.reader)
    pool = pool_identity(config, reader)
    check_growth(recorded, config, pool)
    _save_config(folder, config, weights, replace=True)
    folder.write_pool(pool)
    return reader


def check_growth(recorded: RecordedRun, config: EnsembleConfig, pool: dict[str, Any]) -> None:
    """InputError unless `config` keeps every recorded member as it was made (eor.pipeline.pool.member_identity)."""
    dropped = [name for name in recorded.config.members if name not in config.members]
    if dropped:
        raise InputError(
            f"the records hold member(s) {', '.join(dropped)} that this config lacks: records grow by members, "
            "so name every recorded member in the config (and choose a pool from the records with --members)"
        )
    made = dict(recorded.pool)
    if made.get("reader") == recorded.config.reader.model != pool.get("reader"):
        # pool.json written without a built reader (a Ray run, or one with nothing to answer) names the model alone
        log.warning(
            "the records name their reader by its model alone (%s); taken as %s", made["reader"], pool["reader"]
        )
        made["reader"] = pool.get("reader")
    for name in recorded.config.members:
        found = identity_differences(member_identity(recorded.config, name, made), member_identity(config, name, pool))
        if found:
            raise InputError(
                f"member {name} of the records was made differently from this config's: {'; '.join(found)}. "
                "Records grow only by new members over the same corpus, reader, prompts and sources: run this "
                "config into another --out"
            )


def grow_records(ensemble: Any, folder: RunFolder, batch_size: int) -> str:
    """Answer, on every recorded question, only the ensemble's members its record lacks (neither answered nor
    failed), `batch_size` questions at a time; merge them into the record in the ensemble's order, vote again
    over all of its members and rewrite the records atomically after each batch."""
    from tqdm.auto import tqdm

    records = folder.read_records()
    lacking: dict[tuple[str, ...], list[Record]] = defaultdict(list)
    for record in records:
        missing = tuple(name for name in ensemble.members if name not in record.members and name not in record.degraded)
        if missing:
            lacking[missing].append(record)
    count = sum(len(group) for group in lacking.values())
    if not count:
        return f"the records hold every member of the config ({len(records)} questions)"
    added = 0
    with tqdm(total=count, desc="growing records", unit="q") as progress:
        for missing, group in lacking.items():
            for batch in batches(group, batch_size):
                for record, result in zip(batch, _answer_missing(ensemble, batch, list(missing)), strict=True):
                    added += len(result.members) if result is not None else 0
                    _merge(ensemble, record, result, missing)
                folder.replace_records(records)
                progress.update(len(batch))
    new = sorted({name for missing in lacking for name in missing}, key=ensemble.members.index)
    return f"grew {count} records by {len(new)} member(s) ({', '.join(new)}): {added} member answers added"


def _answer_missing(ensemble: Any, batch: list[Record], missing: list[str]) -> list[Any]:
    """The results of the missing members on a batch of records' questions; question by question when every
    missing member failed on one of them (None for that question)."""
    # the record's own fields go with its question: an ablated copy's `withheld` passages stay withheld
    questions = [Question(record.id, record.question, record.answers, dict(record.extra)) for record in batch]
    try:
        return ensemble.answer_batch(questions, members=missing, lazy=False)
    except EorError as exc:
        if len(batch) == 1:
            log.warning("%s", str(exc).splitlines()[0])  # the reason, once per question
            return [None]
    return [_answer_missing(ensemble, [record], missing)[0] for record in batch]


def _merge(ensemble: Any, record: Record, result: Any, missing: tuple[str, ...]) -> None:
    """The new members' outputs (or failures) into `record`, in the ensemble's order, and the vote again."""
    if result is None:
        record.degraded.update({name: "every new member failed on this question" for name in missing})
        return
    members = {**record.members, **result.members}
    record.members = {name: members[name] for name in ensemble.members if name in members}
    record.degraded.update(result.degraded)
    decision = ensemble.voting.vote([ballots(record.members)], [record.question])[0]
    record.vote = Vote(decision.member, record.members[decision.member].answer, decision.scores)


def _save_pool(folder: RunFolder, config: EnsembleConfig, ensemble: Any) -> None:
    """The pool's identity beside the records (eor.pipeline.pool): `eor train` records it in the weights file."""

    if ensemble is None and folder.has(POOL_FILE):  # keep the reader identity a built ensemble wrote
        return
    folder.write_pool(pool_identity(config, ensemble.reader if ensemble is not None else None))


def failed_summary(records: list[Record]) -> list[str]:
    """Per member that failed somewhere: on how many questions, and the first reason; then how to retry."""
    failures: dict[str, list[str]] = defaultdict(list)
    for record in records:
        for name, reason in record.degraded.items():
            failures[name].append(reason)
    if not failures:
        return []
    lines = ["members that failed (left out of those questions' votes):"]
    lines += [f"  {name:<24} {len(reasons):>5} questions; e.g. {reasons[0]}" for name, reasons in failures.items()]
    lines.append("re-run only these with the same command and --retry-failed")
    return lines


def retry_failed_members(ensemble: Any, folder: RunFolder, questions: list[Any]) -> str:
    """Run again, on each question whose record names failed members, only those members; merge the ones
    that answer now into the record (in the pool's order), vote again over all of its members, and rewrite
    the records atomically. Members that fail again stay in `degraded` with their new reason."""

    by_id = {question.id: question for question in questions}
    records = folder.read_records()
    retried = recovered = 0
    for record in records:
        failed = [name for name in record.degraded if name in ensemble.members]
        if not failed or record.id not in by_id:
            continue
        retried += 1
        try:
            result = ensemble.answer_batch([by_id[record.id]], members=failed, lazy=False)[0]
        except EorError as exc:  # every one of them failed again: the record stays as it was
            log.warning("%s", str(exc).splitlines()[0])
            continue
        recovered += len(result.members)
        members = {**record.members, **result.members}
        record.members = {name: members[name] for name in ensemble.members if name in members}
        decision = ensemble.voting.vote([ballots(record.members)], [record.question])[0]
        record.vote = Vote(decision.member, record.members[decision.member].answer, decision.scores)
        record.degraded = dict(result.degraded)
    if retried:
        folder.replace_records(records)
    return f"retried the failed members of {retried} questions: {recovered} member answers recovered"


def same_run_config(saved: Any, resolved: dict[str, Any]) -> bool:
    """Whether a run folder's saved config is this run's. Both are read through the config schema first, so a
    field that a newer eor added with its default (a run begun before an upgrade) does not count as a change."""
    if saved == resolved:
        return True
    if not isinstance(saved, dict):
        return False
    saved = dict(saved)
    saved.pop("judge", None)  # scores grow the records of the same run (eor.commands.judge_records)
    resolved = {key: value for key, value in resolved.items() if key != "judge"}
    weights = saved.pop("weights", None)
    try:
        normalised = from_dict(EnsembleConfig, saved, CONFIG_FILE).to_dict()
    except ConfigError:  # written by another version with keys this one lacks: not provably the same
        return False
    return {**normalised, "weights": weights} == resolved


def cache_summary(stats: GenerationStats, cache_where: str | None, executor: Executor = LOCAL) -> str:
    """What the generation stage did over the run: prompts read back from the cache and generated, with the
    reader's prompt and generated tokens, seconds and rates (on Ray: summed over the workers)."""
    where = "generation cache: off" if cache_where is None else f"generation cache {cache_where}"
    workers = "" if executor.summed_over is None else f" (summed over {executor.summed_over})"
    lines = [f"{where}: {stats.cache_hits} prompts read back, {stats.generated} generated{workers}"]
    if stats.prompt_tokens or stats.generated_tokens:
        lines.append(
            f"reader: {stats.prompt_tokens} prompt tokens in {fixed(stats.prompt_seconds, 1)} s"
            f" ({_rate(stats.prompt_tokens, stats.prompt_seconds)}; {stats.reused_tokens} more kept from the prompt"
            f" before), {stats.generated_tokens} generated tokens in"
            f" {fixed(stats.generation_seconds, 1)} s ({_rate(stats.generated_tokens, stats.generation_seconds)});"
            f" {fixed(stats.seconds, 1)} s in all"
        )
    return "\n".join(lines)


def _rate(tokens: int, seconds: float) -> str:
    return f"{fixed(tokens / seconds, 0)} tokens/s" if seconds > 0 else "rate unknown"


def exact_match_summary(records: list[Record]) -> list[str]:
    """Each member's exact match, and the vote's, over the records that have gold answers."""
    graded = [record for record in records if record.answers]
    if not graded:
        return []
    correct: dict[str, float] = defaultdict(float)
    for record in graded:
        for name, output in record.members.items():
            correct[name] += score_answer("em", output.answer, record.answers)
        if record.vote is not None:
            correct["EoR (vote)"] += score_answer("em", record.vote.answer, record.answers)
    lines = [f"exact match over {len(graded)} questions with answers:"]
    return lines + [f"  {name:<24} {fixed(100 * value / len(graded), 1):>5}" for name, value in correct.items()]
