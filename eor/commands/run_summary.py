"""What `eor run` prints when it is done (eor.commands.runner): the questions recorded, each member's exact match
and the vote's, the members that failed and how to retry them, and what the reader and the generation cache did.
"""

from __future__ import annotations

from collections import defaultdict

from eor.core.correctness import score_answer
from eor.core.data import Question
from eor.core.formatting import fixed
from eor.core.results import Record
from eor.pipeline.executor import LOCAL
from eor.pipeline.jobs import Executor
from eor.pipeline.stages.generation import GenerationStats
from eor.runs.run_folder import RECORDS_FILE, UNANSWERED_FILE, RunFolder


def records_summary(folder: RunFolder, questions: list[Question], skipped: int) -> list[str]:
    """The questions recorded, each member's exact match and the vote's, and the members that failed."""
    wanted = {q.id for q in questions}
    records = [record for record in folder.read_records() if record.id in wanted]
    lines = [f"{len(records)} questions in {folder.file(RECORDS_FILE)} ({skipped} were already done)"]
    unanswered = [qid for qid in folder.read_unanswered() if qid in wanted]
    if unanswered:
        lines.append(
            f"{len(unanswered)} question{'s' if len(unanswered) != 1 else ''} not recorded: no member answered "
            f"(why: {folder.file(UNANSWERED_FILE)}); the same command tries again"
        )
    return lines + exact_match_summary(records) + failed_summary(records)


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
