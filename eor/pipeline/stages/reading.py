"""The reading stage: each member's answer from its documents. It builds the member's answer prompt
(eor.core.prompts: the member's templates, its variant's if it names one), asks the generation stage for every
prompt of a batch in one call, and turns each completion into the member's `MemberOutput` (answer, passages,
prompt, seconds, tokens, the reader's confidence).

Failure policy: a member's completion that raises, or comes back empty, fails that member on that question
alone (its reason recorded in `failures`; `strict` raises it instead). A prompt over the reader's context is
asked again with its document cut to half its words, then half again (at most MAX_CUTS times); the cut is
recorded in the output (`document_cut`) and named in a warning, and a prompt still over the context after
that fails its member.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eor.core.errors import ContextOverflowError, ReaderError
from eor.core.prompts import PromptTemplates, clean_answer
from eor.core.results import MemberOutput
from eor.pipeline.stages.failures import Failures
from eor.pipeline.stages.generation import Completion, GenerationStage, GenerationStats

log = logging.getLogger(__name__)

MAX_CUTS = 8  # halvings of a document that is over the reader's context before its member fails


@dataclass(frozen=True)
class RetrievalCost:
    """A member's retrieval over a batch of `questions`: seconds per question, and the reader's work during
    it (PK's documents, @CP's summaries)."""

    seconds: float
    usage: GenerationStats
    questions: int

    def tokens(self, answer: Completion) -> dict[str, int] | None:
        """The member's token counts per question, its answer's and its retrieval's share: prompt tokens
        evaluated, kept from the prompt before (`reused`), generated (a cache hit: as when it was made); None
        when the reader did not count them, or a document the member generated was read from the cache."""
        if self.usage.cache_hits or answer.prompt_tokens is None or answer.generated_tokens is None:
            return None
        share = self.usage.share(self.questions)
        return {
            "prompt": answer.prompt_tokens + round(share["prompt_tokens"]),
            "reused": (answer.reused_tokens or 0) + round(share["reused_tokens"]),
            "generated": answer.generated_tokens + round(share["generated_tokens"]),
        }


class ReadingStage:
    """`read(documents, texts, retrieval, failures, strict)` → per question, each member's output. `prompts`:
    each member's answer-prompt templates; `max_document_words`: the config's cut of every document."""

    def __init__(
        self, generation: GenerationStage, prompts: Mapping[str, PromptTemplates], max_document_words: int
    ) -> None:
        self.generation = generation
        self.prompts = dict(prompts)
        self.max_document_words = max_document_words

    def prompt(self, name: str, question: str, documents: list[Any], max_words: int | None = None) -> str:
        """Member `name`'s answer prompt (cut to `max_document_words` words, or `max_words`)."""
        return self.prompts[name].answer_prompt(question, _pairs(documents), max_words)

    def read(
        self,
        documents: dict[tuple[str, int], list[Any]],
        texts: list[str],
        retrieval: Mapping[str, RetrievalCost],
        failures: Failures,
        strict: bool,
    ) -> list[dict[str, MemberOutput]]:
        """`documents`: per (member, question index) the member's documents for that question, in the order
        the members and questions go; every prompt of the batch goes to the generation stage in one call."""
        pairs = list(documents)
        prompts = [self.prompt(name, texts[i], documents[name, i]) for name, i in pairs]
        ask = self.generation.complete if strict else self.generation.complete_each
        completions: list[Completion | Exception] = list(ask(prompts, confidence=True))
        cuts = self._fit_to_context(documents, texts, prompts, completions)
        outputs: list[dict[str, MemberOutput]] = [{} for _ in texts]
        for index, ((name, i), prompt, completion) in enumerate(zip(pairs, prompts, completions, strict=True)):
            if isinstance(completion, Exception):
                failures.fail(i, name, completion, "generation")
                continue
            answer = clean_answer(completion.text)
            if not answer:  # an empty answer would agree with every other empty one in the vote
                empty = ReaderError("the reader's output was empty")
                if strict:
                    raise empty
                failures.fail(i, name, empty, "generation")
                continue
            outputs[i][name] = MemberOutput(
                answer=answer,
                passages=[_passage_dict(doc) for doc in documents[name, i]],
                prompt=prompt,
                seconds=round(retrieval[name].seconds + completion.seconds, 4),
                document_cut=cuts.get(index),
                tokens=retrieval[name].tokens(completion),
                confidence=completion.confidence.summary() if completion.confidence is not None else None,
            )
        return outputs

    def _fit_to_context(
        self,
        documents: dict[tuple[str, int], list[Any]],
        texts: list[str],
        prompts: list[str],
        completions: list[Completion | Exception],
    ) -> dict[int, dict[str, int]]:
        """Prompts over the reader's context asked again with their document cut (the module's text), in place
        in `prompts` and `completions`; a prompt's index -> the words kept of its document's words."""
        cuts: dict[int, dict[str, int]] = {}
        for index, ((name, i), completion) in enumerate(zip(documents, completions, strict=True)):
            if not isinstance(completion, ContextOverflowError):
                continue
            words = self.prompts[name].document_words(_pairs(documents[name, i]))
            kept = min(words, self.max_document_words)
            for _ in range(MAX_CUTS):
                if kept <= 1 or not isinstance(completion, ContextOverflowError):
                    break
                kept //= 2
                prompts[index] = self.prompt(name, texts[i], documents[name, i], max_words=kept)
                completion = self.generation.complete_each([prompts[index]], confidence=True)[0]
            completions[index] = completion
            if not isinstance(completion, Exception):
                cuts[index] = {"kept_words": kept, "words": words}
                log.warning(
                    "%s: the prompt of question %r was over the reader's context: its document was cut to %d of "
                    "%d words",
                    name,
                    texts[i][:80],
                    kept,
                    words,
                )
        return cuts


def _passage_dict(document: Any) -> dict[str, Any]:
    """A passage as records and the API hold it; `url` only for passages that have one (web pages), `file` and
    `page` only for passages of imported documents (eor.documents), `generated` only for documents the reader
    wrote (PK's, @CP's: never a source of an answer)."""
    meta = document.metadata
    passage = {"id": meta.get("id"), "title": meta.get("title", ""), "text": document.page_content}
    passage["score"] = meta.get("score")
    if meta.get("url"):
        passage["url"] = str(meta["url"])
    for key in ("file", "page"):
        if meta.get(key) is not None:
            passage[key] = meta[key]
    if meta.get("generated"):
        passage["generated"] = True
    return passage


def _pairs(documents: list[Any]) -> list[tuple[str, str]]:
    """LangChain documents as the (title, text) passages of a prompt."""
    return [(doc.metadata.get("title", ""), doc.page_content) for doc in documents]
