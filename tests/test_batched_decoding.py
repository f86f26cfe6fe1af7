"""Batched decoding (`parallel` > 1): several prompts of one call decoded together through llama.cpp's
multi-sequence batches. It is an explicit option because outputs may differ from solo generation after the
first token; what must hold is checked here against solo generation with the real reader."""

from __future__ import annotations

import json

import pytest

from eor.core.errors import ConfigError
from eor.core.models import resolve_model
from eor.core.prompts import PromptTemplates
from eor.readers.llamacpp import LlamaCppReader
from tests.conftest import DEMO


@pytest.fixture(scope="module")
def solo_and_batched():
    questions = [json.loads(line)["question"] for line in (DEMO / "questions.jsonl").read_text().splitlines()][:5]
    prompts = [PromptTemplates().parametric.format(query=question) for question in questions]
    model = resolve_model("smollm2-135m")
    solo = LlamaCppReader(model, context_tokens=2048)
    batched = LlamaCppReader(model, context_tokens=2048, parallel=2, parallel_min_tokens=8)
    return prompts, solo.generate_timed(prompts, 24), batched.generate_timed(prompts, 24), batched


def test_batched_decoding_answers_every_prompt_within_its_budget(solo_and_batched):
    prompts, solo, batched, _ = solo_and_batched
    assert len(batched) == len(prompts)  # 5 prompts, 2 sequences at a time: groups of 2, 2 and 1
    for output in batched:
        assert output.text.strip()
        assert 1 <= output.generated_tokens <= 24
        assert output.prompt_tokens > 0 and output.seconds > 0


def test_batched_decoding_starts_as_solo_generation(solo_and_batched):
    """The prompt is evaluated in the solo chunks, so the first token (and the prompt's token count) are
    the solo ones; later tokens may differ (the reason the option is off by default)."""
    prompts, solo, batched, reader = solo_and_batched
    llm = reader._llm
    for prompt, alone, together in zip(prompts, solo, batched, strict=True):
        assert together.prompt_tokens == alone.prompt_tokens
        first_alone = llm.tokenize(alone.text.encode(), add_bos=False, special=True)[:1]
        first_together = llm.tokenize(together.text.encode(), add_bos=False, special=True)[:1]
        assert first_alone == first_together, prompt
    assert sum(a.text == b.text for a, b in zip(solo, batched, strict=True)) >= 1


def test_identity_names_the_parallel_option():
    model = resolve_model("smollm2-135m")
    reader = LlamaCppReader(model, context_tokens=2048, parallel=4)
    assert reader.identity.endswith("|parallel=4>64")
    assert "parallel" not in LlamaCppReader(model).identity
    with pytest.raises(ConfigError, match="parallel"):
        LlamaCppReader(model, parallel=0)


def test_chat_tokens_are_what_a_completion_evaluates(smollm2):
    prompt = "Please directly answer the following question with one or few words: who wrote hamlet"
    tokens = smollm2._llm.chat_tokens(prompt)
    smollm2.generate([prompt], max_tokens=2)
    assert smollm2._llm.previous_prompt == tokens
