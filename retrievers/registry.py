"""The source-type registry (eor.core.registry: name -> SourceType) and the pool that builds members' retriever
trees from the notation.

The types are eor's own (retrievers.builtin_sources) and those other packages declare under the entry
point group `eor.sources` (each entry point names a `retrievers.source_type.SourceType`), or that Python
code registers with `register_source_type`. A `SourcePool` creates each named base source once, so members
that share a source share its index and its per-query results.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from langchain_core.retrievers import BaseRetriever

from eor.core.errors import ConfigError, RetrieverError
from eor.core.registry import Registry
from retrievers import notation
from retrievers.adapters import LangChainSource
from retrievers.base import EorRetriever
from retrievers.builtin_sources import SOURCE_TYPES as BUILTIN_SOURCE_TYPES
from retrievers.operator_type import operator_types
from retrievers.source_type import BuildContext, SourceType

__all__ = ["BuildContext", "SourcePool", "SourceType", "register_source_type", "source_names", "source_types"]

SOURCE_TYPES: Registry[SourceType] = Registry("source type", group="eor.sources", accept=SourceType)
for _kind in BUILTIN_SOURCE_TYPES:
    SOURCE_TYPES.register(_kind.name, _kind)


def register_source_type(kind: SourceType, *, replace: bool = False) -> SourceType:
    """Make `kind` available as `type: <kind.name>` in configs (a taken name needs `replace=True`)."""
    if not isinstance(kind, SourceType):
        raise ConfigError(f"a source type must be a retrievers.source_type.SourceType, got {type(kind).__name__}")
    return SOURCE_TYPES.register(kind.name, kind, replace=replace)


def source_types() -> dict[str, SourceType]:
    """Every source type: eor's, those registered in Python, then those of installed packages (entry
    points `eor.sources`)."""
    return dict(SOURCE_TYPES.items())


# The base sources every config has unless it redefines them.
DEFAULT_SOURCES: dict[str, tuple[str, dict[str, Any]]] = {
    "BM25": ("bm25", {}),
    "Wiki": ("dense", {}),
    "PK": ("parametric", {}),
    "ReFree": ("none", {}),
}

# HB (appendix C.1: SE chunks + PK chunks + top-20 Wiki, for HB@RR@10): a default source of every pool
# that has all of these sources (in practice: one that defines SE). See retrievers/hybrid.py.
DEFAULT_HYBRID: tuple[str, tuple[str, dict[str, Any]], tuple[str, ...]] = ("HB", ("hybrid", {}), ("SE", "PK", "Wiki"))


def source_names(sources: dict[str, Any] | None = None) -> set[str]:
    """The source names a `SourcePool` over these configured sources has (defaults included)."""
    names = set(DEFAULT_SOURCES) | set(sources or {})
    hybrid, _, needs = DEFAULT_HYBRID
    return names | {hybrid} if set(needs) <= names else names


class SourcePool:
    """Named base sources, each built on first use and shared by every member that names it."""

    def __init__(self, context: BuildContext, sources: dict[str, tuple[str, dict[str, Any]]] | None = None):
        self.context = context
        self.specs = {**DEFAULT_SOURCES, **(sources or {})}
        hybrid, spec, needs = DEFAULT_HYBRID
        if hybrid not in self.specs and all(name in self.specs for name in needs):
            self.specs[hybrid] = spec
        self._built: dict[str, EorRetriever] = {}
        self._building: list[str] = []
        self.types = source_types()
        for name, (kind, _) in self.specs.items():
            if kind not in self.types:
                raise ConfigError(f"source {name!r}: unknown type {kind!r}; valid: {', '.join(sorted(self.types))}")

    def add(self, name: str, retriever: BaseRetriever) -> None:
        """Use an existing retriever object (eor's or any LangChain retriever) as the source `name`."""
        if not isinstance(retriever, EorRetriever):
            retriever = LangChainSource(source_name=name, retriever=retriever)
        self._built[name] = retriever
        self.specs.setdefault(name, ("object", {}))

    def source(self, name: str) -> EorRetriever:
        if name not in self._built:
            if name not in self.specs:
                raise RetrieverError(f"unknown source {name!r}; available: {', '.join(sorted(self.specs))}")
            if name in self._building:
                cycle = " -> ".join([*self._building[self._building.index(name) :], name])
                raise RetrieverError(f"source {name!r} is built from itself: {cycle}")
            kind, params = self.specs[name]
            self._building.append(name)
            try:
                context = dataclasses.replace(self.context, lookup=self.source)
                self._built[name] = self.types[kind].create(name, params, context)
            finally:
                self._building.pop()
        return self._built[name]

    def build(self, member: str | notation.Node) -> EorRetriever:
        """The retriever tree for a member name in the paper's notation (e.g. `BM25@2&Wiki@2`)."""
        node = notation.parse(member) if isinstance(member, str) else member
        unknown = sorted(notation.sources(node) - set(self.specs))
        if unknown:
            raise RetrieverError(
                f"member {notation.to_name(node)!r}: unknown source(s) {', '.join(unknown)}; "
                f"available: {', '.join(sorted(self.specs))}"
            )
        return self._build(node)

    def _build(self, node: notation.Node) -> EorRetriever:
        from retrievers import operators

        match node:
            # A source may serve its own view under an operator: web search's SE@1 is the first 1000 words of
            # the top page, SE@RR@k reranks all pages' 100-word chunks (appendix C.1); others are themselves.
            case notation.TopK(child=notation.Source(name=name), k=k):
                return operators.TopK(child=self.source(name).for_top_k(k), k=k)
            case notation.Rerank(child=notation.Source(name=name)):
                return operators.Rerank(child=self.source(name).for_rerank(), encoder=self.context.encoder)
            case notation.Source(name=name):
                return self.source(name)
            case notation.TopK(child=child, k=k):
                return operators.TopK(child=self._build(child), k=k)
            case notation.Pick(child=notation.Source(name=name), rank=rank):
                source = self.source(name)
                depth = getattr(source, "depth", None)  # a ranked source's own depth (its params, else the config's)
                depth = depth if isinstance(depth, int) else self.context.depth
                if rank > depth:
                    raise ConfigError(
                        f"{notation.to_name(node)} asks for passage {rank} of {name}, which retrieves {depth} "
                        "(its depth parameter, else the config's retrieval_depth)"
                    )
                return operators.Pick(child=source.for_top_k(rank), rank=rank)
            case notation.Pick(child=notation.TopK(k=k), rank=rank) if rank > k:
                raise ConfigError(f"{notation.to_name(node)} asks for passage {rank} of a top {k}")
            case notation.Pick(child=child, rank=rank):
                return operators.Pick(child=self._build(child), rank=rank)
            case notation.Fuse(children=children):
                return operators.Fuse(children=[self._build(child) for child in children], k=self.context.rrf_k)
            case notation.Prompted(child=child):  # the variant is the answer prompt's, not retrieval's
                return self._build(child)
            case notation.Concat(children=children):
                return operators.Concat(children=[self._build(child) for child in children])
            case notation.Rerank(child=child):
                return operators.Rerank(child=self._build(child), encoder=self.context.encoder)
            case notation.Apply():
                return self._apply(node)
            case notation.Compress(child=child):
                if self.context.reader is None:
                    raise ConfigError("@CP (compression) needs a reader")
                return operators.Compress(
                    child=self._build(child),
                    reader=self.context.reader,
                    max_tokens=self.context.compression_max_tokens,
                    prompts=self.context.prompts,
                )
        raise RetrieverError(f"cannot build {node!r}")  # pragma: no cover - the parser produces only these

    def _apply(self, node: notation.Apply) -> EorRetriever:
        """An operator added through retrievers.operator_type, over the child's retriever."""
        operator = operator_types().get(node.operator)
        if operator is None:
            raise RetrieverError(f"unknown operator '@{node.operator}' in {notation.to_name(node)!r}")
        built = operator.build(self._build(node.child), self.context)
        if not isinstance(built, EorRetriever) or built.to_node() != node:
            shown = built.notation if isinstance(built, EorRetriever) else type(built).__name__
            raise ConfigError(
                f"operator '@{node.operator}' built {shown!r} for {notation.to_name(node)!r}: its build must return "
                "an EorRetriever whose to_node() is Apply(child, word) (subclass retrievers.operators.Applied)"
            )
        return built
