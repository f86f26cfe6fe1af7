"""The text of a document, by its format: a `Document` of `Section`s (a heading, the page where the format has
pages, the text), from well-kept libraries, one per format (`EXTRACTORS`, by file suffix):

- PDF: pypdf, page by page (a page without text, an image-only scan, is named in `Document.warnings`); an
  encrypted file opens only when it needs no password;
- HTML: trafilatura's main text as Markdown (navigation, headers, footers and boilerplate left out), then read
  as Markdown below; the title from the page's metadata;
- DOCX: python-docx, paragraphs in order, a paragraph styled `Heading N` or `Title` starting a section, and
  each table's rows;
- Markdown: markdown-it-py's block tokens, an ATX or setext heading starting a section;
- plain text: one section, the text as it is (UTF-8, with a BOM or not).

Text that is not valid UTF-8 (a `.txt` or `.md` in another encoding) is decoded as Latin-1 with a warning. A file
the extractor cannot read raises `DocumentError` naming it and why; it is never half-read.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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


def extract(path: Path, data: bytes | None = None) -> Document:
    """The document in the file at `path` (its bytes `data` if already read), by its suffix."""
    suffix = path.suffix.lower()
    extractor = EXTRACTORS.get(suffix)
    if extractor is None:
        known = ", ".join(sorted(EXTRACTORS))
        raise DocumentError(f"{path}: unknown format {suffix or '(no suffix)'!r}; known: {known}")
    raw = path.read_bytes() if data is None else data
    try:
        return extractor(raw, path.name)
    except DocumentError as exc:  # what the extractor found wrong, in its words
        raise DocumentError(f"{path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a damaged file fails in the library, in its own way
        raise DocumentError(f"{path}: cannot read it as {suffix[1:].upper()} ({type(exc).__name__}: {exc})") from None


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
    """The sections of Markdown `text`: each heading starts one; the text of paragraphs, list items, quotes,
    code and tables below it, blocks joined by blank lines."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    sections: list[Section] = []
    heading, blocks = "", list[str]()
    in_heading = False
    for token in tokens:
        if token.type == "heading_open":
            if blocks:
                sections.append(Section(heading, "\n\n".join(blocks)))
            heading, blocks, in_heading = "", [], True
        elif token.type == "heading_close":
            in_heading = False
        elif token.type == "inline" and in_heading:
            heading = token.content.strip()
        elif token.type in ("inline", "fence", "code_block") and token.content.strip():
            blocks.append(token.content.strip())
    if blocks:
        sections.append(Section(heading, "\n\n".join(blocks)))
    return sections


def html(data: bytes, name: str) -> Document:
    import trafilatura

    page = data.decode("utf-8", errors="replace")
    main = trafilatura.extract(page, output_format="markdown", include_comments=False, favor_recall=True)
    metadata = trafilatura.extract_metadata(page)
    title = (metadata.title if metadata is not None and metadata.title else "") or _stem(name)
    sections = markdown_sections(main or "")
    warnings = [] if sections else ["no main text found"]
    return Document(title, [s for s in sections if s.text], warnings)


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
    from pypdf import PdfReader

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
    return Document(str(title), sections, warnings)


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
