"""Withholding passages from one question's retrieval: the corpus ablation that makes a question whose answer the
corpus does not hold (eor.learning.ablation), applied at retrieval over indexes built once.

A question's withheld passage ids travel in the metadata of its LangChain retriever run (`WITHHELD`, set by
`withholding(config, ids)`), so every retriever of a member's tree sees them: operators pass their runs'
children configs down (retrievers.base.child_configs), and LangChain's child runs inherit their parent's
metadata. A corpus source (BM25, dense) ranks as it always does and hands out its `depth` best passages that
are not withheld (`keep`): the next-ranked ones take the withheld ones' places, so every member still gets
its k passages, and an operator above (`@k`, `&`, `@RR`, `@CP`, hybrid) never sees a withheld passage. The
ids are part of a source's per-query memo key (retrievers.base.SourceRetriever). A source that cannot withhold
(web search, a foreign LangChain retriever) refuses a non-empty mask rather than answer with fewer passages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig

#: the run-metadata key of a question's withheld passage ids (a sorted tuple of ids)
WITHHELD = "eor_withheld"
NOTHING: tuple[str, ...] = ()


def withholding(config: RunnableConfig | None, ids: Iterable[str]) -> RunnableConfig:
    """`config` with `ids` withheld from every retrieval run under it (none: `config` unchanged, a copy)."""
    given: dict[str, Any] = dict(config or {})
    mask = tuple(sorted(set(ids)))
    if mask:
        given["metadata"] = {**(given.get("metadata") or {}), WITHHELD: mask}
    return RunnableConfig(**given)  # type: ignore[typeddict-item]


def withheld_of(run_manager: CallbackManagerForRetrieverRun | None) -> tuple[str, ...]:
    """The passage ids withheld from the run's query (sorted; empty when nothing is)."""
    if run_manager is None:
        return NOTHING
    mask: Any = (run_manager.inheritable_metadata or {}).get(WITHHELD) or run_manager.metadata.get(WITHHELD)
    return tuple(mask) if mask else NOTHING


def keep(documents: Sequence[Document], withheld: Iterable[str], depth: int) -> list[Document]:
    """The first `depth` of `documents` (a ranked list) whose id is not withheld."""
    hidden = set(withheld)
    return [doc for doc in documents if doc.metadata.get("id") not in hidden][:depth]
