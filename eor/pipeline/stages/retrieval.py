"""The retrieval stage: one member's passages for a batch of questions, with that member's failures kept to
itself.

Failure policy: a member whose retrieval raises, or runs past its timeout, fails for the questions it could
not serve and for no other member. A batch that raises is retried question by question, so one bad question
costs only its own passages. A timed-out retrieval cannot be stopped (Python cannot stop a thread): it keeps
running in the background, and until it ends the member is skipped at once rather than piling up stuck
threads. Retrievals run in a copy of the caller's context, so the generations they make (PK, @CP) are
metered for the caller (eor.pipeline.stages.generation.metering).

Members retrieve through LangChain's Runnable interface (`retriever.batch(questions, config)`), so the
stage's `RunnableConfig` (callbacks, tags, metadata) reaches every retriever of every member's tree; each
member's run is named after the member unless the config names it.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import partial
from typing import Any

from langchain_core.runnables import RunnableConfig

from eor.core.errors import RetrieverError
from eor.core.faults import failpoint
from retrievers.withheld import withholding


class MemberTimeoutError(RetrieverError):
    """A member's retrieval ran past its timeout (or is still running one that did)."""


class RetrievalStage:
    """`retrieve(name, questions, timeout=None, strict=False)` → per question the member's documents, or the
    exception that kept it from them. `config`: the LangChain `RunnableConfig` every retrieval runs under."""

    def __init__(self, retrievers: Mapping[str, Any], config: RunnableConfig | None = None) -> None:
        self.retrievers = dict(retrievers)
        self.config = config
        self._abandoned: dict[str, threading.Thread] = {}  # members whose timed-out retrieval still runs

    def retrieve(
        self,
        name: str,
        questions: list[str],
        timeout: float | None = None,
        strict: bool = False,
        withheld: Sequence[Collection[str]] | None = None,
    ) -> list[list[Any] | Exception]:
        """`timeout`: seconds per question (the batch gets `timeout × len(questions)`); `strict`: raise the
        first failure instead of returning it; `withheld`: per question, the passage ids its retrieval must
        leave out (a corpus ablation, retrievers.withheld)."""
        retriever = self.retrievers[name]
        config: RunnableConfig = {"run_name": name, **(self.config or {})}
        masks = list(withheld) if withheld is not None else [()] * len(questions)
        if len(masks) != len(questions):
            raise RetrieverError(f"{len(masks)} withheld lists for {len(questions)} questions")

        def batch(rows: list[int]) -> list[list[Any]]:
            queries = [questions[i] for i in rows]
            documents = retriever.batch(queries, [withholding(config, masks[i]) for i in rows])
            failpoint("retrieval")  # tests: die with a member's passages in hand
            if len(documents) != len(queries):
                raise RetrieverError(f"returned {len(documents)} results for {len(queries)} questions")
            return [list(docs) for docs in documents]

        budget = None if timeout is None else timeout * len(questions)
        try:
            return self._guarded(name, lambda: batch(list(range(len(questions)))), budget)
        except Exception as exc:
            if strict:
                raise
            if len(questions) == 1 or isinstance(exc, MemberTimeoutError):
                return [exc] * len(questions)
        # One question may have broken the batch: retry question by question, so the others keep this member.
        results: list[list[Any] | Exception] = []
        for row in range(len(questions)):
            try:
                results.append(self._guarded(name, partial(batch, [row]), timeout)[0])
            except Exception as exc:
                results.append(exc)
        return results

    def _guarded(self, name: str, work: Callable[[], Any], timeout: float | None) -> Any:
        """`work()`, abandoned (MemberTimeoutError) when it runs past `timeout` seconds."""
        if timeout is None:
            return work()
        running = self._abandoned.get(name)
        if running is not None and running.is_alive():
            raise MemberTimeoutError("retrieval skipped: an earlier retrieval that timed out is still running")
        self._abandoned.pop(name, None)
        box: dict[str, Any] = {}
        context = contextvars.copy_context()

        def target() -> None:
            try:
                box["value"] = context.run(work)
            except BaseException as exc:  # handed to the calling thread below
                box["error"] = exc

        thread = threading.Thread(target=target, name=f"eor-retrieval-{name}", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            self._abandoned[name] = thread
            raise MemberTimeoutError(f"retrieval timed out after {timeout:g} s")
        if "error" in box:
            raise box["error"]
        return box["value"]
