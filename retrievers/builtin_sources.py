"""eor's own source types, declared the way any package declares one (retrievers.source_type.SourceType).

Each `build` imports its retriever class when called, so reading this catalogue loads no model, index or
HTTP library. Other packages add types through the entry point group `eor.sources` (retrievers.registry).
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from langchain_core.retrievers import BaseRetriever

from eor.core.errors import ConfigError
from retrievers.adapters import LangChainSource
from retrievers.base import EorRetriever, NoRetrieval
from retrievers.hybrid import build_hybrid
from retrievers.parametric import ParametricRetriever
from retrievers.source_type import BuildContext, SourceType
from retrievers.web.retriever import WebSearchRetriever


def _with_corpus(cls: type, params: dict[str, Any], defaults: dict[str, Any], source: str) -> EorRetriever:
    params = dict(params)
    corpus = str(params.pop("corpus"))
    return cls(**{**defaults, **params, "source_name": source, "corpus_path": corpus})


def _bm25(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    from retrievers.bm25 import BM25Retriever

    return _with_corpus(BM25Retriever, params, {"depth": context.depth}, source)


def _dense(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    from retrievers.dense import DenseRetriever

    return _with_corpus(DenseRetriever, params, {"depth": context.depth, "encoder": context.encoder}, source)


def _parametric(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    own = dict(params)
    prompts = context.prompts  # a source's own `template` replaces the config's PK prompt for this source
    if "template" in own:
        prompts = dataclasses.replace(prompts, parametric=own.pop("template"))
    settings = {"max_tokens": context.parametric_max_tokens, **own}
    return ParametricRetriever(**settings, prompts=prompts, source_name=source, reader=context.reader)


def _none(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    return NoRetrieval(source_name=source)


def _langchain(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
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


def _hybrid(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    return build_hybrid(source, params, context)


def _web(source: str, params: dict[str, Any], context: BuildContext) -> EorRetriever:
    return WebSearchRetriever(**params, source_name=source)


DEPTH = "passages retrieved per query (default: the config's `depth`)"

BM25 = SourceType(
    "bm25",
    _bm25,
    {
        "depth": DEPTH,
        "k1": "BM25's term frequency saturation (1.5)",
        "b": "BM25's length normalisation (0.75)",
        "engine": "bm25s (default: a memory-mapped index built by streaming) or rank-bm25 (the reference, in "
        "memory); the same scores",
    },
    needs=("corpus",),
    summary="rank-bm25's Okapi BM25 over the corpus, served by bm25s from a memory-mapped index in the store",
)
DENSE = SourceType(
    "dense",
    _dense,
    {
        "depth": DEPTH,
        "encoder": "the sentence encoder: a packaged name, path or Hugging Face id (default: the config's)",
        "query_encoder": "a separate query encoder (DPR)",
        "passage_encoder": "a separate passage encoder (DPR)",
        "pooling": "auto, mean, cls or pooler",
        "max_length": "most tokens encoded per text (256)",
        "normalize": "unit-length embeddings, so inner product is cosine (true)",
        "index_factory": "the FAISS index factory string: Flat (exact, default), IVF1024,Flat, IVF1024,PQ32, HNSW32",
        "nprobe": "inverted lists searched per query by an IVF index (16)",
        "train_size": "most vectors an IVF or PQ index is trained on (100000, a seeded sample)",
        "batch_size": "texts encoded together (64)",
        "query_prefix": "text put before every query (e.g. 'query: ')",
        "passage_prefix": "text put before every passage",
    },
    needs=("corpus",),
    summary="dense retrieval over the corpus: an encoder and a FAISS inner-product index",
)
PARAMETRIC = SourceType(
    "parametric",
    _parametric,
    {"template": "the prompt that asks for a background document", "max_tokens": "the document's most tokens"},
    needs=("reader",),
    summary="PK: the reader writes a background document (GenRead)",
)
NONE = SourceType("none", _none, {}, summary="ReFree: no documents; the reader answers from the question alone")
LANGCHAIN = SourceType(
    "langchain",
    _langchain,
    None,
    summary="any LangChain retriever: `class: package.module:ClassName`, the other parameters its keywords",
)
HYBRID = SourceType(
    "hybrid",
    _hybrid,
    {
        "parts": "the pool's sources it joins, each a name or {source: NAME, depth: N}",
        "chunk_words": "words per chunk of a part's documents (100)",
    },
    needs=("sources",),
    summary="HB: chunks of several of the pool's sources together (appendix C.1)",
)
WEB = SourceType(
    "web",
    _web,
    {
        "backend": "the search API: serper (default) or searxng",
        "base_url": "the search API's address",
        "api_key_env": "the environment variable holding the search API's key",
        "search_options": "extra parameters of every search request",
        "num_results": "search results asked for (10)",
        "search_timeout": "seconds per search request (15)",
        "retries": "attempts, or {attempts, base_delay, max_delay, deadline} (eor.core.retry)",
        "mode": "top4 (default), top1 or chunks (appendix C.1)",
        "pages": "result pages used (the mode's default)",
        "words_per_page": "words kept per page (the mode's default)",
        "chunk_words": "words per chunk in chunks mode (100)",
        "paper_views": "SE@1 and SE@RR@k mean what appendix C.1 says (true)",
        "timeout": "seconds per page fetch (10)",
        "max_bytes": "largest page fetched (2,000,000)",
        "max_redirects": "redirects followed per page (5)",
        "workers": "pages fetched at once (8)",
        "allow_private": "fetch pages on private addresses too (false)",
        "allowed_hosts": "hosts fetched even when private (e.g. 127.0.0.1 in tests)",
        "user_agent": "the User-Agent of page fetches",
        "cache": "keep search results and pages on disk (true)",
        "cache_path": "where (default: eor's cache folder)",
        "refresh": "search and fetch again, replacing what is cached (false)",
    },
    summary="SE: web search, then the result pages fetched, cleaned and cut (appendix C.1)",
)

SOURCE_TYPES: tuple[SourceType, ...] = (BM25, DENSE, PARAMETRIC, NONE, LANGCHAIN, HYBRID, WEB)
