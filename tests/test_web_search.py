"""Web search (SE): Serper and SearXNG backends, the URL guard, page fetching, extraction, the paper's
variants (SE@4, SE@1, chunks for SE@RR@10), the cache, and secrets — against loopback servers only.

Word counts below come from the fixtures in `web_fixtures/` (paragraph lengths after extraction):
lighthouse.html = title "Bell Rock Lighthouse" + paragraphs of 3 (the <h1>), 71, 93, 86, 87 words (340);
canal.html = 2 + 53 + 52 (107); tides.html = 3 + 84 + 76 + 80 + 88 + 59 (390); notes.txt = 28 words;
log.html = 1627 words, title "Keeper's Log, 1850" (3 words).
"""

from __future__ import annotations

import asyncio
import http.server
import logging
import re
import socket
import threading
import time
from pathlib import Path

import pytest

from eor.core.errors import ConfigError, MissingSecretError, RetrieverError
from retrievers import operators
from retrievers.builtin_sources import WEB
from retrievers.registry import BuildContext, SourcePool, source_types
from retrievers.web.backends import make_backend
from retrievers.web.fetch import PageFetcher, PageFetchError
from retrievers.web.guard import UrlGuard, UrlRefusedError
from retrievers.web.page_text import html_to_text, main_text, page_title
from retrievers.web.retriever import WebSearchRetriever
from retrievers.web.search import SearchHit
from tests.webserver import ECHO_QUERY, LoopbackServer, page_server, searxng_server, serper_server

KEY = "test-serper-key-7f3a9c2e51d04b8a"
QUERY = "bell rock lighthouse"
LOG_QUERY = "keeper's log 1850"
TIMEOUT = 1.0
BOILERPLATE = ("cookie", "Copyright", "Gift shop", "Related articles", "Share this page", "Subscribe", "Log in")


def lighthouse_rows(base: str) -> list[tuple[str, str, str]]:
    """Ten results that exercise every way a page can fail, between four good ones."""
    return [
        (f"{base}/missing", "Bell Rock (removed)", "404"),  # 1: HTTP 404
        (f"{base}/lighthouse.html", "Bell Rock Lighthouse - Coastal Heritage", "oldest sea-washed"),  # 2: ok
        (f"{base}/redirect", "Caledonian Canal guide", "302 to canal.html"),  # 3: ok after a redirect
        (f"{base}/slow", "Slow page", "past the timeout"),  # 4: timeout
        (f"{base}/download", "Download", "octet-stream"),  # 5: not text
        (f"{base}/canal.html", "Caledonian Canal", "same page as 3"),  # 6: duplicate
        (f"{base}/redirect-private", "Intranet", "302 to 10.0.0.1"),  # 7: refused hop
        (f"{base}/tides.html", "Tides", "gravity"),  # 8: ok
        (f"{base}/big", "Big page", "over the cap"),  # 9: too large
        (f"{base}/notes.txt", "Tay field notes", "text/plain"),  # 10: ok
    ]


def log_rows(base: str) -> list[tuple[str, str, str]]:
    return [(f"{base}/log.html", "Keeper's log", "1850"), (f"{base}/lighthouse.html", "Bell Rock", "tower")]


@pytest.fixture(scope="module")
def pages():
    server = page_server()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def serper(pages):
    server = serper_server(KEY, {QUERY: lighthouse_rows(pages.url), LOG_QUERY: log_rows(pages.url)})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    """One cache for the tests that do not count requests, so the slow result times out only once."""
    return tmp_path_factory.mktemp("shared-web-cache")


@pytest.fixture
def key(monkeypatch) -> str:
    monkeypatch.setenv("SERPER_API_KEY", KEY)
    return KEY


def make_se(search: LoopbackServer, cache: Path, **params) -> WebSearchRetriever:
    defaults = {"base_url": search.url, "cache_path": str(cache), "allowed_hosts": ["127.0.0.1"], "timeout": TIMEOUT}
    return WebSearchRetriever(**{**defaults, **params})


