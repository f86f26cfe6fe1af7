"""A document's passages: each section split into passages of about `words` words (the paper's 100-word
passages by default) by langchain-text-splitters' recursive splitter, which cuts at paragraphs first, then
lines, sentences, clauses and words, never inside a word; a section shorter than that is one passage.

Each passage carries its title (the document's title, and the section heading where there is one: the title
a reader and BM25 see), its `file` (the path relative to the imported folder, `/`-separated), its page (PDF),
the section heading, and its character offsets in the section's text. Its id is a digest of the
relative path, the file's content digest and the passage's index in the file: the same file gives the same
ids on every machine and every run, and a changed file gives new ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Any

from eor.core.errors import InputError
from eor.documents.extract import Document

#: the passage size in words (DPR's and the paper's passages are 100 words)
DEFAULT_WORDS = 100
#: where a section is cut, in order of preference (langchain-text-splitters tries each in turn)
SEPARATORS = ["\n\n", "\n", ". ", "? ", "! ", "; ", ": ", ", ", " ", ""]


@dataclass(frozen=True)
class DocumentPassage:
    """A passage of an imported document, as a corpus line holds it (`to_dict`)."""

    id: str
    title: str
    text: str
    file: str
    page: int | None
    heading: str
    start: int
    end: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def file_digest(data: bytes) -> str:
    """The content digest of a file: what decides whether it changed (never its modification time)."""
    return hashlib.sha256(data).hexdigest()


def passage_id(file: str, digest: str, index: int) -> str:
    """A passage's id: 16 hex digits of sha256(relative path, content digest, index)."""
    return hashlib.sha256(f"{file}\0{digest}\0{index}".encode()).hexdigest()[:16]


def split_document(document: Document, file: str, digest: str, words: int = DEFAULT_WORDS) -> list[DocumentPassage]:
    """The passages of `document` (from `file`, its path relative to the folder, `/`-separated, whose content
    digest is `digest`), about `words` words each, in reading order."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    if words < 1:
        raise InputError(f"a passage needs at least 1 word, not {words}")
    splitter = RecursiveCharacterTextSplitter(
        separators=SEPARATORS,
        keep_separator="end",
        chunk_size=words,
        chunk_overlap=0,
        length_function=_words,
        add_start_index=True,
    )
    out: list[DocumentPassage] = []
    for section in document.sections:
        heading = section.heading if section.heading != document.title else ""
        title = f"{document.title} — {heading}" if heading else document.title
        for chunk in splitter.create_documents([section.text]):
            text = chunk.page_content
            start = int(chunk.metadata["start_index"])
            index = len(out)
            out.append(
                DocumentPassage(
                    passage_id(file, digest, index),
                    title,
                    text,
                    file,
                    section.page,
                    section.heading,
                    start,
                    start + len(text),
                )
            )
    return out


def _words(text: str) -> int:
    return len(text.split())
