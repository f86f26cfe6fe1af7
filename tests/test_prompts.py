from __future__ import annotations

import pytest

from eor.core.errors import ConfigError
from eor.core.prompts import PromptTemplates, clean_answer


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("George Washington", "George Washington"),
        ("Answer: George Washington.", "George Washington"),
        ("answer - Paris", "Paris"),
        ("The answer is: 1776.", "1776"),
        ('"Paris"', "Paris"),
        ("“Hamlet”", "Hamlet"),
        ("  Paris.\nThe capital of France is Paris.", "Paris"),
        ("\n\nParis", "Paris"),
        ("**Paris**", "Paris"),
        ("U.S.", "U.S"),
        ("Wait...", "Wait..."),
        ("", ""),
    ],
)
def test_clean_answer(raw: str, clean: str) -> None:
    assert clean_answer(raw) == clean


def test_templates_are_the_papers() -> None:
    few = PromptTemplates.for_style("few-words")
    assert few.answer_prompt("who wrote hamlet", []) == (
        "Please directly answer the following question with one or few words: who wrote hamlet"
    )
    assert few.answer_prompt("q", [("", "DOC")]) == (
        "Assuming the following paragraphs are true:\n\nDOC\n\n"
        "Please directly answer the following question with one or few words: q"
    )
    fifteen = PromptTemplates.for_style("15-words")
    assert fifteen.answer_prompt("q", []) == "Please directly answer the following question within 15 words: q"
    assert few.parametric.format(query="q") == "Generate a background document to answer the given question. q."
    assert few.compression.startswith("Please truthfully summarize the document below")
    assert "be within 200 words:\n\nquery: {query}\n\ndocument: {document}\n\nsummary:" in few.compression


def test_document_joins_titles_and_texts() -> None:
    t = PromptTemplates()
    assert t.document([("Paris", "Capital of France."), ("", "Untitled text.")]) == (
        "Paris\nCapital of France.\n\nUntitled text."
    )


def test_unknown_style() -> None:
    with pytest.raises(ConfigError, match="valid: few-words, 15-words"):
        PromptTemplates.for_style("haiku")
