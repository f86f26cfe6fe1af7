"""`WebSearchRetriever`: the SE source of the EoR paper (appendix C.1) — search, fetch the result pages,
extract their main text, and lay it out as page heads or chunks.  See `retrievers.web` for the mapping
of the notation (SE, SE@1, SE@4, SE@RR@10) onto its modes."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from pydantic import ConfigDict, Field, PrivateAttr

from eor.core.cache_policy import KeyedMemo
from eor.core.errors import RetrieverError
from retrievers.base import SourceRetriever
from retrievers.web.backends import make_backend
from retrievers.web.fetch import DEFAULT_USER_AGENT, TEXT_TYPES, PageFetcher, PageFetchError, map_concurrently
from retrievers.web.guard import UrlGuard, UrlRefusedError
from retrievers.web.layout import first_words, page_chunks, page_head
from retrievers.web.page_text import main_text, page_title
from retrievers.web.search import SearchBackend, SearchHit
from retrievers.web.web_cache import WebCache

logger = logging.getLogger(__name__)

Mode = Literal["top1", "top4", "chunks"]
# mode -> (pages used, words per page); None = every result page, whole text.
MODE_DEFAULTS: dict[str, tuple[int | None, int | None]] = {"top1": (1, 1000), "top4": (4, 250), "chunks": (None, None)}


@dataclass(frozen=True)
class WebPage:
    """An extracted page: the URL asked for, where its redirects ended, its type, title and main text."""

    url: str
    final_url: str
    content_type: str
    title: str
    text: str


class WebSearchRetriever(SourceRetriever):
    """Web search as a retriever (Serper by default, or SearXNG, or any `SearchBackend`).

    Modes (appendix C.1): `top4` — one passage per page for the first `pages` (4) result pages that
    could be fetched, in rank order, each the title plus the start of the page, `words_per_page` (250)
    words in all; `top1` — the same for the first page with 1000 words; `chunks` — every result page
    (or the first `pages`), whole (or its first `words_per_page` words when set), in ~`chunk_words`
    (100) word chunks, pages in rank order (the input of `@RR`).  Pages that cannot be used (refused,
    HTTP error, timeout, too large, not text, no text, a duplicate) are skipped and logged, and the next
    result takes their place.  Search results and pages are cached on disk (`cache_path`, default
    `cache_dir()/web`); `refresh: true` fetches again.  `search_backend` (Python only) takes any object
    with `search(query)` and `identity()` instead of a registered `backend`.
    """

    model_config = ConfigDict(extra="forbid")

    source_name: str = "SE"
    withholds: ClassVar[bool] = False  # no corpus ids to rank past (retrievers.withheld)
    backend: str = "serper"
    base_url: str | None = None
    api_key_env: str | None = None
    search_options: dict[str, Any] = Field(default_factory=dict)
    num_results: int = Field(10, gt=0)
    search_timeout: float = Field(15.0, gt=0)
    retries: Any = None  # attempts (int) or {attempts, base_delay, max_delay, deadline}; see eor.core.retry
    mode: Mode = "top4"
    pages: int | None = Field(None, gt=0)
    words_per_page: int | None = Field(None, gt=0)
    chunk_words: int = Field(100, gt=0)
    paper_views: bool = True
    timeout: float = Field(10.0, gt=0)
    max_bytes: int = Field(2_000_000, gt=0)
    max_redirects: int = Field(5, ge=0)
    workers: int = Field(8, gt=0)
    allow_private: bool = False
    allowed_hosts: list[str] = Field(default_factory=list)
    user_agent: str = DEFAULT_USER_AGENT
    cache: bool = True
    cache_path: str | None = None
    refresh: bool = False
    search_backend: Any = Field(default=None, exclude=True)

    _backend: SearchBackend = PrivateAttr()
    _fetcher: PageFetcher = PrivateAttr()
    _guard: UrlGuard = PrivateAttr()
    _store: WebCache = PrivateAttr()
    _views: KeyedMemo[tuple[tuple[str, Any], ...], WebSearchRetriever] = PrivateAttr(default_factory=KeyedMemo)

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        if self.search_backend is not None:
            if not isinstance(self.search_backend, SearchBackend):
                raise RetrieverError("search_backend must have search(query) and identity() methods")
            self._backend = self.search_backend
        else:
            params: dict[str, Any] = {"num": self.num_results, "timeout": self.search_timeout}
            if self.base_url:
                params["base_url"] = self.base_url
            if self.api_key_env:
                params["api_key_env"] = self.api_key_env
            if self.search_options:
                params["options"] = self.search_options
            if self.retries is not None:
                params["retries"] = self.retries
            self._backend = make_backend(self.backend, **params)
        self._guard = UrlGuard.from_config(self.allow_private, self.allowed_hosts)
        self._fetcher = PageFetcher(
            self._guard,
            timeout=self.timeout,
            max_bytes=self.max_bytes,
            max_redirects=self.max_redirects,
            workers=self.workers,
            content_types=TEXT_TYPES,
            user_agent=self.user_agent,
            retries=self.retries,
        )
        self._store = WebCache(self.cache_path, refresh=self.refresh, enabled=self.cache)

    # -- the public pieces ------------------------------------------------------------------------------

    def search(self, query: str) -> list[SearchHit]:
        """The backend's results for `query` (from the cache when it has them)."""
        identity = self._backend.identity()
        cached = self._store.get_search(identity, query)
        if cached is not None:
            return [SearchHit.from_dict(hit) for hit in cached]
        hits = self._backend.search(query)
        self._store.put_search(identity, query, [hit.to_dict() for hit in hits])
        return hits

    def fetch(self, url: str) -> WebPage:
        """The extracted page at `url`; raises UrlRefusedError or PageFetchError when it cannot be had."""
        self._guard.check_scheme(url)
        record = self._page(url)
        if not record["ok"]:
            raise (UrlRefusedError if record.get("refused") else PageFetchError)(record["error"])
        return WebPage(record["url"], record["final_url"], record["content_type"], record["title"], record["text"])

    def for_top_k(self, k: int) -> WebSearchRetriever:
        """The source to put under `@k` so that the paper's names mean what appendix C.1 says: `SE@1` is
        the first 1000 words of the top page, `SE@k` (k > pages) fetches k pages; otherwise `self`.
        Only for a `top4` source with `paper_views` on (views share this source's cache)."""
        if not self.paper_views or self.mode != "top4":
            return self
        if k == 1:
            return self._view(mode="top1", pages=None, words_per_page=None)
        if k > (self.pages or MODE_DEFAULTS["top4"][0] or k):
            return self._view(pages=k)
        return self

    def for_rerank(self) -> WebSearchRetriever:
        """The source to put under `@RR`: every result page in chunks (`SE@RR@10` of appendix C.1)."""
        if not self.paper_views or self.mode != "top4":
            return self
        return self._view(mode="chunks", pages=None, words_per_page=None)

    # -- retrieval --------------------------------------------------------------------------------------

    def _retrieve_uncached(
        self, queries: list[str], *, run_managers: list[CallbackManagerForRetrieverRun]
    ) -> list[list[Document]]:
        searched = map_concurrently(self.search, queries, self.workers)
        hits: list[list[SearchHit]] = []
        for query in queries:
            found = searched[query]
            if isinstance(found, Exception):
                raise found
            hits.append(found)
        return [self._layout(chosen) for chosen in self._select(hits)]

    def _page_count(self, len_hits: int) -> int:
        pages = self.pages or MODE_DEFAULTS[self.mode][0]
        return len_hits if pages is None else pages

    def _select(self, hit_lists: list[list[SearchHit]]) -> list[list[tuple[SearchHit, dict[str, Any]]]]:
        """The usable pages per query in rank order: results are fetched in rounds, each round asking for
        as many more pages as are still missing, so failed pages are replaced by the next results."""
        chosen: list[list[tuple[SearchHit, dict[str, Any]]]] = [[] for _ in hit_lists]
        used: list[set[str]] = [set() for _ in hit_lists]
        cursor = [0] * len(hit_lists)
        outcomes: dict[str, dict[str, Any] | Exception] = {}
        while True:
            taken: dict[int, list[SearchHit]] = {}
            for i, hits in enumerate(hit_lists):
                need = self._page_count(len(hits)) - len(chosen[i])
                if need > 0 and cursor[i] < len(hits):
                    taken[i] = hits[cursor[i] : cursor[i] + need]
                    cursor[i] += len(taken[i])
            if not taken:
                return chosen
            missing = [hit.url for hits in taken.values() for hit in hits if hit.url not in outcomes]
            outcomes.update(map_concurrently(self._page, missing, self.workers))
            for i, hits in taken.items():
                for hit in hits:
                    record = outcomes[hit.url]
                    if isinstance(record, Exception):
                        logger.warning("skipping %s: %s: %s", hit.url, type(record).__name__, record)
                    elif not record["ok"]:
                        log = logger.warning if record.get("refused") else logger.info
                        log("skipping search result %d: %s", hit.rank, record["error"])
                    elif not record["text"].strip():
                        logger.info("skipping search result %d (%s): no text", hit.rank, hit.url)
                    elif record["final_url"] in used[i]:
                        logger.info("skipping search result %d (%s): same page as a better one", hit.rank, hit.url)
                    else:
                        used[i].add(record["final_url"])
                        chosen[i].append((hit, record))

    def _layout(self, chosen: list[tuple[SearchHit, dict[str, Any]]]) -> list[Document]:
        documents: list[Document] = []
        for hit, page in chosen:
            title = page["title"] or hit.title
            args = (self.source_name, page["final_url"], title)
            if self.mode == "chunks":
                text = first_words(page["text"], self.words_per_page) if self.words_per_page else page["text"]
                documents.extend(page_chunks(*args, text, hit.rank, words=self.chunk_words))
            else:
                words = self.words_per_page or MODE_DEFAULTS[self.mode][1] or 0
                if (head := page_head(*args, page["text"], hit.rank, words=words)) is not None:
                    documents.append(head)
        return documents

    def _page(self, url: str) -> dict[str, Any]:
        """The page record for `url` (cached): ok + final_url, content_type, title, text; or the error."""
        policy = self._fetcher.policy()
        cached = self._store.get_page(url, policy)
        if cached is not None:
            return cached
        try:
            fetched = self._fetcher.fetch(url)
            text = main_text(fetched.body, fetched.content_type, fetched.final_url)
            title = page_title(fetched.body) if fetched.content_type != "text/plain" else ""
            record = {
                "ok": True,
                "url": url,
                "final_url": fetched.final_url,
                "content_type": fetched.content_type,
                "title": title,
                "text": text,
            }
        except UrlRefusedError as exc:
            record = {"ok": False, "url": url, "refused": True, "error": str(exc)}
        except RetrieverError as exc:
            record = {"ok": False, "url": url, "refused": False, "error": str(exc)}
        self._store.put_page(url, policy, record)
        return record

    def _view(self, **changes: Any) -> WebSearchRetriever:
        key = tuple(sorted(changes.items()))
        view = self._views.get(key)
        if view is None:
            view = self.model_copy(update=changes)
            view._memo = KeyedMemo()
            view._views = KeyedMemo()
            self._views.keep(key, view)
        return view
