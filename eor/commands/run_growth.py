"""Records that grow, for `eor run` (eor.commands.runner): a config that names every member of the folder's run and
more runs only the members a record lacks, on the questions already there, and adds their outputs; every recorded
member's output stays as it was, byte for byte, and the vote is taken again over all of them. Grown records are
rewritten atomically after every batch, so an interruption loses at most the batch in flight, and the next run
picks up where it stopped. `--retry-failed` runs again the members that failed on a question, merged and voted
again the same way, the records rewritten after every batch as well.
Whether a config may grow the records is eor.commands.run_identity's to say.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from typing import Any

from eor.commands.run_identity import RecordedRun, check_growth, save_config
from eor.core.config import EnsembleConfig
from eor.core.data import Question
from eor.core.errors import EorError, InputError
from eor.core.results import Record, Vote
from eor.pipeline.ensemble import Ensemble
from eor.pipeline.jobs import batches
from eor.pipeline.pool import differences, pool_identity
from eor.pipeline.stages.voting import ballots
from eor.readers import build_reader
from eor.runs.generation_cache import CacheSetting
from eor.runs.run_folder import POOL_FILE, RunFolder

log = logging.getLogger(__name__)


def answering_config(config: EnsembleConfig) -> EnsembleConfig:
    """The config the questions are answered with: the recorded vote is --weights' (never the config's judge
    voter, which would score every question live only for `grow_by_scores` to score it again)."""
    if config.judge is None or config.judge.weights is None:
        return config
    return dataclasses.replace(config, judge=dataclasses.replace(config.judge, weights=None))


def growing_ensemble(
    folder: RunFolder, config: EnsembleConfig, weights: str | None, cache: CacheSetting, recorded: RecordedRun
) -> Ensemble:
    """The ensemble that grows the folder's records, once `check_growth` passed; the folder's config and pool
    become this config's before any record grows (records packed mid-way name the grown pool)."""
    reader = build_reader(config.reader)  # loads its model on first use: the check fails before any index builds
    check_growth(recorded, config, pool_identity(config, reader))
    answering = answering_config(config)
    ensemble = Ensemble.from_config(answering, weights=weights, cache=cache, reader=reader, validated=True)
    save_config(folder, config, weights, replace=True)
    save_pool(folder, config, ensemble)
    return ensemble


def resumed_reader(folder: RunFolder, config: EnsembleConfig, weights: str | None, recorded: RecordedRun) -> Any:
    """The reader of a recorded run resumed with nothing to grow, once `check_growth` passed; the folder's
    config and pool become this config's."""
    reader = build_reader(config.reader)
    pool = pool_identity(config, reader)
    check_growth(recorded, config, pool)
    save_config(folder, config, weights, replace=True)
    folder.write_pool(pool)
    return reader


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
    record.degraded.update(result.degraded)
    _vote_again(ensemble, record, result)


def _vote_again(ensemble: Any, record: Record, result: Any) -> None:
    """`result`'s member outputs merged into `record`'s, in the ensemble's order, and the vote taken again over
    all of them."""
    members = {**record.members, **result.members}
    record.members = {name: members[name] for name in ensemble.members if name in members}
    decision = ensemble.voting.vote([ballots(record.members)], [record.question])[0]
    record.vote = Vote(decision.member, record.members[decision.member].answer, decision.scores)


def save_pool(folder: RunFolder, config: EnsembleConfig, ensemble: Any) -> None:
    """The pool's identity beside the records (eor.pipeline.pool): `eor train` records it in the weights file.
    Records answered by another pool (another reader, model file or corpus) are never resumed by this one: their
    pool would then be said of records it did not make (InputError, before any question is answered)."""
    if ensemble is None and folder.has(POOL_FILE):  # keep the reader identity a built ensemble wrote
        return
    identity = pool_identity(config, ensemble.reader if ensemble is not None else None)
    if folder.has(POOL_FILE) and folder.records_file() is not None:
        found = differences(folder.read_pool(), identity)
        if found:
            raise InputError(
                f"{folder.path} holds records answered by another pool ({'; '.join(found)}): resume them with the "
                "pool that made them, or answer into another --out"
            )
    folder.write_pool(identity)


def retry_failed_members(ensemble: Any, folder: RunFolder, questions: list[Any], size: int) -> str:
    """Run again, on each question whose record names failed members, only those members; merge the ones
    that answer now into the record (in the pool's order), vote again over all of its members, and rewrite
    the records atomically after every `size` questions retried (each question a reader call of its own), so an
    interruption loses at most those in flight. Members that fail again stay in `degraded` with their new reason."""
    from tqdm.auto import tqdm

    by_id = {question.id: question for question in questions}
    records = folder.read_records()
    todo = [r for r in records if r.id in by_id and any(name in ensemble.members for name in r.degraded)]
    if not todo:
        return "retried the failed members of 0 questions: nothing failed"
    recovered = 0
    with tqdm(total=len(todo), desc="retrying failed members", unit="q") as progress:
        for batch in batches(todo, size):
            for record in batch:
                recovered += _retried(ensemble, record, by_id[record.id])
                progress.update(1)
            folder.replace_records(records)
    return f"retried the failed members of {len(todo)} questions: {recovered} member answers recovered"


def _retried(ensemble: Any, record: Record, question: Question) -> int:
    """`record`'s failed members run again on `question`: those that answer merged in and the vote taken again;
    how many answered (0, the record as it was, when all failed again)."""
    failed = [name for name in record.degraded if name in ensemble.members]
    try:
        result = ensemble.answer_batch([question], members=failed, lazy=False)[0]
    except EorError as exc:  # every one of them failed again: the record stays as it was
        log.warning("%s", str(exc).splitlines()[0])
        return 0
    _vote_again(ensemble, record, result)
    kept = {name: why for name, why in record.degraded.items() if name not in failed}
    record.degraded = {**kept, **result.degraded}
    return len(result.members)
