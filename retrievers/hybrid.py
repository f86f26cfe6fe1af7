"""HB — the hybrid source of the EoR paper (appendix C.1, `HB@RR@10`): the chunks of several named sources
pooled into one list for the reranker; registered as the source type ``hybrid``.

C.1: "we fetch and extract contents from all URLs returned by Google API and then split all contents as
long as the document returned by PK into chunks with an average of 100 words. We then put them with the
top-20 chunks returned by DPR and use reranking module to rerank all chunks." So HB returns, per query,
in this order: every chunk of the web source (SE's ``for_rerank()`` view: all result pages in ~100-word
chunks), the PK document in 100-word chunks, and the top 20 Wiki passages (split too, should one be
longer). HB itself is an unordered pool; it is meant to be used under ``@RR`` (``HB@RR@10``, and
``HB@RR@10@CP``). A chunk whose text is already in the pool (the same passage from two parts) is kept once,
at its first place: under ``@RR`` copies would sit side by side and fill the top k with repeats.

Configuration (``sources:`` of an eor config); ``parts`` lists source names in order, each with an
optional ``depth`` (how many of its passages to take; none = all of them)::

    HB:
      type: hybrid
      params:
        parts: [{source: SE}, {source: PK}, {source: Wiki, depth: 20}]   # the default
        chunk_words: 100

A pool that has a source named ``SE`` (and the default ``PK`` and ``Wiki``) gets this ``HB`` by default.

Offline (decision): with no web search, BM25 takes SE's place, as in ``configs/nq-offline16.yaml``:
``HBo: {type: hybrid, params: {parts: [{source: BM25}, {source: PK}, {source: Wiki, depth: 20}]}}`` —
all of BM25's results (its ``depth``, 20 by default, like "all URLs" of SE), PK's document in chunks
and the top 20 Wiki passages. It has its own name so that its results are never taken for the paper's HB.
"""

from __future__ import annotations

from typing import Any, ClassVar

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from pydantic import BaseModel, Field, PrivateAttr, ValidationError

from eor.core.errors import ConfigError, RetrieverError
from retrievers.base import EorRetriever, SourceRetriever, child_configs
from retrievers.source_type import BuildContext

DEFAULT_PARTS: tuple[dict[str, Any], ...] = ({"source": "SE"}, {"source": "PK"}, {"source": "Wiki", "depth": 20})


class HybridPart(BaseModel):
    """One input of HB: a retriever and how many of its passages to take (None = all)."""

    retriever: EorRetriever
    depth: int | None = Field(None, gt=0)


class HybridRetriever(SourceRetriever):
    """The concatenated chunks of its parts, in part order, each distinct text once. A part with a
    `for_rerank()` view (web search) contributes that view (all pages in chunks), as it would under `@RR`."""

    source_name: str = "HB"
    withholds: ClassVar[bool] = True  # its parts withhold (each run under this one's mask)
    parts: list[HybridPart]
    chunk_words: int = Field(100, gt=0)
    _inputs: list[EorRetriever] = PrivateAttr(default_factory=list)

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        if not self.parts:
            raise RetrieverError(f"hybrid source {self.source_name!r} needs at least one part")
        self._inputs = [part.retriever.for_rerank() for part in self.parts]

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        from retrievers.operators import chunk_document

        per_part = [retriever.batch(queries, child_configs(run_managers)) for retriever in self._inputs]
        results = []
        for i in range(len(queries)):
            chunks: dict[str, Document] = {}
            for part, lists in zip(self.parts, per_part, strict=True):
                taken = lists[i] if part.depth is None else lists[i][: part.depth]
                for chunk in (chunk for doc in taken for chunk in chunk_document(doc, self.chunk_words)):
                    chunks.setdefault(chunk.page_content, chunk)
            results.append(list(chunks.values()))
        return results


def build_hybrid(source: str, params: dict[str, Any], context: BuildContext) -> HybridRetriever:
    """The ``hybrid`` source type's build (retrievers.builtin_sources): ``parts`` (names of the pool's
    sources, each with an optional ``depth``) and ``chunk_words``; the parts come from ``context.lookup``."""
    parts = params.get("parts", list(DEFAULT_PARTS))
    if not isinstance(parts, list) or not parts:
        example = "[{source: SE}, {source: PK}, {source: Wiki, depth: 20}]"
        raise ConfigError(f"source {source!r}: 'parts' must be a list of sources like {example}")
    built = []
    for n, spec in enumerate(parts):
        spec = {"source": spec} if isinstance(spec, str) else spec
        if not isinstance(spec, dict) or "source" not in spec or set(spec) - {"source", "depth"}:
            raise ConfigError(f"source {source!r}: parts[{n}] must be a source name or {{source: NAME, depth: N}}")
        name = str(spec["source"])
        assert context.lookup is not None  # SourceType.create checks it: a hybrid source needs "sources"
        try:
            retriever = context.lookup(name)
        except RetrieverError as exc:
            raise ConfigError(f"source {source!r} (hybrid): part {name!r}: {exc}") from None
        try:
            built.append(HybridPart(retriever=retriever, depth=spec.get("depth")))
        except ValidationError:
            raise ConfigError(f"source {source!r}: parts[{n}].depth must be a positive integer") from None
    return HybridRetriever(source_name=source, parts=built, chunk_words=params.get("chunk_words", 100))
