"""Deterministic prefix reuse in the llama.cpp reader: a prompt keeps whole chunks of the previous prompt's KV
cache, and its answer depends on the prompt alone. The final logits (what the first answer token is chosen
from) are compared byte for byte between prompts evaluated fresh, after their neighbours, and in shuffled
orders, with the real default reader."""

from __future__ import annotations

import json
import random

import pytest

from eor.core.errors import ConfigError
from eor.core.models import resolve_model
from eor.core.prompts import PromptTemplates
from eor.readers.llamacpp import LlamaCppReader, reusable_prefix
from tests.conftest import DEMO


def test_reusable_prefix_is_whole_chunks_of_the_common_prefix():
    previous = list(range(100))
    assert reusable_prefix(previous, list(range(100)) + [7], 32) == 96  # common 100 -> 3 chunks
    assert reusable_prefix(previous, list(range(64)) + [-1] * 40, 32) == 64  # common 64 -> exactly 2 chunks
    assert reusable_prefix(previous, list(range(63)) + [-1] * 40, 32) == 32  # common 63 -> 1 chunk
    assert reusable_prefix(previous, list(range(31)) + [-1] * 40, 32) == 0  # less than a chunk
    assert reusable_prefix(previous, list(range(64)), 32) == 32  # same 64 tokens: the last one is evaluated
    assert reusable_prefix(previous, list(range(65)), 64) == 64
    assert reusable_prefix([], list(range(80)), 32) == 0
    assert reusable_prefix(previous, list(range(100)) + [7], 0) == 0  # chunk 0: never reuse


def test_prefix_chunk_must_be_a_multiple_of_eight():
    with pytest.raises(ConfigError, match="multiple of 8"):
        LlamaCppReader(resolve_model("smollm2-135m"), prefix_chunk=20)


def _prompts() -> list[str]:
    """Reading prompts of two demo questions whose documents grow by passages (sharing prefixes, as
    `BM25@1`, `BM25@4` and `BM25@2&Wiki@5` do), and a retrieval-free one."""
    passages = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines()][:6]
    questions = [json.loads(line)["question"] for line in (DEMO / "questions.jsonl").read_text().splitlines()][:2]
    templates = PromptTemplates()
    prompts = []
    for question in questions:
        for count in (1, 3, 6):
            prompts.append(templates.answer_prompt(question, [(p["title"], p["text"]) for p in passages[:count]]))
    prompts.append(templates.answer_prompt(questions[0], []))
    return prompts


def _evaluate(reader: LlamaCppReader, prompts: list[str], order: list[int]) -> dict[int, tuple[bytes, str, int]]:
    """Per prompt index: final logits, answer, and the prompt tokens kept from the prompt before."""
    out = {}
    for index in order:
        logits = reader.prompt_logits(prompts[index])
        kept = reader._llm.reused_tokens
        answer = reader.generate_timed([prompts[index]], max_tokens=12)[0]
        out[index] = (logits, answer.text, kept)
    return out


@pytest.fixture(scope="module")
def fresh_and_reused():
    prompts = _prompts()
    model = resolve_model("qwen2.5-0.5b")
    fresh = LlamaCppReader(model, context_tokens=4096, prefix_chunk=0)  # the former path: always from empty
    reused = LlamaCppReader(model, context_tokens=4096, prefix_chunk=64)
    order = list(range(len(prompts)))
    shuffled = order[:]
    random.Random(7).shuffle(shuffled)
    return (
        prompts,
        _evaluate(fresh, prompts, order),
        _evaluate(reused, prompts, order),
        _evaluate(reused, prompts, shuffled),
    )


def test_reuse_changes_no_logit_and_no_answer(fresh_and_reused):
    prompts, fresh, in_order, shuffled = fresh_and_reused
    for index in range(len(prompts)):
        assert in_order[index][0] == fresh[index][0], f"logits of prompt {index} changed by reuse"
        assert shuffled[index][0] == fresh[index][0], f"logits of prompt {index} changed by the order"
        assert in_order[index][1] == shuffled[index][1] == fresh[index][1]


def test_reuse_happens_and_only_in_whole_chunks(fresh_and_reused):
    prompts, fresh, in_order, shuffled = fresh_and_reused
    assert all(kept == 0 for _, _, kept in fresh.values())
    kept = [in_order[index][2] for index in range(len(prompts))]
    assert all(k % 64 == 0 for k in kept)
    # Each prompt is evaluated once for its logits, then again for its answer: the second keeps all but the
    # last partial chunk; a question's longer documents keep the chunks of its shorter ones.
    assert sum(kept) > 0 and sum(1 for k in kept if k > 0) >= 4


def test_identity_names_the_chunk_and_keeps_the_fresh_one():
    model = resolve_model("smollm2-135m")
    assert LlamaCppReader(model, prefix_chunk=64).identity.endswith("|chunk=64")
    assert "chunk" not in LlamaCppReader(model, prefix_chunk=0).identity
