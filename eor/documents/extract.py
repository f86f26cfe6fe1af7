"""The text of a document, by its format: a `Document` of `Section`s (a heading, the page where the format has
pages, the text), from well-kept libraries, one per format (`EXTRACTORS`, by file suffix):

- PDF: pypdf, page by page (a page without text, an image-only scan, is named in `Document.warnings`); an
  encrypted file opens only when it needs no password;
- HTML: trafilatura's main text (navigation, headers, footers and boilerplate left out), read from its XML so
  that code blocks stay code and headings come only from the page's headings; the title from its metadata;
- DOCX: python-docx, paragraphs in order, a paragraph styled `Heading N` or `Title` starting a section, and
  each table's rows;
- Markdown: markdown-it-py's tokens rendered to text (escapes resolved, no emphasis or link marks, tables as
  rows), an ATX or setext heading starting a section;
- plain text: one section, the text as it is (UTF-8, with a BOM or not); a file of any other suffix whose
  content is text is read so too (`looks_like_text`), and `readers` maps a suffix to a format (`.rst=markdown`).

Text that is not valid UTF-8 (a `.txt` or `.md` in another encoding) is decoded as Latin-1 with a warning. A file
the extractor cannot read raises `DocumentError` naming it and why; it is never half-read.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eor.core.errors import InputError


class DocumentError(InputError):
    """A file that cannot be read as a document: encrypted, damaged, an unknown format."""


@dataclass(frozen=True)
class Section:
    """A stretch of a document under one heading (`heading`, "" before any), on one page (PDF; else None)."""

    heading: str
    text: str
    page: int | None = None


@dataclass
class Document:
    """A file's title (its own, else its file name without suffix), its sections in order, and what was
    skipped inside it (`warnings`: e.g. a page without text)."""

    title: str
    sections: list[Section]
    warnings: list[str] = field(default_factory=list)


Extractor = Callable[[bytes, str], Document]  # (the file's bytes, its file name) -> Document


def extract(path: Path, data: bytes | None = None, readers: Mapping[str, str] | None = None) -> Document:
    """The document in the file at `path` (its bytes `data` if already read), by its suffix, or by `readers`
    (a suffix → a format of FORMATS, before the suffix's own); a file of another suffix is read as plain text
    when its content is text (`looks_like_text`), with a warning saying so."""
    suffix = path.suffix.lower()
    chosen = (readers or {}).get(suffix)
    extractor = FORMATS[chosen] if chosen is not None else EXTRACTORS.get(suffix)
    raw = path.read_bytes() if data is None else data
    if extractor is None:
        if not looks_like_text(raw):
            known = ", ".join(sorted(EXTRACTORS))
            raise DocumentError(f"{path}: unknown format {suffix or '(no suffix)'!r}, and not text; known: {known}")
        document = plain_text(raw, path.name)
        document.warnings.insert(0, f"read as plain text (no reader for {suffix or 'files without a suffix'})")
        return document
    try:
        return extractor(raw, path.name)
    except DocumentError as exc:  # what the extractor found wrong, in its words
        raise DocumentError(f"{path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a damaged file fails in the library, in its own way
        raise DocumentError(f"{path}: cannot read it as {suffix[1:].upper()} ({type(exc).__name__}: {exc})") from None


#: how much of a file `looks_like_text` reads
SNIFF_BYTES = 8192


def looks_like_text(data: bytes) -> bool:
    """Whether bytes are text: no NUL byte among the first SNIFF_BYTES, and at most 5% of them control characters
    other than white space (UTF-8 and the 8-bit encodings alike)."""
    head = data[:SNIFF_BYTES]
    if b"\x00" in head:
        return False
    controls = sum((byte < 32 and byte not in b"\t\n\r\f\x1b") or byte == 127 for byte in head)
    return controls <= 0.05 * len(head)


def reader_map(pairs: Iterable[str]) -> dict[str, str]:
    """`--reader` values (`SUFFIX=FORMAT`, e.g. `.rst=markdown`) as a suffix → format map; InputError naming
    the formats for a malformed one."""
    found: dict[str, str] = {}
    for pair in pairs:
        suffix, equals, name = pair.partition("=")
        suffix = suffix.strip().lower()
        suffix = suffix if suffix.startswith(".") else f".{suffix}"
        if not equals or suffix == "." or name.strip() not in FORMATS:
            raise InputError(f"--reader {pair!r}: expected SUFFIX=FORMAT, FORMAT one of {', '.join(FORMATS)}")
        found[suffix] = name.strip()
    return found


def _stem(name: str) -> str:
    return Path(name).stem


def _decoded(data: bytes, warnings: list[str]) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        warnings.append(f"not UTF-8 (byte {exc.start}): read as Latin-1")
        return data.decode("latin-1")


def plain_text(data: bytes, name: str) -> Document:
    warnings: list[str] = []
    text = _decoded(data, warnings).strip()
    return Document(_stem(name), [Section("", text)] if text else [], warnings)


def markdown(data: bytes, name: str) -> Document:
    warnings: list[str] = []
    sections = markdown_sections(_decoded(data, warnings))
    title = next((s.heading for s in sections if s.heading), _stem(name))
    return Document(title, [s for s in sections if s.text], warnings)


def markdown_sections(text: str) -> list[Section]:
    """The sections of Markdown `text`: each heading starts one; below it, blocks joined by blank lines: each
    paragraph, list item or quote as the text it renders to (escapes resolved, emphasis and link marks dropped,
    an image's alternative text), code as it is written, a table as its rows, one per line, cells joined by
    ` | `."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    sections: list[Section] = []
    heading, blocks = "", list[str]()
    in_heading = False
    rows: list[str] | None = None  # inside a table: its rows so far
    cells: list[str] | None = None  # inside a table row: its cells so far
    for token in tokens:
        kind = token.type
        if kind == "heading_open":
            if blocks:
                sections.append(Section(heading, "\n\n".join(blocks)))
            heading, blocks, in_heading = "", [], True
        elif kind == "heading_close":
            in_heading = False
        elif kind == "table_open":
            rows = []
        elif kind == "tr_open":
            cells = []
        elif kind == "tr_close" and rows is not None and cells is not None:
            if any(cells):
                rows.append(" | ".join(cells))
            cells = None
        elif kind == "table_close" and rows is not None:
            if rows:
                blocks.append("\n".join(rows))
            rows = None
        elif kind == "inline":
            rendered = inline_text(token).strip()
            if in_heading:
                heading = rendered
            elif cells is not None:
                cells.append(rendered)
            elif rendered:
                blocks.append(rendered)
        elif kind in ("fence", "code_block") and token.content.strip():
            blocks.append(token.content.strip("\n"))
    if blocks:
        sections.append(Section(heading, "\n\n".join(blocks)))
    return sections


def inline_text(token: Any) -> str:
    """The text an inline Markdown token renders to: its words and inline code, hard line breaks kept (a soft
    one is a space), an image's alternative text, no markup (emphasis, links' targets, raw HTML)."""
    out = []
    for child in token.children or ():
        if child.type in ("text", "code_inline"):
            out.append(child.content)
        elif child.type == "softbreak":  # a line break inside a paragraph renders as a space
            out.append(" ")
        elif child.type == "hardbreak":
            out.append("\n")
        elif child.type == "image":
            out.append(inline_text(child))
    return "".join(out)


def html(data: bytes, name: str) -> Document:
    """trafilatura's main text of the page (navigation, headers, footers and boilerplate left out), read from
    its XML: a heading starts a section; paragraphs and quotes as their text, code blocks as they are written
    (line breaks and indentation kept), list items one per line, tables as rows of cells joined by ` | `."""
    import xml.etree.ElementTree as ElementTree

    import trafilatura

    page = data.decode("utf-8", errors="replace")
    found = trafilatura.extract(page, output_format="xml", include_comments=False, favor_recall=True)
    metadata = trafilatura.extract_metadata(page)
    title = (metadata.title if metadata is not None and metadata.title else "") or _stem(name)
    main = ElementTree.fromstring(found).find("main") if found else None
    sections: list[Section] = []
    heading, blocks = "", list[str]()
    for element in [] if main is None else list(main):
        if element.tag == "head":
            if blocks:
                sections.append(Section(heading, "\n\n".join(blocks)))
            heading, blocks = _words(element), []
            continue
        if element.tag == "code":
            block = "".join(element.itertext()).strip("\n")
        elif element.tag == "list":
            block = "\n".join(f"- {_words(item)}" for item in element.findall("item") if _words(item))
        elif element.tag == "table":
            rows = [" | ".join(_words(cell) for cell in row.findall("cell")) for row in element.iter("row")]
            block = "\n".join(row for row in rows if row.strip(" |"))
        else:
            block = _words(element)
        if block.strip():
            blocks.append(block)
    if blocks:
        sections.append(Section(heading, "\n\n".join(blocks)))
    warnings = [] if sections else ["no main text found"]
    return Document(title, sections, warnings)


def _words(element: Any) -> str:
    """An XML element's text, its runs of white space made one space."""
    return " ".join("".join(element.itertext()).split())


def docx(data: bytes, name: str) -> Document:
    from docx import Document as Docx

    file = Docx(io.BytesIO(data))
    title = (file.core_properties.title or "").strip()
    sections: list[Section] = []
    heading, paragraphs = "", list[str]()
    for paragraph in file.paragraphs:
        style = paragraph.style.name if paragraph.style is not None else ""
        text = paragraph.text.strip()
        if style.startswith("Heading") or style == "Title":
            if paragraphs:
                sections.append(Section(heading, "\n\n".join(paragraphs)))
            heading, paragraphs = text, []
            title = title or (text if style == "Title" else "")
        elif text:
            paragraphs.append(text)
    for table in file.tables:
        rows = [" | ".join(cell.text.strip() for cell in row.cells) for row in table.rows]
        paragraphs += [row for row in rows if row.strip(" |")]
    if paragraphs:
        sections.append(Section(heading, "\n\n".join(paragraphs)))
    return Document(title or _stem(name), sections)


def pdf(data: bytes, name: str) -> Document:
    """pypdf, page by page; what pypdf logs while reading (a repaired cross-reference table, ...) becomes the
    document's warnings, never a stray line of its own (and nothing when the file is skipped anyway)."""
    from pypdf import PdfReader

    with _logged("pypdf") as logged:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError("encrypted with a password")
        metadata = reader.metadata
        title = (metadata.title if metadata is not None and metadata.title else "") or _stem(name)
        sections, warnings = [], []
        for number, page in enumerate(reader.pages, start=1):
            text = (page.extract_text() or "").strip()
            if text:
                sections.append(Section("", text, number))
            else:
                warnings.append(f"page {number} has no text (an image-only page?)")
    warnings += [f"pypdf: {line}" for line in dict.fromkeys(logged)]
    return Document(str(title), sections, warnings)


@contextmanager
def _logged(name: str) -> Iterator[list[str]]:
    """The messages the logger `name` emits inside the block, kept from every other handler."""
    import logging

    logger, lines = logging.getLogger(name), list[str]()

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler, propagate = Keep(logging.WARNING), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


#: the readers by name (`--reader SUFFIX=FORMAT`)
FORMATS: dict[str, Extractor] = {"pdf": pdf, "html": html, "docx": docx, "markdown": markdown, "text": plain_text}
#: the extractor of each file suffix
EXTRACTORS: dict[str, Extractor] = {
    ".pdf": pdf,
    ".html": html,
    ".htm": html,
    ".docx": docx,
    ".md": markdown,
    ".markdown": markdown,
    ".txt": plain_text,
    ".text": plain_text,
}
