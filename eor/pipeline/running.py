"""Running members: what the answering strategies (eor.pipeline.answering) ask of an ensemble, and no more.

`MemberRunner` retrieves for named members (batched per source, eor.pipeline.stages.retrieval), reads their
documents (one generation call per batch, eor.pipeline.stages.reading), and keeps each member's expected
seconds per question (`RunningCosts`) so lazy voting can run the cheapest first. `Clock` times each stage.
The ensemble builds one runner; the strategies see the runner and the vote stage, never the ensemble.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from eor.core.data import Question
from eor.core.results import MemberOutput
from eor.pipeline.stages.failures import Failures
from eor.pipeline.stages.generation import metering
from eor.pipeline.stages.reading import ReadingStage, RetrievalCost
from eor.pipeline.stages.retrieval import RetrievalStage
from eor.runs.costs import running_mean


class Clock:
    """Seconds per stage: `with clock("retrieval"): ...` adds the block's wall time to that stage."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {"retrieval": 0.0, "generation": 0.0, "voting": 0.0}

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - started


class RunningCosts:
    """Each member's expected seconds per question: as measured in this process (eor.runs.costs.running_mean),
    else `prior(name)` (eor.runs.costs.expected_seconds: the voter's training records, else the member's
    notation)."""

    def __init__(self, prior: Callable[[str], float]) -> None:
        self.prior = prior
        self.measured: dict[str, float] = {}

    def __call__(self, name: str) -> float:
        measured = self.measured.get(name)
        return measured if measured is not None else self.prior(name)

    def learn(self, outputs: list[dict[str, MemberOutput]]) -> None:
        """Fold each member's measured seconds into its running cost."""
        for output in outputs:
            for name, member in output.items():
                if member.seconds is None:
                    continue
                self.measured[name] = running_mean(self.measured.get(name), member.seconds)


class MemberRunner:
    """Members' retrieval and reading, on a batch (`retrieve`, then `read`) or on one question (`run_one`),
    and their running costs (`cost`, `learn_costs`)."""

    def __init__(self, retrieval: RetrievalStage, reading: ReadingStage, costs: RunningCosts) -> None:
        self.retrieval = retrieval
        self.reading = reading
        self.costs = costs

    def retrieve(
        self, names: list[str], items: list[Question], timeout: float | None, strict: bool, failures: Failures
    ) -> tuple[dict[tuple[str, int], list[Any]], dict[str, RetrievalCost]]:
        """Per (member, question index) the member's documents, members first (a member that failed on a
        question has no entry, its reason in `failures`), and what each member's retrieval cost per question of
        the batch (seconds; the reader's work for PK's and @CP's documents). A question's `withheld` passages
        (a corpus ablation) reach no member."""
        documents: dict[tuple[str, int], list[Any]] = {}
        spent: dict[str, RetrievalCost] = {}
        texts = [item.question for item in items]
        withheld = [item.withheld for item in items]
        for name in names:
            tick = time.perf_counter()
            with metering() as usage:
                results = self.retrieval.retrieve(name, texts, timeout, strict, withheld)
            spent[name] = RetrievalCost((time.perf_counter() - tick) / len(texts), usage, len(texts))
            for i, result in enumerate(results):
                if isinstance(result, Exception):
                    failures.fail(i, name, result, "retrieval")
                else:
                    documents[name, i] = result
        return documents, spent

    def read(
        self,
        documents: dict[tuple[str, int], list[Any]],
        texts: list[str],
        spent: dict[str, RetrievalCost],
        failures: Failures,
        strict: bool,
    ) -> list[dict[str, MemberOutput]]:
        """Per question, each member's output from its documents (eor.pipeline.stages.reading)."""
        return self.reading.read(documents, texts, spent, failures, strict)

    def run_one(
        self,
        name: str,
        item: Question,
        timeout: float | None,
        strict: bool,
        failed: dict[str, str],
        outputs: dict[str, MemberOutput],
        clock: Clock,
    ) -> None:
        """One member on one question: its output into `outputs`, or its failure into `failed`."""
        failures = Failures([failed])
        with clock("retrieval"):
            documents, spent = self.retrieve([name], [item], timeout, strict, failures)
        with clock("generation"):
            outputs.update(self.read(documents, [item.question], spent, failures, strict)[0])

    def cost(self, name: str) -> float:
        """A member's expected seconds per question (`RunningCosts`)."""
        return self.costs(name)

    def learn_costs(self, outputs: list[dict[str, MemberOutput]]) -> None:
        """Fold each member's measured seconds into its running cost."""
        self.costs.learn(outputs)
