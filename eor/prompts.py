"""Prompt templates of the EoR paper (appendix C.2) and the cleaning of generated answers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from eor.errors import ConfigError

# Answer-length instructions of appendix C.2: Llama2-chat's "one or few words", ChatGPT's "within 15 words".
ANSWER_STYLES = {
    "few-words": "Please directly answer the following question with one or few words: {query}",
    "15-words": "Please directly answer the following question within 15 words: {query}",
}
READING_PREFIX = "Assuming the following paragraphs are true:\n\n{document}\n\n"
PARAMETRIC = "Generate a background document to answer the given question. {query}."
COMPRESSION = (
    "Please truthfully summarize the document below, the summary should contain the most important "
    "information relevant to answer the query and be within 200 words:\n\nquery: {query}\n\n"
    "document: {document}\n\nsummary:"
)
PASSAGE = "{title}\n{text}"


@dataclass(frozen=True)
class PromptTemplates:
    """The templates one ensemble uses, and the one builder of its answer prompts (the ensemble's members,
    eRAG's document labels and utility all ask through `answer_prompt`); `{query}` and `{document}` are the
    placeholders. `max_document_words` cuts a prompt's document to that many words (None: never), so no
    prompt outgrows the reader's context; `templates_for(config)` takes it from the config."""

    retrieval_free: str = ANSWER_STYLES["few-words"]
    reading: str = READING_PREFIX + ANSWER_STYLES["few-words"]
    parametric: str = PARAMETRIC
    compression: str = COMPRESSION
    passage: str = PASSAGE
    passage_separator: str = "\n\n"
    max_document_words: int | None = None

    @classmethod
    def for_style(cls, style: str, **overrides: Any) -> PromptTemplates:
        if style not in ANSWER_STYLES:
            raise ConfigError(f"unknown answer style {style!r}; valid: {', '.join(ANSWER_STYLES)}")
        answer = ANSWER_STYLES[style]
        return cls(**{"retrieval_free": answer, "reading": READING_PREFIX + answer, **overrides})

    def document(self, passages: list[tuple[str, str]]) -> str:
        """Join (title, text) passages into the `{document}` of a prompt."""
        parts = [self.passage.format(title=title, text=text) if title else text for title, text in passages]
        return self.passage_separator.join(part.strip() for part in parts)

    def answer_prompt(self, query: str, passages: list[tuple[str, str]], max_words: int | None = None) -> str:
        """The answer prompt for a question and its (title, text) passages: the reading prompt over their
        document, cut to `max_document_words` words (or `max_words`, when fewer), or the retrieval-free
        prompt when there are none."""
        document = self.document(passages) if passages else ""
        if not document.strip():
            return self.retrieval_free.format(query=query)
        limits = [limit for limit in (self.max_document_words, max_words) if limit is not None]
        words = document.split(" ")
        if limits and len(words) > min(limits):
            document = " ".join(words[: min(limits)])
        return self.reading.format(query=query, document=document)

    def document_words(self, passages: list[tuple[str, str]]) -> int:
        """The words of the passages' document, as `answer_prompt` counts them (before any cut)."""
        return len(self.document(passages).split(" "))


def templates_for(config: Any) -> PromptTemplates:
    """The templates of an ensemble config (`prompts:` and `max_document_words`), the same for every user."""
    p = config.prompts
    overrides = {
        key: value
        for key in ("retrieval_free", "reading", "parametric", "compression", "passage")
        if (value := getattr(p, key)) is not None
    }
    return PromptTemplates.for_style(p.style, max_document_words=config.max_document_words, **overrides)


_LEADING_LABEL = re.compile(r"^\s*(?:the\s+)?(?:final\s+)?answer\s*(?:is)?\s*[:\-]\s*", re.IGNORECASE)
_QUOTES = "\"'“”‘’`"


def clean_answer(text: str) -> str:
    """First non-empty line, without a leading "Answer:", surrounding quotes or a trailing period."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    answer = lines[0] if lines else ""
    answer = _LEADING_LABEL.sub("", answer).strip()
    answer = answer.strip("*").strip()
    if len(answer) >= 2 and answer[0] in _QUOTES and answer[-1] in _QUOTES:
        answer = answer[1:-1].strip()
    while answer.endswith(".") and not answer.endswith(".."):
        answer = answer[:-1].rstrip()
    return answer
