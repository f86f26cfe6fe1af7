"""SE — web search as a retriever (EoR paper, appendix C.1): a search engine's results are fetched,
their main text extracted, and laid out as passages; the source type ``web`` (retrievers.builtin_sources).

Pieces: `search` (the `SearchBackend` protocol, `SearchHit`, the backend registry: `serper`, the paper's
Google search, and `searxng`, self-hostable), `guard` (which URLs may be fetched), `fetch` (bounded,
concurrent HTTP with timeouts, byte cap, content-type check, guarded redirects), `page_text` (a page's main
text and title: trafilatura, with a plain fallback), `web_cache` (search results and pages as JSON files under
``cache_dir()/web``), `layout` (page heads or chunks), `retriever` (`WebSearchRetriever`).

How the paper's notation maps onto the source (decision)
---------------------------------------------------------
One source ``SE`` (``type: web``, default ``mode: top4``) returns one passage per result page, in rank
order, for the first 4 pages that could be fetched: the page title (metadata ``title``, which the reading
prompt prints) plus the start of the page's main text, 250 words counting the title's words.  So:

* ``SE@4``  = the top-4 pages, 250 words each, title included (C.1 exactly);
* ``SE@2``  = the first two of those (C.1: "SE@2&Wiki@5: the top-2 chunks from SE@4").

Appendix C.1 gives two names meanings that no single ranked list can have at once: ``SE@1`` is the first
*1000* words of the top page (not the first item of ``SE@4``), and ``SE@RR@10`` reranks *all* the text of
*all* result pages in ~100-word chunks.  These are the modes ``top1`` (1000 words of the top page) and
``chunks`` (every page, whole, in ``chunk_words``-word chunks).  Two ways to use them:

1. Exact paper names (recommended): the source offers operator-aware views, ``se.for_top_k(k)`` (``top1``
   for k = 1; more pages for k > 4; itself otherwise) and ``se.for_rerank()`` (``chunks``).  The pool puts
   ``source.for_top_k(k)`` under ``@k`` and ``source.for_rerank()`` under ``@RR`` (every source has them,
   returning itself by default), which makes ``SE@1``, ``SE@4``, ``SE@2&Wiki@5``, ``SE@RR@10``,
   ``SE@RR@5&Wiki@5`` and their ``@CP`` forms exactly C.1's.  Views print as ``SE`` (names round-trip) and
   share the source's cache, so each page is fetched once.  ``paper_views: false`` turns this off.
2. Separate sources, no builder support needed: ``SE1k: {type: web, params: {mode: top1}}`` used as
   ``SE1k@1``, and ``SEchunks: {type: web, params: {mode: chunks}}`` used as ``SEchunks@RR@10``; without the
   views, plain ``SE@1`` is the first 250 words of the top page and ``SE@RR@10`` reranks 250-word heads.

``HB`` (``HB@RR@10``: SE chunks + PK chunks + top-20 Wiki, reranked) takes its web part from
``for_rerank()`` of the SE source (or from a ``mode: chunks`` source), i.e. all pages in ~100-word chunks.

``pages`` and ``words_per_page`` override a mode's defaults (e.g. ``{mode: top4, words_per_page: 1000}``).
Pages that cannot be used (refused by the guard, HTTP error, timeout, over the byte cap, not text, no
text, or the same page as a better-ranked result) are skipped and the next result takes their place.
A passage's metadata: ``id`` (``SE:<sha1(url)>:w250``, chunks ``SE:<sha1(url)>#n``), ``title``, ``source``,
``score`` (1/rank), ``url`` (after redirects), ``rank`` (the search rank, from 1).

Configuration (``sources:`` of an eor config)::

    SE:
      type: web
      params: {backend: serper, api_key_env: SERPER_API_KEY, num_results: 10}
    SEx:
      type: web
      params: {backend: searxng, base_url: "http://127.0.0.1:8888", mode: chunks}

Security: only http(s) pages on public addresses are fetched (``allow_private: true`` or
``allowed_hosts: [...]`` to allow others, e.g. ``["127.0.0.1"]`` in tests), every redirect hop checked.
The API key is read from the environment at request time and never stored, logged or cached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retrievers.web.retriever import WebSearchRetriever

__all__ = [
    "PageFetchError",
    "PageFetcher",
    "SearchBackend",
    "SearchHit",
    "UrlGuard",
    "UrlRefusedError",
    "WebCache",
    "WebPage",
    "WebSearchRetriever",
    "make_backend",
    "search_backend",
]

_EXPORTS = {
    "PageFetchError": "retrievers.web.fetch",
    "PageFetcher": "retrievers.web.fetch",
    "SearchBackend": "retrievers.web.search",
    "SearchHit": "retrievers.web.search",
    "make_backend": "retrievers.web.backends",
    "search_backend": "retrievers.web.backends",
    "UrlGuard": "retrievers.web.guard",
    "UrlRefusedError": "retrievers.web.guard",
    "WebCache": "retrievers.web.web_cache",
    "WebPage": "retrievers.web.retriever",
    "WebSearchRetriever": "retrievers.web.retriever",
}


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the package does not import requests or trafilatura.
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
