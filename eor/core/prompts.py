"""Prompt templates of the EoR paper (appendix C.2) and the cleaning of generated answers."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from eor.core.errors import ConfigError

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
# A prompt variant's worked examples go first when its own templates do not place them: every prompt of the
# variant then starts with the same text, which the reader keeps from one prompt to the next (prefix reuse).
# It asks for the few-words style's answers; a variant of another style places them in its own templates.
DEMONSTRATIONS_FIRST = "Answer each question with one or few words, as in these examples.\n\n{demonstrations}\n\n"
MAX_DEMONSTRATIONS = 4
#: the placeholders each template is formatted with; a template that uses another fails when it is built
PLACEHOLDERS = {
    "retrieval_free": ("query",),
    "reading": ("query", "document"),
    "parametric": ("query",),
    "compression": ("query", "document"),
    "passage": ("title", "text"),
}


@dataclass(frozen=True)
class PromptTemplates:
    """The templates one ensemble uses, and the one builder of every prompt its reader sees: answers
    (`answer_prompt`: the members, eRAG's document labels, utility), PK's background documents
    (`parametric_prompt`) and @CP's summaries (`compression_prompt`); `{query}` and `{document}` are the
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
            raise ConfigError(f"prompts.style: unknown answer style {style!r}; valid: {', '.join(ANSWER_STYLES)}")
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

    def parametric_prompt(self, query: str) -> str:
        """PK's prompt: the reader writes a background document for the question (GenRead)."""
        return self.parametric.format(query=query)

    def compression_prompt(self, query: str, passages: list[tuple[str, str]]) -> str:
        """@CP's prompt: the reader summarises the passages' document for the question (appendix C.2); the
        document is never cut (the summary exists to shorten it)."""
        return self.compression.format(query=query, document=self.document(passages))

    def document_words(self, passages: list[tuple[str, str]]) -> int:
        """The words of the passages' document, as `answer_prompt` counts them (before any cut)."""
        return len(self.document(passages).split(" "))

    def with_variant(self, name: str, variant: Any) -> PromptTemplates:
        """These templates with the answer prompts of a prompt variant (`prompts.variants.NAME` of a config:
        `reading`, `retrieval_free`, `demonstrations` and `demonstration`; see eor.core.config). `{demonstrations}`
        is filled here, once: the worked examples are part of the template, so of the member's identity."""
        examples = list(variant.demonstrations)
        if len(examples) > MAX_DEMONSTRATIONS:
            raise ConfigError(
                f"prompts.variants.{name}: {len(examples)} demonstrations; at most {MAX_DEMONSTRATIONS} are allowed"
            )
        try:
            shown = [
                variant.demonstration.format(question=e.question, answer=e.answer, passage=e.passage) for e in examples
            ]
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                f"prompts.variants.{name}.demonstration: {exc!r}; its placeholders are {{question}}, {{answer}} "
                "and {passage}"
            ) from None
        block = "\n\n".join(shown).replace("{", "{{").replace("}", "}}")

        def fill(template: str | None, own: str, key: str) -> str:
            if template is None:
                template = (DEMONSTRATIONS_FIRST if examples else "") + own
            elif examples and "{demonstrations}" not in template:
                raise ConfigError(f"prompts.variants.{name}.{key} has no {{demonstrations}} for its demonstrations")
            check_template(template, key, f"prompts.variants.{name}.{key}", also=("demonstrations",))
            return template.replace("{demonstrations}", block)

        return dataclasses.replace(
            self,
            reading=fill(variant.reading, self.reading, "reading"),
            retrieval_free=fill(variant.retrieval_free, self.retrieval_free, "retrieval_free"),
        )


def templates_for(config: Any, variant: str | None = None) -> PromptTemplates:
    """The templates of an ensemble config (`prompts:` and `max_document_words`), the same for every user;
    with `variant`, those of the members named `...:variant` (`prompts.variants`)."""
    p = config.prompts
    overrides = {
        key: value
        for key in ("retrieval_free", "reading", "parametric", "compression", "passage")
        if (value := getattr(p, key)) is not None
    }
    for key, template in overrides.items():
        check_template(template, key, f"prompts.{key}")
    templates = PromptTemplates.for_style(p.style, max_document_words=config.max_document_words, **overrides)
    if variant is None:
        return templates
    check_variant(p, variant)
    return templates.with_variant(variant, p.variants[variant])


def check_variant(prompts: Any, variant: str) -> None:
    """ConfigError unless a config's `prompts:` section (`prompts`) has the variant, listing those it has."""
    if variant not in prompts.variants:
        known = ", ".join(sorted(prompts.variants)) or "none (add them under prompts.variants)"
        raise ConfigError(f"unknown prompt variant {variant!r}; this config's variants: {known}")


def check_template(template: str, key: str, where: str, also: tuple[str, ...] = ()) -> None:
    """ConfigError naming `where` unless the template `key` of PromptTemplates uses only its placeholders
    (PLACEHOLDERS), and `also` (a variant's `{demonstrations}`), each well formed."""
    names = (*PLACEHOLDERS[key], *also)
    try:
        template.format(**dict.fromkeys(names, ""))
    except (KeyError, IndexError, ValueError) as exc:
        shown = ", ".join(f"{{{name}}}" for name in names)
        raise ConfigError(f"{where}: {exc!r}; its placeholders are {shown}") from None


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
