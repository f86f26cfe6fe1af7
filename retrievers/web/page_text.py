"""Main text and title of a fetched page: trafilatura's main-content extraction (boilerplate such as
navigation, footers and cookie banners removed), with a plain HTML-to-text fallback when it finds nothing."""

from __future__ import annotations

import html
import logging
import re
from html.parser import HTMLParser

logger = logging.getLogger(__name__)

_TITLE = re.compile(r"<title[^>]*>(.*?)</title\s*>", re.IGNORECASE | re.DOTALL)
_SKIPPED_TAGS = frozenset({"script", "style", "noscript", "template", "svg", "head", "iframe", "object"})
_BLOCK_TAGS = frozenset(
    {
        "address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "footer",
        "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre",
        "section", "table", "td", "th", "tr", "ul",
    }
)  # fmt: skip


def page_title(body: str) -> str:
    """The text of the page's first <title>, unescaped and on one line ("" when there is none)."""
    match = _TITLE.search(body)
    return " ".join(html.unescape(match.group(1)).split()) if match else ""


def main_text(body: str, content_type: str = "text/html", url: str | None = None) -> str:
    """The page's main text, paragraphs on separate lines; plain text is only tidied."""
    if content_type == "text/plain":
        return _tidy(body)
    text = _trafilatura(body, url)
    if not text:
        logger.debug("trafilatura found no main text in %s; using the plain HTML-to-text fallback", url or "page")
        text = html_to_text(body)
    return _tidy(text)


def html_to_text(body: str) -> str:
    """Every visible text node of an HTML document (scripts, styles and <head> dropped), blocks on lines."""
    parser = _TextParser()
    parser.feed(body)
    parser.close()
    return _tidy("".join(parser.parts))


def _trafilatura(body: str, url: str | None) -> str:
    import trafilatura

    try:
        text = trafilatura.extract(
            body,
            url=url,
            output_format="txt",
            include_comments=False,
            include_tables=True,
            include_images=False,
            include_links=False,
            deduplicate=False,
            with_metadata=False,
        )
    except (ValueError, TypeError, LookupError) as exc:  # malformed markup trafilatura cannot parse
        logger.debug("trafilatura failed on %s: %s", url or "page", exc)
        return ""
    return text or ""


def _tidy(text: str) -> str:
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


class _TextParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED_TAGS:
            self._skipping += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED_TAGS:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)
