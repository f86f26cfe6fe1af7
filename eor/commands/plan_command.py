"""`eor plan`: what a benchmark will cost the reader. Questions × (prompt and generated tokens per question) →
reader seconds at a given throughput, and the wall time on a number of reader replicas (docs/scale.md). The
cost model is eor.runs.costs (the rates, the formula); this module reads the pilot, sums and prints.

A pilot run (`eor run` on a few questions) gives everything measured on the user's own pool and hardware:
its `generation.json` holds the prompt tokens the reader evaluated and the tokens it generated, with the
seconds of each phase, and the run's wall seconds. Then, for Q questions on R replicas:

    reader seconds = Q × (P / prompt_rate + G / generation_rate)      (eor.runs.costs.reader_seconds)
    wall seconds   = reader seconds × overhead / R

where P and G are the pilot's tokens per question, the rates are the pilot's (eor.runs.costs.measured_rates)
or those of the target hardware (e.g. a vLLM server's measured throughput) and `overhead` is the pilot's wall
seconds over its reader seconds (retrieval, encoders, voting, loading: what is not the reader).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from eor.core.errors import InputError
from eor.core.formatting import fixed
from eor.runs.costs import measured_rates, reader_seconds
from eor.runs.run_folder import GENERATION_FILE, RunFolder


@dataclass(frozen=True)
class Pilot:
    """Per question: prompt tokens evaluated and tokens generated; the reader's rates (tokens/s); overhead."""

    questions: int
    prompt_tokens: float
    generated_tokens: float
    prompt_rate: float
    generation_rate: float
    overhead: float = 1.0

    def __post_init__(self) -> None:
        for name in ("questions", "prompt_rate", "generation_rate", "overhead"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value <= 0:
                raise InputError(f"the cost model needs a positive {name}, got {value!r}")

    @classmethod
    def from_run(cls, folder: str | Path) -> Pilot:
        """The pilot of a run folder written by `eor run` (its records and generation.json)."""

        run = RunFolder(Path(folder))
        file = run.file(GENERATION_FILE)
        if not file.is_file():
            raise InputError(f"{file} not found: a pilot is a folder written by `eor run` (without --no-cache hits)")
        stats = run.read_generation()
        if stats.get("grew"):
            raise InputError(
                f"{file}: the latest `eor run` of this folder grew its records by new members, so its figures are "
                "theirs alone: a pilot is the whole pool run on a few questions into a new folder"
            )
        if stats.get("retried") or stats.get("questions") == 0:  # (a retry alone wrote 0 before `retried` was)
            raise InputError(
                f"{file}: the latest `eor run` of this folder retried failed members, so its figures count their "
                "prompts too: a pilot is the whole pool run on a few questions into a new folder"
            )
        questions = stats.get("questions") or len(run.read_records())  # a file written before it counted them
        try:
            rates = measured_rates(stats)
        except InputError as error:
            raise InputError(f"{file}: {error}") from None
        reader = stats["prompt_seconds"] + stats["generation_seconds"]
        return cls(
            questions=questions,
            prompt_tokens=stats["prompt_tokens"] / questions,
            generated_tokens=stats["generated_tokens"] / questions,
            prompt_rate=rates["prompt"],
            generation_rate=rates["generated"],
            overhead=stats["wall_seconds"] / reader if stats.get("wall_seconds") else 1.0,
        )


def estimate(
    pilot: Pilot,
    questions: int,
    *,
    replicas: int = 1,
    prompt_rate: float | None = None,
    generation_rate: float | None = None,
) -> dict[str, Any]:
    """Reader seconds and wall seconds (and hours) for `questions` on `replicas`, at the pilot's rates or
    those given."""
    if questions < 1 or replicas < 1:
        raise InputError("the estimate needs at least one question and one replica")
    prompt_rate = prompt_rate or pilot.prompt_rate
    generation_rate = generation_rate or pilot.generation_rate
    rates = {"prompt": prompt_rate, "generated": generation_rate}
    seconds = reader_seconds(questions * pilot.prompt_tokens, questions * pilot.generated_tokens, rates)
    wall_seconds = seconds * pilot.overhead / replicas
    return {
        "questions": questions,
        "replicas": replicas,
        "prompt_tokens": round(questions * pilot.prompt_tokens),
        "generated_tokens": round(questions * pilot.generated_tokens),
        "prompt_rate": prompt_rate,
        "generation_rate": generation_rate,
        "reader_seconds": seconds,
        "reader_hours": seconds / 3600,
        "wall_seconds": wall_seconds,
        "wall_hours": wall_seconds / 3600,
        "pilot": asdict(pilot),
    }


def describe(estimate_: dict[str, Any]) -> str:
    e, p = estimate_, estimate_["pilot"]
    return "\n".join(
        [
            f"pilot: {p['questions']} questions; per question {fixed(p['prompt_tokens'], 0)} prompt tokens and "
            f"{fixed(p['generated_tokens'], 0)} generated tokens; wall / reader time {fixed(p['overhead'], 2)}",
            f"{e['questions']} questions: {e['prompt_tokens']:,} prompt tokens at {fixed(e['prompt_rate'], 0)} "
            f"tokens/s and {e['generated_tokens']:,} generated tokens at {fixed(e['generation_rate'], 1)} tokens/s",
            f"reader time {fixed(e['reader_hours'], 2)} h; wall time on {e['replicas']} replica(s) "
            f"{fixed(e['wall_hours'], 2)} h ({fixed(e['wall_seconds'], 0)} s)",
        ]
    )