def words(text: str) -> int:
    return len(text.split())


def snapshot(documents) -> list[tuple[str, dict]]:
    return [(doc.page_content, dict(doc.metadata)) for doc in documents]


# -- SE@4, SE@1 and the chunks under SE@RR@10 --------------------------------------------------------------


def test_se4_skips_failed_pages_and_cuts_250_words_with_the_title(pages, serper, key, tmp_path) -> None:
    before = len(pages.requests)
    docs = make_se(serper, tmp_path).invoke(QUERY)
    base = pages.url
    # Rank 1 is a 404, 4 times out, 5 is binary, 6 repeats 3, 7 redirects to 10.0.0.1, 9 is too large.
    assert [doc.metadata["rank"] for doc in docs] == [2, 3, 8, 10]
    assert [doc.metadata["url"] for doc in docs] == [
        f"{base}/lighthouse.html",
        f"{base}/canal.html",
        f"{base}/tides.html",
        f"{base}/notes.txt",
    ]
    # <title> of each page; the text/plain page has none, so the search hit's title.
    assert [doc.metadata["title"] for doc in docs] == [
        "Bell Rock Lighthouse",
        "Caledonian Canal",
        "How Tides Work",
        "Tay field notes",
    ]
    # 250 words counting the title: 247 = 3 + 71 + 93 + 80 (the 80th word of paragraph 3 is "was");
    # canal.html is shorter (107); tides 247 = 3 + 84 + 76 + 80 + 4; notes.txt is 28 words.
    assert [words(doc.page_content) for doc in docs] == [247, 107, 247, 28]
    lighthouse, canal, tides, notes = (doc.page_content for doc in docs)
    assert lighthouse.startswith("Bell Rock Lighthouse\nThe Bell Rock Lighthouse stands on a reef eleven miles")
    assert lighthouse.endswith("fixed a bell to the reef, and a pirate who cut it down was")
    assert canal.endswith("the longest staircase lock in Britain.")
    assert tides.endswith("give neap tides with a small range.\nReal tides are shaped")
    assert notes == (
        "Field notes, Tay estuary.\nLow water at 06:10, high water at 12:25. Seals hauled out on the Abertay "
        "sands.\nThe wind backed to the south-west in the afternoon."
    )
    for doc in docs:
        assert not any(phrase.lower() in doc.page_content.lower() for phrase in BOILERPLATE)
        assert doc.metadata["source"] == "SE"
        assert re.fullmatch(r"SE:[0-9a-f]{12}:w250", doc.metadata["id"])
    assert [doc.metadata["score"] for doc in docs] == [1 / 2, 1 / 3, 1 / 8, 1 / 10]
    # Rounds: ranks 1-4, then 5-6, then 7-8, then 9, then 10; canal.html once via /redirect, once directly.
    assert sorted(path for _, path in pages.requests[before:]) == sorted(
        ["/missing", "/lighthouse.html", "/redirect", "/canal.html", "/slow", "/download", "/canal.html"]
        + ["/redirect-private", "/tides.html", "/big", "/notes.txt"]
    )


