"""What an executor (eor.pipeline.executor) is asked: the `Executor` protocol, `eor run`'s `RunJob`, and
`batches`, the one batching loop (questions a batch at a time).

Both strategies import this module: `LocalExecutor` (eor.pipeline.executor) and `RayExecutor`
(eor.pipeline.ray_executor), so neither imports the other's module for its types.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeVar

from eor.core.config import EnsembleConfig, ReaderConfig
from eor.core.results import Record
from eor.pipeline.stages.failures import LeftOut
from eor.pipeline.stages.generation import GenerationStats

Answers = Iterator[tuple[list[Record], GenerationStats]]
"""Records in question order, a batch or shard at a time, each with what the generation stage did for it."""

T = TypeVar("T")


def batches(items: Sequence[T], size: int) -> Iterator[list[T]]:
    """The one batching loop: `items` in order, `size` at a time (the last batch may hold fewer). Questions
    go through it wherever they are answered or retrieved a batch at a time: `Ensemble.answer_records` (`eor
    run`, in this process or on a Ray worker), Ray's shards, the records that grow by members or by the judge's
    scores, the retrieval of `eor erag` and `eor utility`, and their reader calls (eor.evaluation.erag.generators, a
    batch of questions' prompts a call)."""
    for start in range(0, len(items), size):
        yield list(items[start : start + size])


@dataclass(frozen=True)
class RunJob:
    """The questions `eor run` still has to answer, and what answering them needs: the ensemble built in
    this process (None when the executor answers elsewhere), or what builds it elsewhere (the config, the
    weights file and the generation cache setting); `left_out`: the questions no member answered, filled as
    they come (eor.pipeline.stages.failures.LeftOut)."""

    config: EnsembleConfig
    weights: str | None
    cache: Any
    questions: Sequence[Any]
    batch_size: int
    ensemble: Any = None
    left_out: LeftOut = field(default_factory=LeftOut)


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
