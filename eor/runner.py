"""`eor run`: every member on every question of a file, in batches, appended to `records.jsonl`.

The resolved config is saved beside the records; a re-run with the same folder skips the questions
already done, and refuses a folder that holds a run of a different config. `generation.json` holds what the
reader did in the latest invocation: prompts generated and read back, prompt tokens evaluated and reused,
generated tokens, and the seconds of each phase; with the questions answered and the wall seconds they took
(a pilot for eor.cost_model).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from eor.config import EnsembleConfig, from_dict, load_config
from eor.correctness import score_answer
from eor.data import load_questions
from eor.ensemble import Ensemble
from eor.errors import ConfigError, EorError, InputError
from eor.executor import LOCAL, Executor, RunJob
from eor.generation_cache import CacheSetting, open_cache
from eor.pool import POOL_FILE, pool_identity
from eor.records import RecordWriter, read_records, replace_records
from eor.results import Record, Vote
from eor.stages.generation import GenerationStats
from eor.stages.voting import ballots

CONFIG_FILE = "config.json"
GENERATION_FILE = "generation.json"  # what the reader did in the latest invocation (GenerationStats)


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
    this runs here, whatever the executor. `executor`: where the questions are answered (eor.executor)."""
    from tqdm.auto import tqdm

    config = load_config(config_path)
    config.voter.weights = None  # the recorded vote is --weights' (uniform without), never the config's default
    questions = load_questions(data, limit=limit)
    size = config.batch_size if batch_size is None else batch_size
    if size < 1:
        raise InputError(f"--batch-size must be at least 1, got {size}")
    _save_config(out, config, weights)
    notes: list[str] = []
    with RecordWriter(out) as writer:
        if writer.repaired_bytes:
            notes.append(
                f"repaired: cut a torn last line ({writer.repaired_bytes} bytes) that an interrupted write left in "
                f"{writer.path}; its question runs again"
            )
        todo = [q for q in questions if q.id not in writer.done_ids]
        skipped = len(questions) - len(todo)
        ensemble = None
        if retry_failed or (todo and executor.answers_here):
            ensemble = Ensemble.from_config(config, weights=weights, cache=cache)
        _save_pool(out, config, ensemble)
        answered = executor.answer(RunJob(config, weights, cache, todo, size, ensemble)) if todo else iter(())
        stats = GenerationStats()
        started = time.perf_counter()
        with tqdm(total=len(questions), initial=skipped, desc="questions", unit="q") as progress:
            for records, used in answered:
                writer.write(records)
                stats.add(used)
                progress.update(len(records))
        wall_seconds = time.perf_counter() - started

    if retry_failed and ensemble is not None:
        before = dataclasses.replace(ensemble.generation.stats)
        notes.append(retry_failed_members(ensemble, out, questions))
        stats.add(ensemble.generation.stats.since(before))
    wanted = {q.id for q in questions}
    records = [record for record in read_records(out) if record.id in wanted]
    lines = [*notes, f"{len(records)} questions in {out / 'records.jsonl'} ({skipped} were already done)"]
    lines += exact_match_summary(records)
    lines += failed_summary(records)
    if todo or retry_failed:
        store = ensemble.cache if ensemble is not None else open_cache(cache)
        lines.append(cache_summary(stats, None if store is None else store.where, executor))
        done = {"questions": len(todo), "wall_seconds": round(wall_seconds, 3)}  # eor.cost_model reads these
        (out / GENERATION_FILE).write_text(json.dumps({**stats.to_dict(), **done}, indent=2))
    return "\n".join(lines)


def _save_config(out: Path, config: EnsembleConfig, weights: str | None) -> None:
    """The run's resolved config in `out`; a folder that holds a run of another config is refused."""
    resolved = {**config.to_dict(), "weights": str(Path(weights).resolve()) if weights else None}
    out.mkdir(parents=True, exist_ok=True)
    saved = out / CONFIG_FILE
    if saved.exists() and not same_run_config(json.loads(saved.read_text()), resolved):
        raise InputError(f"{out} holds a run of a different config; choose another --out or remove {saved}")
    saved.write_text(json.dumps(resolved, indent=2))


def _save_pool(out: Path, config: EnsembleConfig, ensemble: Any) -> None:
    """The pool's identity beside the records (eor.pool): `eor train` records it in the weights file."""

    if ensemble is None and (out / POOL_FILE).exists():  # keep the reader identity a built ensemble wrote
        return
    identity = pool_identity(config, ensemble.reader if ensemble is not None else None)
    (out / POOL_FILE).write_text(json.dumps(identity, indent=2) + "\n", encoding="utf-8")


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


def retry_failed_members(ensemble: Any, out: Path, questions: list[Any]) -> str:
    """Run again, on each question whose record names failed members, only those members; merge the ones
    that answer now into the record (in the pool's order), vote again over all of its members, and rewrite
    the records atomically. Members that fail again stay in `degraded` with their new reason."""

    by_id = {question.id: question for question in questions}
    records = read_records(out)
    retried = recovered = 0
    for record in records:
        failed = [name for name in record.degraded if name in ensemble.members]
        if not failed or record.id not in by_id:
            continue
        retried += 1
        try:
            result = ensemble.answer_batch([by_id[record.id]], members=failed, lazy=False)[0]
        except EorError:  # every one of them failed again: the record stays as it was
            continue
        recovered += len(result.members)
        members = {**record.members, **result.members}
        record.members = {name: members[name] for name in ensemble.members if name in members}
        decision = ensemble.voting.vote([ballots(record.members)], [record.question])[0]
        record.vote = Vote(decision.member, record.members[decision.member].answer, decision.scores)
        record.degraded = dict(result.degraded)
    if retried:
        replace_records(out, records)
    return f"retried the failed members of {retried} questions: {recovered} member answers recovered"


def same_run_config(saved: Any, resolved: dict[str, Any]) -> bool:
    """Whether a run folder's saved config is this run's. Both are read through the config schema first, so a
    field that a newer eor added with its default (a run begun before an upgrade) does not count as a change."""
    if saved == resolved:
        return True
    if not isinstance(saved, dict):
        return False
    saved = dict(saved)
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
            f"reader: {stats.prompt_tokens} prompt tokens in {stats.prompt_seconds:.1f} s"
            f" ({_rate(stats.prompt_tokens, stats.prompt_seconds)}; {stats.reused_tokens} more kept from the prompt"
            f" before), {stats.generated_tokens} generated tokens in"
            f" {stats.generation_seconds:.1f} s ({_rate(stats.generated_tokens, stats.generation_seconds)});"
            f" {stats.seconds:.1f} s in all"
        )
    return "\n".join(lines)


def _rate(tokens: int, seconds: float) -> str:
    return f"{tokens / seconds:.0f} tokens/s" if seconds > 0 else "rate unknown"


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
    return lines + [f"  {name:<24} {100 * value / len(graded):5.1f}" for name, value in correct.items()]
