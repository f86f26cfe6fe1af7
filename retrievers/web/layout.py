"""How fetched pages become passages: page heads (the first N words, title included) or ~100-word chunks."""

from __future__ import annotations

import hashlib
import re

from langchain_core.documents import Document

from retrievers.base import passage

_WORD = re.compile(r"\S+")


def first_words(text: str, count: int) -> str:
    """The first `count` whitespace-separated words of `text`, its line breaks kept."""
    if count <= 0:
        return ""
    for n, match in enumerate(_WORD.finditer(text), start=1):
        if n == count:
            return text[: match.end()].strip()
    return text.strip()


def page_id(source: str, url: str) -> str:
    return f"{source}:{hashlib.sha1(url.encode()).hexdigest()[:12]}"


def page_head(source: str, url: str, title: str, text: str, rank: int, words: int) -> Document | None:
    """One passage: the title and the start of the page, `words` words in all (the title's count too)."""
    body = first_words(text, words - len(title.split()))
    if not body:
        return None
    document = passage(body, id=f"{page_id(source, url)}:w{words}", title=title, source=source, score=1.0 / rank)
    document.metadata.update(url=url, rank=rank)
    return document


def page_chunks(source: str, url: str, title: str, text: str, rank: int, words: int) -> list[Document]:
    """The whole page as consecutive chunks of `words` words (the last may be shorter), in page order."""
    from retrievers.operators import chunk_document

    whole = passage(text, id=page_id(source, url), title=title, source=source, score=1.0 / rank)
    whole.metadata.update(url=url, rank=rank)
    return [chunk for chunk in chunk_document(whole, words) if chunk.page_content.strip()]