def test_chunks_cover_every_page_in_100_word_chunks(pages, serper, key, shared_cache) -> None:
    se = make_se(serper, shared_cache)
    docs = se.for_rerank().invoke(QUERY)
    # lighthouse 340 = 100+100+100+40, canal 107 = 100+7, tides 390 = 100+100+100+90, notes 28.
    assert [(doc.metadata["rank"], words(doc.page_content)) for doc in docs] == [
        (2, 100), (2, 100), (2, 100), (2, 40),
        (3, 100), (3, 7),
        (8, 100), (8, 100), (8, 100), (8, 90),
        (10, 28),
    ]  # fmt: skip
    lighthouse_ids = [doc.metadata["id"] for doc in docs[:4]]
    assert [i.rsplit("#", 1)[1] for i in lighthouse_ids] == ["0", "1", "2", "3"]
    assert docs[3].page_content.endswith("watched over from Edinburgh by the Northern Lighthouse Board.")
    assert docs[10].metadata["id"] == docs[10].metadata["id"].split("#")[0]  # a short page is one chunk
    assert snapshot(make_se(serper, shared_cache, mode="chunks").invoke(QUERY)) == snapshot(docs)
    # words_per_page cuts each page first: lighthouse 150 = 100+50, canal 107, tides 150, notes 28.
    cut = make_se(serper, shared_cache, mode="chunks", words_per_page=150).invoke(QUERY)
    assert [words(doc.page_content) for doc in cut] == [100, 50, 100, 7, 100, 50, 28]
    assert snapshot(make_se(serper, shared_cache, mode="chunks", chunk_words=200).invoke(QUERY))[0][0].count(" ") == 199


def test_se1_is_the_first_1000_words_of_the_top_page(pages, serper, key, shared_cache) -> None:
    se = make_se(serper, shared_cache)
    (top1,) = se.for_top_k(1).invoke(LOG_QUERY)
    # 1000 words counting the 3 title words: 997 words, ending inside the 19 April entry.
    assert (top1.metadata["title"], top1.metadata["rank"], words(top1.page_content)) == ("Keeper's Log, 1850", 1, 997)
    assert top1.page_content.endswith(
        "The relief boat could not land because of the swell.\n19 April 1850. Wind south, fresh. Sea very"
    )
    assert top1.metadata["id"].endswith(":w1000")
    # The SE@4 passage of the same page: 247 words, ending 25 words into the 22 January entry.
    head = se.invoke(LOG_QUERY)[0]
    assert words(head.page_content) == 247
    assert head.page_content.endswith(
        "22 January 1850. Wind south-west, a gale. Sea moderate. Light shown from "
        "sunset to sunrise without fault. Cleaned the glazing of the light room inside"
    )
    assert top1.page_content.startswith(head.page_content)
    # words_per_page gives the same page head without the view.
    (long_head, _) = make_se(serper, shared_cache, words_per_page=1000).invoke(LOG_QUERY)
    assert long_head.page_content == top1.page_content
    assert make_se(serper, shared_cache, mode="top1").invoke(LOG_QUERY)[0].page_content == top1.page_content


def test_notation_views_and_registry_factory(pages, serper, key, shared_cache) -> None:
    assert source_types()["web"] is WEB
    params = {
        "base_url": serper.url,
        "cache_path": str(shared_cache),
        "allowed_hosts": ["127.0.0.1"],
        "timeout": TIMEOUT,
    }
    pool = SourcePool(BuildContext(), {"SE": ("web", params)})
    se = pool.source("SE")
    assert isinstance(se, WebSearchRetriever) and se.source_name == "SE"
    se4 = se.invoke(QUERY)
    assert snapshot(pool.build("SE@2").invoke(QUERY)) == snapshot(se4[:2])  # C.1: "top-2 chunks from SE@4"
    assert snapshot(pool.build("SE@4").invoke(QUERY)) == snapshot(se4)
    # Views: @1 over the top1 view, @RR over the chunks view; they print as SE and are shared.
    se1 = operators.TopK(child=se.for_top_k(1), k=1)
    assert se1.notation == "SE@1" and se.for_top_k(1) is se.for_top_k(1)
    assert words(se1.invoke(LOG_QUERY)[0].page_content) == 997
    assert se.for_top_k(2) is se and se.for_top_k(4) is se
    assert [doc.metadata["rank"] for doc in se.for_top_k(6).invoke(QUERY)] == [2, 3, 8, 10]  # only 4 usable
    rerank = operators.TopK(child=operators.Rerank(child=se.for_rerank()), k=10)
    assert rerank.notation == "SE@RR@10"
    assert make_se(serper, shared_cache, paper_views=False).for_top_k(1).mode == "top4"
    assert make_se(serper, shared_cache, mode="chunks").for_top_k(1).mode == "chunks"

    with pytest.raises(ConfigError, match=r"source 'SE': unknown parameter\(s\) colour; valid: .*mode.*words_per_page"):
        WEB.create("SE", {"colour": "blue"}, BuildContext())
    with pytest.raises(ConfigError, match=r"source 'SE': mode: Input should be 'top1', 'top4' or 'chunks'"):
        WEB.create("SE", {"mode": "top3"}, BuildContext())
    with pytest.raises(ConfigError, match=r"unknown search backend 'bing'; available: searxng, serper"):
        WEB.create("SE", {"backend": "bing"}, BuildContext())
    with pytest.raises(ConfigError, match=r"search backend 'searxng': unknown parameter\(s\) api_key_env"):
        make_backend("searxng", api_key_env="SEARX_KEY")


