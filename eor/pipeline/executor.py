"""Where `eor run`, `eor erag` and `eor utility` do their work: the `Executor` strategy.

An executor does two things: it answers the questions of `eor run` (a `RunJob`), yielding their records in
question order with what the reader did for them, and it gives `eor erag` and `eor utility` a reader.
`LocalExecutor` (the default) does both in this process; `RayExecutor` (eor.pipeline.ray_executor; Ray is the
optional extra `eor[ray]` and is imported only then) answers shards of questions on ensemble actors and
generates prompts on reader actors. Both answer questions with the one batching loop,
`Ensemble.answer_records`. `build_executor` is the one place that maps `--executor` to a strategy. What
every executor is asked (`Executor`, a `RunJob`) is eor.pipeline.jobs's, which both strategies import.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from eor.core.config import ReaderConfig
from eor.core.errors import ConfigError
from eor.pipeline.jobs import Answers, Executor, RunJob
from eor.readers import build_reader

KINDS = ("local", "ray")


@dataclass(frozen=True)
class LocalExecutor:
    """Everything in this process: the run's ensemble answers its questions batch by batch."""

    answers_here: ClassVar[bool] = True
    summed_over: ClassVar[str | None] = None

    def answer(self, job: RunJob) -> Answers:
        return job.ensemble.answer_records(job.questions, job.batch_size, job.left_out)

    def reader(self, config: ReaderConfig) -> Any:
        return build_reader(config)


LOCAL = LocalExecutor()


def build_executor(kind: str = "local", **options: Any) -> Executor:
    """The executor `--executor KIND` names. `options` are those of `RayExecutor` (address, workers,
    cpus_per_worker, gpus_per_worker, shard_batches); the local executor takes none of the cluster's."""
    if kind == "local":
        if options.get("address") or options.get("workers"):
            raise ConfigError("--ray-address and --workers need --executor ray")
        return LOCAL
    if kind == "ray":
        from eor.pipeline.ray_executor import RayExecutor  # imports Ray, the optional extra

        return RayExecutor(**options)
    raise ConfigError(f"--executor must be one of {', '.join(KINDS)}, got {kind!r}")
