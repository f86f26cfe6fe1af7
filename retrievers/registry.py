"""Source types (a name -> factory registry) and the builder that turns notation trees into retrievers.

A `SourcePool` creates each named base source once, so members that share a source share its index
and its per-query results.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.retrievers import BaseRetriever

from eor.errors import ConfigError, RetrieverError
from eor.prompts import PromptTemplates
from retrievers import notation
from retrievers.base import EorRetriever, NoRetrieval, SourceRetriever


@dataclass
class BuildContext:
    """What factories may need: the corpus, the reader (for PK and @CP), templates, defaults, and
    `lookup`, the pool's named sources (set by `SourcePool` for sources built from others, such as HB)."""

    corpus_path: str | None = None
    reader: Any = None
    prompts: PromptTemplates = field(default_factory=PromptTemplates)
    depth: int = 20
    encoder: str = "minilm-l6"
    parametric_max_tokens: int = 256
    compression_max_tokens: int = 300
    lookup: Callable[[str], EorRetriever] | None = None


SourceFactory = Callable[[str, dict[str, Any], BuildContext], EorRetriever]
SOURCE_TYPES: dict[str, SourceFactory] = {}


def source_type(name: str) -> Callable[[SourceFactory], SourceFactory]:
    """Register a source factory under `name` (used as `type:` in a config's `sources:`)."""

    def register(factory: SourceFactory) -> SourceFactory:
        SOURCE_TYPES[name] = factory
        return factory

    return register


def _needs_corpus(context: BuildContext, params: dict[str, Any], source: str) -> str:
    path = params.pop("corpus", None) or context.corpus_path
    if not path:
        raise ConfigError(f"source {source!r} needs a corpus: set 'corpus: {{path: ...}}' in the config")
    return str(path)


def _init(cls: type, source: str, kwargs: dict[str, Any]) -> EorRetriever:
    allowed = set(cls.model_fields) - {"source_name", "reader", "corpus_path", "memo_size"}
    unknown = sorted(set(kwargs) - allowed - {"source_name", "corpus_path", "reader"})
    if unknown:
        raise ConfigError(
            f"source {source!r}: unknown parameter(s) {', '.join(unknown)}; valid: {', '.join(sorted(allowed))}"
        )
    return cls(**kwargs)


@source_type("bm25")
def _bm25(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    from retrievers.bm25 import BM25Retriever

    params = dict(params)
    corpus = _needs_corpus(context, params, source)
    return _init(
        BM25Retriever,
        source,
        {"depth": context.depth, **params, "source_name": source, "corpus_path": corpus},
    )


@source_type("dense")
def _dense(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    from retrievers.dense import DenseRetriever

    params = dict(params)
    corpus = _needs_corpus(context, params, source)
    defaults = {"depth": context.depth, "encoder": context.encoder}
    return _init(DenseRetriever, source, {**defaults, **params, "source_name": source, "corpus_path": corpus})


@source_type("parametric")
def _parametric(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    from retrievers.parametric import ParametricRetriever

    if context.reader is None:
        raise ConfigError(f"source {source!r} (parametric knowledge) needs a reader")
    defaults = {"template": context.prompts.parametric, "max_tokens": context.parametric_max_tokens}
    return _init(ParametricRetriever, source, {**defaults, **params, "source_name": source, "reader": context.reader})


@source_type("none")
def _none(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    return _init(NoRetrieval, source, {**params, "source_name": source})


@source_type("langchain")
def _langchain(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    """Any LangChain retriever by import path: `{type: langchain, params: {class: pkg.mod:Cls, ...}}`."""
    from retrievers.adapters import LangChainSource

    params = dict(params)
    target = params.pop("class", None)
    if not target or ":" not in str(target):
        raise ConfigError(f"source {source!r}: 'class' must be an import path like 'package.module:ClassName'")
    module_name, _, attr = str(target).partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"source {source!r}: cannot import {target}: {exc}") from None
    retriever = cls(**params)
    if not isinstance(retriever, BaseRetriever):
        raise ConfigError(f"source {source!r}: {target} is not a langchain BaseRetriever")
    return LangChainSource(source_name=source, retriever=retriever)


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
        for name, (kind, _) in self.specs.items():
            if kind not in SOURCE_TYPES:
                raise ConfigError(f"source {name!r}: unknown type {kind!r}; valid: {', '.join(sorted(SOURCE_TYPES))}")

    def add(self, name: str, retriever: BaseRetriever) -> None:
        """Use an existing retriever object (eor's or any LangChain retriever) as the source `name`."""
        if not isinstance(retriever, EorRetriever):
            from retrievers.adapters import LangChainSource

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
                self._built[name] = SOURCE_TYPES[kind](name, params, context)
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
            # Web search sources serve the paper's exact variants (appendix C.1): SE@1 is the first 1000
            # words of the top page, SE@RR@k reranks all pages' 100-word chunks.
            case notation.TopK(child=notation.Source(name=name), k=k) if hasattr(self.source(name), "for_top_k"):
                return operators.TopK(child=self.source(name).for_top_k(k), k=k)
            case notation.Rerank(child=notation.Source(name=name)) if hasattr(self.source(name), "for_rerank"):
                return operators.Rerank(child=self.source(name).for_rerank(), encoder=self.context.encoder)
            case notation.Source(name=name):
                return self.source(name)
            case notation.TopK(child=child, k=k):
                return operators.TopK(child=self._build(child), k=k)
            case notation.Concat(children=children):
                return operators.Concat(children=[self._build(child) for child in children])
            case notation.Rerank(child=child):
                return operators.Rerank(child=self._build(child), encoder=self.context.encoder)
            case notation.Compress(child=child):
                if self.context.reader is None:
                    raise ConfigError("@CP (compression) needs a reader")
                return operators.Compress(
                    child=self._build(child),
                    reader=self.context.reader,
                    template=self.context.prompts.compression,
                    max_tokens=self.context.compression_max_tokens,
                    prompts=self.context.prompts,
                )
        raise RetrieverError(f"cannot build {node!r}")  # pragma: no cover - the parser produces only these


def is_source(retriever: EorRetriever) -> bool:
    return isinstance(retriever, SourceRetriever)


import retrievers.hybrid  # noqa: E402,F401  (registers the "hybrid" source type; needs SOURCE_TYPES above)
import retrievers.web  # noqa: E402,F401  (registers the "web" source type; needs SOURCE_TYPES above)
