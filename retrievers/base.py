"""The base of every eor retriever: a LangChain `BaseRetriever` whose `batch` serves a whole batch of queries
in one call where the retriever can (an encoder, the reader), with LangChain's callbacks per query.

LangChain's contract is `_get_relevant_documents(query, *, run_manager)`. A retriever that answers many
queries at once implements `_batch_relevant_documents(queries, *, run_managers)` instead (or as well): its
`batch` then opens one retriever run per query, as `invoke` would, hands every query to that one call and
closes each run with its documents or its error. Operators pass the run managers down to their children
(`child_configs`), so a member's whole tree shows up as nested runs under a caller's callbacks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, overload

from langchain_core.callbacks import CallbackManager, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_config_list
from pydantic import PrivateAttr

from eor.core.cache_policy import KeyedMemo
from eor.core.errors import RetrieverError
from retrievers import notation
from retrievers.withheld import withheld_of


class EorRetriever(BaseRetriever):
    """A LangChain retriever of eor's retriever trees.

    A subclass implements LangChain's `_get_relevant_documents(query, *, run_manager)`, or, to serve a batch
    in one call, `_batch_relevant_documents(queries, *, run_managers)` (then `_get_relevant_documents` is
    that call for one query). Batching lets the ensemble send every question of a batch to an encoder or the
    reader at once. Documents carry `metadata = {"id", "title", "source", "score"}`.
    """

    # Whether `_batch_relevant_documents` is this class's way of retrieving (set per subclass, below).
    _batches_natively: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The nearest class that defines either method decides: a subclass that overrides only
        # `_get_relevant_documents` under a batching parent retrieves query by query again.
        for klass in cls.__mro__:
            if klass is EorRetriever:
                cls._batches_natively = False
                break
            if "_batch_relevant_documents" in vars(klass):
                cls._batches_natively = True
                break
            if "_get_relevant_documents" in vars(klass):
                cls._batches_natively = False
                break

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return self._batch_relevant_documents([query], run_managers=[run_manager])[0]

    def _batch_relevant_documents(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        """The documents of every query in one call; `run_managers[i]` is the open run of `queries[i]`."""
        raise NotImplementedError(
            f"{type(self).__name__} implements neither _get_relevant_documents nor _batch_relevant_documents"
        )

    # LangChain annotates `Runnable.batch` as list[Output] whatever `return_exceptions` says; with it, the list
    # also holds exceptions, which the second overload says (hence the override).
    @overload  # type: ignore[override]
    def batch(
        self,
        inputs: list[str],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: Literal[False] = False,
        **kwargs: Any,
    ) -> list[list[Document]]: ...

    @overload
    def batch(
        self,
        inputs: list[str],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[list[Document] | Exception]: ...

    def batch(
        self,
        inputs: list[str],
        config: RunnableConfig | list[RunnableConfig] | None = None,
        *,
        return_exceptions: bool = False,
        **kwargs: Any,
    ) -> list[list[Document]] | list[list[Document] | Exception]:
        """Runnable's `batch`: one `_batch_relevant_documents` call for all inputs where the class batches
        natively, else LangChain's default (`invoke` per input, concurrently). Per-call keywords (`k=` of
        `@k`) go through `invoke`. With `return_exceptions`, a batch that raises is retried query by query, so
        each input gets its own documents or its own exception."""
        if not inputs:
            return []
        if not self._batches_natively or kwargs:
            return super().batch(inputs, config, return_exceptions=return_exceptions, **kwargs)
        queries = list(inputs)
        configs = get_config_list(config, len(queries))
        run_managers = [self._start_run(query, one) for query, one in zip(queries, configs, strict=True)]
        results: list[list[Document] | Exception]
        try:
            results = list(self._batch_relevant_documents(queries, run_managers=run_managers))
            if len(results) != len(queries):
                raise RetrieverError(f"{self.get_name()} returned {len(results)} results for {len(queries)} queries")
        except Exception as error:
            if not return_exceptions:
                for run_manager in run_managers:
                    run_manager.on_retriever_error(error)
                raise
            # One query may have broken the batch: each query alone, in its open run, so the others keep theirs.
            results = [error] if len(queries) == 1 else list(map(self._one, queries, run_managers))
        for run_manager, result in zip(run_managers, results, strict=True):
            if isinstance(result, Exception):
                run_manager.on_retriever_error(result)
            else:
                run_manager.on_retriever_end(result)
        return results

    def _start_run(self, query: str, config: RunnableConfig) -> CallbackManagerForRetrieverRun:
        """The retriever run of one query, opened as `BaseRetriever.invoke` opens it."""
        callback_manager = CallbackManager.configure(
            config.get("callbacks"),
            None,
            verbose=False,
            inheritable_tags=config.get("tags"),
            local_tags=self.tags,
            inheritable_metadata={**(config.get("metadata") or {}), **self._get_ls_params()},
            local_metadata=self.metadata,
        )
        return callback_manager.on_retriever_start(
            None, query, name=config.get("run_name") or self.get_name(), run_id=config.get("run_id")
        )

    def _one(self, query: str, run_manager: CallbackManagerForRetrieverRun) -> list[Document] | Exception:
        """One query's documents in its open run, or the exception that kept it from them."""
        try:
            return self._batch_relevant_documents([query], run_managers=[run_manager])[0]
        except Exception as error:
            return error

    def to_node(self) -> notation.Node:
        """This retriever tree as a notation tree."""
        raise NotImplementedError

    @property
    def notation(self) -> str:
        """The member name of this retriever tree in the paper's notation (canonical form)."""
        return notation.to_name(self.to_node())

    # A source may serve the paper's own meaning of `@k` and `@RR` over it (web search, appendix C.1) by
    # returning another view of itself; the pool puts what these return under the operator.

    def for_top_k(self, k: int) -> EorRetriever:
        """The retriever to put under `@k` over this source (default: itself)."""
        return self

    def for_rerank(self) -> EorRetriever:
        """The retriever to put under `@RR` over this source (default: itself)."""
        return self