def test_langchain_batch_and_async(pages, serper, key, shared_cache) -> None:
    se = make_se(serper, shared_cache)
    first, second = se.batch([QUERY, LOG_QUERY])
    assert snapshot(first) == snapshot(se.invoke(QUERY))
    assert snapshot(asyncio.run(se.ainvoke(LOG_QUERY))) == snapshot(second)


class ListBackend:
    """Any object with search() and identity() can be the search engine (here: a fixed list of pages)."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls

    def identity(self) -> dict:
        return {"backend": "list", "urls": self.urls}

    def search(self, query: str) -> list[SearchHit]:
        return [SearchHit(url=url, title="", snippet="", rank=rank) for rank, url in enumerate(self.urls, start=1)]


def test_any_search_backend_object(pages, tmp_path) -> None:
    backend = ListBackend([f"{pages.url}/tides.html", f"{pages.url}/canal.html"])
    se = make_se(pages, tmp_path, search_backend=backend, pages=1, words_per_page=20)
    (doc,) = se.invoke("anything")
    # 20 words counting the title "How Tides Work": the <h1> (3 words) and 14 words of the first paragraph.
    assert doc.page_content == "How Tides Work\nTides are the regular rise and fall of the sea surface caused by the"
    with pytest.raises(RetrieverError, match="search_backend must have search"):
        make_se(pages, tmp_path, search_backend=object())


def test_searxng_backend(pages, tmp_path) -> None:
    base = pages.url
    rows = [(f"{base}/canal.html", "Canal (searx)", "Telford"), (f"{base}/missing", "Gone", ""),
            (f"{base}/tides.html", "Tides (searx)", "Moon")]  # fmt: skip
    searx = searxng_server({"canal and tides": rows})
    try:
        se = make_se(searx, tmp_path, backend="searxng", mode="top4")
        hits = se.search("canal and tides")
        assert [(hit.rank, hit.title, hit.snippet) for hit in hits] == [
            (1, "Canal (searx)", "Telford"),
            (2, "Gone", ""),
            (3, "Tides (searx)", "Moon"),
        ]
        docs = se.invoke("canal and tides")
        assert [(doc.metadata["rank"], doc.metadata["title"], words(doc.page_content)) for doc in docs] == [
            (1, "Caledonian Canal", 107),
            (3, "How Tides Work", 247),
        ]
        assert searx.paths() == ["/search?q=canal+and+tides&format=json"]
    finally:
        searx.stop()


# -- the cache ---------------------------------------------------------------------------------------------


def test_cache_replays_identically_without_servers_or_key(monkeypatch, tmp_path) -> None:
    pages = page_server()
    base = pages.url
    rows = [(f"{base}/lighthouse.html", "Bell Rock", ""), (f"{base}/empty.html", "Empty", ""),
            (f"{base}/redirect", "Canal", ""), (f"{base}/missing", "Missing", ""), (f"{base}/tides.html", "Tides", ""),
            (f"{base}/notes.txt", "Notes", "")]  # fmt: skip
    search = serper_server(KEY, {QUERY: rows, LOG_QUERY: log_rows(base)})
    monkeypatch.setenv("SERPER_API_KEY", KEY)
    cache = tmp_path / "web-cache"
    try:
        se = make_se(search, cache)
        first = {
            "se4": snapshot(se.invoke(QUERY)),
            "chunks": snapshot(se.for_rerank().invoke(QUERY)),
            "se1": snapshot(se.for_top_k(1).invoke(LOG_QUERY)),
            "page": se.fetch(f"{base}/redirect"),
        }
        assert [meta["rank"] for _, meta in first["se4"]] == [1, 3, 5, 6]  # the empty page and the 404 skipped
        requests_made = (len(pages.requests), len(search.requests))
        assert requests_made[1] == 2  # one search per query, shared by the views
    finally:
        pages.stop()
        search.stop()
    monkeypatch.delenv("SERPER_API_KEY")
    replay = make_se(search, cache)
    second = {
        "se4": snapshot(replay.invoke(QUERY)),
        "chunks": snapshot(replay.for_rerank().invoke(QUERY)),
        "se1": snapshot(replay.for_top_k(1).invoke(LOG_QUERY)),
        "page": replay.fetch(f"{base}/redirect"),
    }
    assert second == first
    assert (len(pages.requests), len(search.requests)) == requests_made
    with pytest.raises(PageFetchError, match="HTTP 404"):  # failures are replayed too
        replay.fetch(f"{base}/missing")
    files = sorted(cache.rglob("*.json"))
    assert {file.parent.parent.name for file in files} == {"search", "pages"}
    assert not any(KEY in file.read_text() for file in files)
    # refresh ignores the files: with the servers gone, the key is needed again, then the search fails.
    with pytest.raises(MissingSecretError, match="SERPER_API_KEY"):
        make_se(search, cache, refresh=True).invoke(QUERY)
    monkeypatch.setenv("SERPER_API_KEY", KEY)
    with pytest.raises(RetrieverError, match=r"search backend 'serper': request to http://127.0.0.1:\d+/search failed"):
        make_se(search, cache, refresh=True).invoke(QUERY)


def test_refresh_fetches_again_and_views_share_it(pages, serper, key, tmp_path) -> None:
    make_se(serper, tmp_path).invoke(LOG_QUERY)
    searches = len(serper.requests)
    page_requests = len(pages.requests)
    make_se(serper, tmp_path).invoke(LOG_QUERY)
    assert (len(serper.requests), len(pages.requests)) == (searches, page_requests)
    fresh = make_se(serper, tmp_path, refresh=True)
    fresh.invoke(LOG_QUERY)
    fresh.for_top_k(1).invoke(LOG_QUERY)  # the view reuses what `fresh` just fetched
    assert len(serper.requests) == searches + 1
    assert sorted(pages.paths()[page_requests:]) == ["/lighthouse.html", "/log.html"]


# -- secrets -----------------------------------------------------------------------------------------------


def test_missing_key_names_the_variable(serper, monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    monkeypatch.delenv("MY_SEARCH_KEY", raising=False)
    se = make_se(serper, tmp_path)  # building needs no key: cached runs work without one
    with pytest.raises(MissingSecretError, match=r"set the environment variable SERPER_API_KEY"):
        se.invoke(QUERY)
    with pytest.raises(MissingSecretError, match=r"set the environment variable MY_SEARCH_KEY"):
        make_se(serper, tmp_path, api_key_env="MY_SEARCH_KEY").invoke(QUERY)


def test_api_key_never_in_errors_logs_or_cache(pages, serper, key, monkeypatch, shared_cache, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    se = make_se(serper, shared_cache)
    assert se.invoke("who kept the light in 1850") == []  # no results: nothing to fetch
    assert serper.state["payloads"][-1] == {"q": "who kept the light in 1850", "num": 10}
    with pytest.raises(RetrieverError) as echoed:
        se.invoke(ECHO_QUERY)
    assert str(echoed.value) == "search backend 'serper' answered HTTP 500: internal error (key ***)"
    monkeypatch.setenv("SERPER_API_KEY", "wrong-" + KEY)
    with pytest.raises(RetrieverError) as rejected:
        make_se(serper, shared_cache).invoke("another query")
    assert str(rejected.value) == "search backend 'serper' rejected the API key in SERPER_API_KEY (HTTP 403)"
    assert KEY not in caplog.text
    assert KEY not in repr(se) and KEY not in se.model_dump_json()
    assert not any(KEY in file.read_text() for file in shared_cache.rglob("*") if file.is_file())


# -- the URL guard ------------------------------------------------------------------------------------------


def test_file_and_private_urls_are_refused_by_default(tmp_path) -> None:
    se = WebSearchRetriever(cache_path=str(tmp_path))
    with pytest.raises(UrlRefusedError) as refused:
        se.fetch("file:///etc/passwd")
    assert (
        str(refused.value) == "refusing to fetch file:///etc/passwd: scheme file: is not allowed (only http and https)"
    )
    started = time.monotonic()
    with pytest.raises(UrlRefusedError) as refused:
        se.fetch("http://10.0.0.1/")
    assert str(refused.value) == (
        "refusing to fetch http://10.0.0.1/: private address 10.0.0.1 "
        "(set allow_private: true, or add '10.0.0.1' to allowed_hosts, to allow it)"
    )
    assert time.monotonic() - started < 0.5  # refused before any connection attempt


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.com/file.txt", "scheme ftp: is not allowed"),
        ("data:text/html,<p>hi</p>", "scheme data: is not allowed"),
        ("javascript:alert(1)", "scheme javascript: is not allowed"),
        ("//example.com/page", "the URL has no scheme"),
        ("http:///path-only", "the URL has no host"),
        ("http://127.0.0.1:8080/admin", "loopback address 127.0.0.1"),
        ("http://2130706433/", "loopback address 127.0.0.1"),  # 127.0.0.1 as one decimal number
        ("http://0177.0.0.1/", "loopback address 127.0.0.1"),  # octal
        ("http://0x7f.1/", "loopback address 127.0.0.1"),  # hexadecimal, short form
        ("http://[::ffff:127.0.0.1]/", "loopback address ::ffff:7f00:1"),  # IPv4-mapped IPv6
        ("http://[::1]/", "loopback address ::1"),
        ("http://169.254.169.254/latest/meta-data/", "link-local address 169.254.169.254"),
        ("http://[fe80::1]/", "link-local address fe80::1"),
        ("http://0.0.0.0/", "unspecified address 0.0.0.0"),
        ("http://224.0.0.251/", "multicast address 224.0.0.251"),
        ("http://192.168.1.1/", "private address 192.168.1.1"),
        ("http://172.16.5.4/", "private address 172.16.5.4"),
        ("http://[fd12:3456::1]/", "private address fd12:3456::1"),
        ("http://[::ffff:10.0.0.1]/", "private address ::ffff:"),
        ("http://100.64.0.1/", "non-public address 100.64.0.1"),
        ("http://localhost:9/", "loopback address"),
    ],
)
def test_guard_refusals(url: str, reason: str) -> None:
    with pytest.raises(UrlRefusedError, match=re.escape(reason)):
        UrlGuard().check(url)


def test_guard_allows_public_addresses_and_configured_exceptions() -> None:
    UrlGuard().check("https://93.184.215.14/index.html")  # an address literal: no DNS needed
    UrlGuard().check("http://[2606:4700::6810:84e5]/")
    allowed = UrlGuard.from_config(allowed_hosts=["127.0.0.1"])
    allowed.check("http://127.0.0.1:8080/")
    with pytest.raises(UrlRefusedError, match="private address 10.0.0.1"):
        allowed.check("http://10.0.0.1/")
    UrlGuard.from_config(allowed_hosts=["10.0.0.0/8"]).check("http://10.20.30.40/")
    UrlGuard.from_config(allowed_hosts=["intranet.example"]).check("http://intranet.example/")
    UrlGuard(allow_private=True).check("http://10.0.0.1/")
    with pytest.raises(UrlRefusedError, match="scheme file:"):
        UrlGuard(allow_private=True).check("file:///etc/passwd")


def test_loopback_pages_only_when_allowed(pages, tmp_path) -> None:
    before = len(pages.requests)
    url = f"{pages.url}/canal.html"
    with pytest.raises(UrlRefusedError, match=r"loopback address 127\.0\.0\.1 \(set allow_private: true"):
        WebSearchRetriever(cache_path=str(tmp_path)).fetch(url)
    assert len(pages.requests) == before  # nothing was sent
    for allowing in ({"allowed_hosts": ["127.0.0.1"]}, {"allow_private": True}):
        page = WebSearchRetriever(cache_path=str(tmp_path), **allowing).fetch(url)
        assert (page.title, words(page.text), page.content_type) == ("Caledonian Canal", 107, "text/html")


# -- fetching ------------------------------------------------------------------------------------------------


@pytest.fixture
def fetcher() -> PageFetcher:
    return PageFetcher(UrlGuard.from_config(allowed_hosts=["127.0.0.1"]), timeout=TIMEOUT)


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/missing", "HTTP 404"),
        ("/slow", "no answer within 1 s"),
        ("/trickle", "not complete within 1 s"),
        ("/big", "2500658 bytes is over the 2000000-byte cap"),
        ("/big-stream", "the page is over the 2000000-byte cap"),
        (
            "/download",
            "content type application/octet-stream is not one of text/html, application/xhtml+xml, text/plain",
        ),
        ("/logo.png", "content type image/png is not one of"),
        ("/loop/0", "more than 5 redirects"),
    ],
)
def test_fetch_failures(pages, fetcher, path: str, error: str) -> None:
    started = time.monotonic()
    with pytest.raises(PageFetchError, match=re.escape(error)):
        fetcher.fetch(pages.url + path)
    assert time.monotonic() - started < TIMEOUT + 0.9


def test_redirects_are_followed_and_every_hop_is_checked(pages, fetcher) -> None:
    base = pages.url
    assert fetcher.fetch(f"{base}/redirect").final_url == f"{base}/canal.html"  # relative Location
    assert fetcher.fetch(f"{base}/redirect-absolute").final_url == f"{base}/tides.html"  # 301
    before = len(pages.requests)
    with pytest.raises(PageFetchError):
        fetcher.fetch(f"{base}/loop/0")
    assert pages.paths()[before:] == ["/loop/0", "/loop/1", "/loop/2", "/loop/3", "/loop/4", "/loop/5"]
    with pytest.raises(UrlRefusedError) as refused:
        fetcher.fetch(f"{base}/redirect-private")
    assert str(refused.value) == (
        f"refusing to fetch http://10.0.0.1/ (redirected from {base}/redirect-private): private address 10.0.0.1 "
        "(set allow_private: true, or add '10.0.0.1' to allowed_hosts, to allow it)"
    )
    with pytest.raises(UrlRefusedError, match=r"refusing to fetch file:///etc/passwd \(redirected from .*scheme file:"):
        fetcher.fetch(f"{base}/redirect-file")


def test_content_types_and_concurrency(pages, fetcher) -> None:
    base = pages.url
    plain = fetcher.fetch(f"{base}/notes.txt")
    assert (plain.content_type, plain.body.splitlines()[0]) == ("text/plain", "Field notes, Tay estuary.")
    assert fetcher.fetch(f"{base}/untyped").content_type == "text/html"  # no header, sniffed as HTML
    started = time.monotonic()
    results = fetcher.fetch_many([f"{base}/slow?{n}" for n in range(4)] + [f"{base}/canal.html"])
    assert time.monotonic() - started < 2 * TIMEOUT  # four timeouts in parallel, not one after another
    assert [type(result).__name__ for result in results.values()] == ["PageFetchError"] * 4 + ["FetchedPage"]


# -- extraction ----------------------------------------------------------------------------------------------


def test_extraction_and_its_fallback() -> None:
    import trafilatura

    page = Path(__file__).parent / "web_fixtures" / "lighthouse.html"
    body = page.read_text()
    text = main_text(body)
    assert [words(line) for line in text.splitlines()] == [3, 71, 93, 86, 87]
    assert words(html_to_text(body)) > words(text)  # the fallback keeps the boilerplate
    assert "tracking code" not in html_to_text(body)  # but never scripts
    sidebar = "<html><body><aside><p>The light was automated in 1988.</p></aside></body></html>"
    assert trafilatura.extract(sidebar) is None
    assert main_text(sidebar) == "The light was automated in 1988."
    assert page_title("<html><head><title>\n Keeper&#39;s   Log </title></head></html>") == "Keeper's Log"
    assert main_text("  one\n\n two  three \n", "text/plain") == "one\ntwo three"


# -- DNS rebinding: the connection goes to the address the guard checked ---------------------------------------


class _Says(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        # recorded before answering: once the client has the page, the test reads `hosts` at once
        self.server.hosts.append(self.headers.get("Host"))
        body = f"<html><head><title>{self.server.says}</title></head><body><p>{self.server.says}</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args) -> None:
        pass


def _serve(address: str, port: int, says: str) -> http.server.HTTPServer:
    server = http.server.HTTPServer((address, port), _Says)
    server.says, server.hosts = says, []
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def test_a_name_that_rebinds_after_the_check_still_reaches_the_checked_address(monkeypatch) -> None:
    """`rebind.test` resolves to 127.0.0.2 (allowed here) when the guard checks it and to 127.0.0.1 (refused)
    afterwards, as a hostile DNS server would answer. The page must come from 127.0.0.2."""
    allowed = _serve("127.0.0.2", 0, "allowed page")
    port = allowed.server_address[1]
    forbidden = _serve("127.0.0.1", port, "secret of the loopback")
    real = socket.getaddrinfo
    answers = iter(["127.0.0.2"])

    def rebinding(host, *args, **kwargs):
        if host == "rebind.test":
            return real(next(answers, "127.0.0.1"), *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    try:
        fetcher = PageFetcher(UrlGuard.from_config(allowed_hosts=["127.0.0.2"]), timeout=TIMEOUT)
        page = fetcher.fetch(f"http://rebind.test:{port}/")
        assert "allowed page" in page.body and forbidden.hosts == []
        assert allowed.hosts == [f"rebind.test:{port}"]  # the Host header keeps the name
        with pytest.raises(UrlRefusedError, match="loopback address 127.0.0.1"):
            fetcher.fetch(f"http://rebind.test:{port}/")  # once the name resolves to the loopback, it is refused
    finally:
        allowed.shutdown()
        forbidden.shutdown()


def test_a_decompression_bomb_is_cut_at_the_cap_in_bounded_memory(pages, fetcher) -> None:
    """250 KB of gzip that inflates to 256 MB: refused at the 2 MB cap of *decompressed* bytes, without ever
    holding much more than that in memory."""
    import tracemalloc

    from tests.webserver import _bomb

    _bomb()  # built before measuring (the server's copy)
    tracemalloc.start()
    try:
        with pytest.raises(PageFetchError, match="over the 2000000-byte cap"):
            fetcher.fetch(pages.url + "/bomb")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40_000_000, f"peak {peak / 1e6:.0f} MB while reading a bomb"
