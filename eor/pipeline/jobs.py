"""What an executor (eor.pipeline.executor) is asked: the `Executor` protocol and `eor run`'s `RunJob`.

Both strategies import this module: `LocalExecutor` (eor.pipeline.executor) and `RayExecutor`
(eor.pipeline.ray_executor), so neither imports the other's module for its types.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from eor.core.config import EnsembleConfig, ReaderConfig
from eor.core.results import Record
from eor.pipeline.stages.generation import GenerationStats

Answers = Iterator[tuple[list[Record], GenerationStats]]
"""Records in question order, a batch or shard at a time, each with what the generation stage did for it."""


@dataclass(frozen=True)
class RunJob:
    """The questions `eor run` still has to answer, and what answering them needs: the ensemble built in
    this process (None when the executor answers elsewhere), or what builds it elsewhere (the config, the
    weights file and the generation cache setting)."""

    config: EnsembleConfig
    weights: str | None
    cache: Any
    questions: Sequence[Any]
    batch_size: int
    ensemble: Any = None


class Executor(Protocol):
    """What `eor run`, `eor erag` and `eor utility` need from wherever the work runs."""

    answers_here: ClassVar[bool]
    """Whether `answer` uses the ensemble built in this process (`RunJob.ensemble`)."""

    summed_over: ClassVar[str | None]
    """Where the generation stats of a run were summed from, for its summary (None: this process)."""

    def answer(self, job: RunJob) -> Answers:
        """The records of `job.questions` in their order."""
        ...

    def reader(self, config: ReaderConfig) -> Any:
        """The reader of `config`, for `eor erag` and `eor utility`."""
        ...