def child_configs(run_managers: Sequence[CallbackManagerForRetrieverRun]) -> list[RunnableConfig]:
    """The configs under which an operator calls its child's `batch`: each query's run becomes the parent of
    the child's run for that query (tags, metadata and handlers inherited), as LangChain's own composite
    retrievers call theirs."""
    return [RunnableConfig(callbacks=run_manager.get_child()) for run_manager in run_managers]


class SourceRetriever(EorRetriever):
    """A base source (BM25, Wiki, PK, ...): remembers its results per query, so members that share the
    source (`BM25@1`, `BM25@3`, `BM25@2&Wiki@2`) run it once per question.

    A subclass implements `_retrieve_uncached(queries, *, run_managers)`: the documents of queries it has
    not answered yet, all in one call (`run_managers[i]` is the open run of `queries[i]`; a corpus source
    leaves out the passages `retrievers.withheld.withheld_of(run_managers[i])` names)."""

    source_name: str
    memo_size: int = 4096
    # Whether the source serves a query whose passages are withheld (retrievers.withheld): eor's corpus sources
    # rank past them, a source that reads no corpus has none to withhold, and each says so (True); any other
    # source refuses such a query rather than serve a withheld passage unknowingly.
    withholds: ClassVar[bool] = False
    _memo: KeyedMemo[tuple[str, tuple[str, ...]], list[Document]] = PrivateAttr(default_factory=KeyedMemo)

    def to_node(self) -> notation.Node:
        return notation.Source(self.source_name)

    def _batch_relevant_documents(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        # A query asked twice in the batch (with the same passages withheld) is retrieved once, in the run of
        # its first asking. The memo is shared by the threads of LangChain's default `batch`: each read and
        # write holds its lock.
        keys = [(query, withheld_of(run_manager)) for query, run_manager in zip(queries, run_managers, strict=True)]
        if not self.withholds and any(mask for _, mask in keys):
            raise RetrieverError(
                f"source {self.source_name!r} cannot withhold passages from a question (corpus ablation): only "
                "corpus sources (BM25, dense, hybrid over them) and sources without a corpus (PK, ReFree) can"
            )
        results = {key: kept for key in keys if (kept := self._memo.get(key)) is not None}
        missing: dict[tuple[str, tuple[str, ...]], CallbackManagerForRetrieverRun] = {}
        for key, run_manager in zip(keys, run_managers, strict=True):
            if key not in results:
                missing.setdefault(key, run_manager)
        if missing:
            found = self._retrieve_uncached([query for query, _ in missing], run_managers=list(missing.values()))
            results.update(zip(missing, found, strict=True))
            for key in missing:
                self._memo.keep(key, results[key], bound=self.memo_size)
        return [list(results[key]) for key in keys]

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        raise NotImplementedError


class NoRetrieval(SourceRetriever):
    """ReFree: the retrieval-free member reads the question alone."""

    source_name: str = "ReFree"
    withholds: ClassVar[bool] = True  # no corpus: nothing to withhold

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        return [[] for _ in queries]


def passage(
    text: str,
    *,
    id: str,
    title: str = "",
    source: str,
    score: float | None = None,
    cite: Mapping[str, Any] | None = None,
    generated: bool = False,
) -> Document:
    """A passage as a LangChain Document with eor's metadata keys (`cite`: the file and page it comes from, for a
    passage of an imported document; `generated`: written by the reader, PK's document or @CP's summary, so
    never a source to cite)."""
    metadata = {"id": id, "title": title, "source": source, "score": score, **(cite or {})}
    if generated:
        metadata["generated"] = True
    return Document(page_content=text, metadata=metadata)
