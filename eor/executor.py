"""Where `eor run`, `eor erag` and `eor utility` do their work: in this process (`local`, the default), or on
a Ray cluster (`ray`, eor.ray_executor; Ray is the optional extra `eor[ray]` and is imported only then).

On Ray, `eor run` cuts the questions still to do into shards of `shard_batches` batches; Ray actors (one per
`cpus_per_worker` CPUs of the cluster, or `workers`) each load the reader and the retrievers' indexes once
and answer whole shards; the driver writes the records in question order as shards come back, so the run
folder is the one a local run writes and resumes the same way. `eor erag` and `eor utility` retrieve here
and send their prompts to reader actors. A worker that dies is restarted and its shard run again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from eor.errors import ConfigError

KINDS = ("local", "ray")


@dataclass(frozen=True)
class Executor:
    """`kind`: local or ray. For ray: `address` of the cluster (default: the environment's RAY_ADDRESS, else
    a Ray instance started on this machine), `workers` (default: the cluster's CPUs / `cpus_per_worker`),
    the CPUs and GPUs Ray reserves for each worker (a reader on a GPU: `gpus_per_worker` 1), and
    `shard_batches` (batches of questions per shard of `eor run`)."""

    kind: str = "local"
    address: str | None = None
    workers: int | None = None
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    shard_batches: int = 4

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"--executor must be one of {', '.join(KINDS)}, got {self.kind!r}")
        for name in ("workers", "shard_batches"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
        if not isinstance(self.cpus_per_worker, int | float) or self.cpus_per_worker <= 0:
            raise ConfigError(f"--cpus-per-worker must be a positive number, got {self.cpus_per_worker!r}")
        if not isinstance(self.gpus_per_worker, int | float) or self.gpus_per_worker < 0:
            raise ConfigError(f"--gpus-per-worker must be a number ≥ 0, got {self.gpus_per_worker!r}")
        if self.kind == "local" and (self.address or self.workers):
            raise ConfigError("--ray-address and --workers need --executor ray")

    @property
    def cluster(self) -> str | None:
        """The Ray address to join (None: start one here)."""
        return self.address or os.environ.get("RAY_ADDRESS") or None

    def reader(self, config: Any) -> Any:
        """The reader of a `ReaderConfig`: built here, or spread over reader actors on Ray."""
        if self.kind == "local":
            from eor.readers import build_reader

            return build_reader(config)
        from eor.ray_executor import RayReader

        return RayReader(config, self)


LOCAL = Executor()
