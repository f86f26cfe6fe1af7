"""The reader as judge, its reader layer: the log-probability of given continuations after a prompt (teacher
forcing, the end of the assistant's turn included), with the real default reader.

Each score is checked against an independent evaluation: llama-cpp-python's own `eval` on a second copy of the
model loaded with `logits_all=True` (its `scores` hold every position's logits; without that flag `eval` leaves
the array as it was), from an empty cache, with the same chunk boundaries (the prompt in chunks of U tokens from
position 0, the continuation from the prompt's end), to 1e-4 per token. Under the reader's default chunking of
the whole text (prompt and continuation together in chunks of U from position 0) the scores differ a little
more where a chunk boundary falls inside the continuation: the largest difference is printed and bounded."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from eor.core.errors import InputError, ReaderError
from eor.core.likelihood import Likelihood, log_softmax_rows
from eor.core.prompts import PromptTemplates
from eor.pipeline.stages.generation import GenerationStage
from eor.readers.base import BatchedReader, capable
from eor.readers.llamacpp import LlamaCppReader
from eor.runs.generation_cache import GenerationCache
from tests.conftest import DEMO

ANSWERS = ["Paris", "George Washington", "the United States of America", "1776", "", "May 18, 2018"]


def _prompts() -> list[str]:
    passages = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines()][:5]
    questions = [json.loads(line)["question"] for line in (DEMO / "questions.jsonl").read_text().splitlines()][:2]
    templates = PromptTemplates()
    prompts = [templates.answer_prompt(questions[0], [])]
    for question in questions:
        for count in (1, 3, 5):
            prompts.append(templates.answer_prompt(question, [(p["title"], p["text"]) for p in passages[:count]]))
    return prompts


@pytest.fixture(scope="module")
def reference(qwen):
    """The reader's model loaded again with every position's logits kept (llama-cpp-python's `scores`)."""
    from llama_cpp import Llama

    llm = Llama(
        model_path=str(qwen.model_path),
        n_ctx=qwen.context_tokens,
        n_batch=qwen.prefix_chunk,
        n_ubatch=qwen.prefix_chunk,
        n_threads=qwen.threads,
        logits_all=True,
        verbose=False,
    )
    yield llm
    llm.close()


def _reference_logprobs(llm, prompt_tokens: list[int], continuations: list[list[int]]) -> list[list[float]]:
    """Each continuation token's log-probability from llama-cpp-python's `eval`: the prompt from an empty cache,
    then each continuation behind it (the cells after the prompt dropped before the next)."""
    llm.reset()
    llm.eval(prompt_tokens)
    start = len(prompt_tokens) - 1
    out = []
    for continuation in continuations:
        llm.n_tokens = len(prompt_tokens)
        if len(continuation) > 1:
            llm.eval(continuation[:-1])
        out.append(log_softmax_rows(llm.scores[start : start + len(continuation)], continuation))
    return out


def _together_logprobs(llm, prompt_tokens: list[int], continuation: list[int]) -> list[float]:
    """The same under the reader's default chunking of the whole text: prompt and continuation in one `eval`,
    in chunks of U counted from position 0."""
    llm.reset()
    llm.eval(prompt_tokens + continuation[:-1])
    start = len(prompt_tokens) - 1
    return log_softmax_rows(llm.scores[start : start + len(continuation)], continuation)


def test_scores_equal_an_evaluation_from_an_empty_cache(qwen, reference):
    worst_same, worst_default = 0.0, 0.0
    for prompt in _prompts()[:4]:
        scores = qwen.score(prompt, ANSWERS)
        tokens = qwen.chat_tokens(prompt)
        continuations = [qwen.continuation_tokens(answer) for answer in ANSWERS]
        for likelihood, continuation, same in zip(
            scores, continuations, _reference_logprobs(reference, tokens, continuations), strict=True
        ):
            assert len(likelihood.logprobs) == len(continuation)
            worst_same = max(worst_same, *np.abs(np.subtract(likelihood.logprobs, same)))
            if prompt in _prompts()[1:3]:  # the whole text again: two prompts are enough to show the difference
                default = _together_logprobs(reference, tokens, continuation)
                worst_default = max(worst_default, *np.abs(np.subtract(likelihood.logprobs, default)))
    print(f"largest difference per token: same chunks {worst_same:.2e}, default chunking {worst_default:.2e}")
    assert worst_same <= 1e-4
    assert worst_default <= 1.0  # a chunk boundary inside the continuation: measured 0.25 (docs/judge.md)


def test_a_score_depends_on_its_prompt_and_continuation_alone(qwen):
    prompts = _prompts()
    alone = {(p, a): qwen.score(p, [a])[0].logprobs for p in prompts[:4] for a in ANSWERS}
    for prompt in reversed(prompts[:4]):  # other neighbours in the KV cache, other companions, other orders
        qwen.generate([prompt], max_tokens=8)
        together = qwen.score(prompt, list(reversed(ANSWERS)) + ["Paris"])
        for answer, likelihood in zip([*reversed(ANSWERS), "Paris"], together, strict=True):
            assert likelihood.logprobs == alone[(prompt, answer)]


def test_a_prompt_just_generated_from_is_scored_without_evaluating_it_again(qwen):
    """Generation keeps each prompt's KV cells (eor.readers.llamacpp_states): scoring puts them back instead
    of evaluating the prompt, and the scores are those of a reader that evaluates it (bit for bit)."""
    import llama_cpp

    prompts = _prompts()[1:4]
    evaluating = LlamaCppReader(qwen.model_path, name="evaluating", context_tokens=4096, prompt_states=0)
    expected = {prompt: evaluating.score(prompt, ANSWERS) for prompt in prompts}
    for prompt in prompts:  # as an answer's members generate, then the judge scores under their prompts
        qwen.generate([prompt], max_tokens=8)
    for prompt in prompts:
        restored = qwen._llm.states.restored
        llama_cpp.llama_perf_context_reset(qwen._llm.ctx)
        scores = qwen.score(prompt, ANSWERS)
        perf = llama_cpp.llama_perf_context(qwen._llm.ctx)
        assert qwen._llm.states.restored == restored + 1
        assert perf.n_p_eval + perf.n_eval == sum(len(s.logprobs) - 1 for s in scores)  # the continuations alone
        assert scores == expected[prompt]


def test_scoring_leaves_generation_as_it_was(qwen):
    prompt = _prompts()[2]
    before = qwen.generate_timed([prompt], max_tokens=12)[0]
    qwen.score(prompt, ANSWERS)
    after = qwen.generate_timed([prompt], max_tokens=12)[0]
    assert after.text == before.text
    assert after.confidence == before.confidence


def test_the_reader_prefers_the_answer_its_passage_gives(qwen):
    prompt = PromptTemplates().answer_prompt(
        "when is the next deadpool movie being released",
        [("Deadpool 2", "Deadpool 2 is scheduled to be released in the United States on May 18, 2018.")],
    )
    right, wrong, longer = qwen.score(prompt, ["May 18, 2018", "1969", "May 18, 2018 in the United States"])
    assert right.total > wrong.total
    assert right.total > longer.total  # the end of the turn is scored: a longer answer is not a free prefix
    assert right.logprobs[-1] > math.log(0.5)  # after the answer, the turn ends


def test_likelihood_summary_and_json_by_hand():
    likelihood = Likelihood((-0.5, -1.5, -0.25))
    assert likelihood.total == -2.25
    assert likelihood.mean == -0.75
    assert likelihood.summary() == {"logprob": -2.25, "mean_logprob": -0.75, "min_logprob": -1.5, "tokens": 3}
    assert Likelihood.from_json(json.loads(json.dumps(likelihood.to_json()))) == likelihood
    assert Likelihood.from_json(None) is None
    rows = np.array([[0.0, math.log(3.0)], [1.0, 1.0]], dtype=np.float32)
    assert log_softmax_rows(rows, [1, 0]) == pytest.approx([math.log(0.75), math.log(0.5)], abs=1e-7)


def test_scores_go_through_the_generation_cache(qwen):
    cache = GenerationCache(None)
    stage = GenerationStage(qwen, cache)
    prompt = _prompts()[1]
    first = stage.score(prompt, ["Paris", "1776", "Paris"])
    assert stage.score_stats.scored == 2 and stage.score_stats.cache_hits == 0
    again = GenerationStage(qwen, cache).score(prompt, ["1776", "Paris"])
    assert again == [first[1], first[0]]
    assert len(cache) == 2
    keys = {stage.score_key(prompt, "Paris"), stage.score_key(prompt, "1776"), stage.score_key(prompt + " ", "Paris")}
    assert len(keys) == 3 and stage.key(prompt) not in keys  # a score never answers for a generation
    assert stage.score_key(prompt, "Paris") != GenerationStage(_Renamed(qwen), None).score_key(prompt, "Paris")


class _Renamed(BatchedReader):
    """Another reader identity over the same model."""

    scores = True

    def __init__(self, inner) -> None:
        super().__init__()
        self.inner = inner

    @property
    def identity(self) -> str:
        return self.inner.identity + "|other"


def test_a_reader_without_scoring_is_refused_by_name(smollm2):
    class Plain(BatchedReader):
        name = "plain-reader"

        def _generate_one(self, prompt: str, max_tokens: int) -> str:
            return "x"

    assert not capable(Plain(), "scores") and capable(smollm2, "scores")
    with pytest.raises(ReaderError, match="plain-reader.*cannot score"):
        GenerationStage(Plain()).score("q", ["a"])
    with pytest.raises(ReaderError, match="cannot score"):
        Plain().score("q", ["a"])
    with pytest.raises(InputError):
        smollm2.score("q", [3])  # type: ignore[list-item]


def test_transformers_scores_in_batches_equal_one_by_one_and_llamacpp(smollm2):
    """The transformers path (the same GGUF, dequantised): a batch of padded continuations scores as each
    alone, and close to llama.cpp's quantised kernels."""
    from eor.core.config import ReaderConfig, TransformersOptions
    from eor.readers import build_reader

    reader = build_reader(
        ReaderConfig(model="smollm2-135m", backend="transformers", transformers=TransformersOptions(batch_size=4))
    )
    prompt = "What is the capital of France?"
    batched = reader.score(prompt, ANSWERS)
    for answer, likelihood in zip(ANSWERS, batched, strict=True):
        (alone,) = reader.score(prompt, [answer])
        assert len(alone.logprobs) == len(likelihood.logprobs)
        assert np.allclose(alone.logprobs, likelihood.logprobs, atol=1e-4)
    quantised = smollm2.score(prompt, ANSWERS)
    assert [len(x.logprobs) for x in quantised] == [len(x.logprobs) for x in batched]
    assert np.corrcoef([x.total for x in quantised], [x.total for x in batched])[0, 1] > 0.9


def test_openai_compatible_server_scores_through_echoed_prompt_logprobs(smollm2):
    """llama-cpp-python's server on 127.0.0.1: the chat-formatted prompt and the continuation sent to the
    completions endpoint, the prompt's log-probabilities echoed; the same tokens as the local reader and
    close to its scores (the server evaluates in its own batches). Without the chat template: a clear error."""
    from eor.core.config import OpenAIOptions, ReaderConfig
    from eor.readers import build_reader
    from tests.llama_server import LlamaServer

    server = LlamaServer().wait_ready()
    try:
        template = smollm2._llm.metadata["tokenizer.chat_template"]
        options = OpenAIOptions(base_url=server.base, chat_template=template)
        reader = build_reader(ReaderConfig(model="smollm2", openai=options))
        prompt = "What is the capital of France?"
        remote = reader.score(prompt, ANSWERS)
        local = smollm2.score(prompt, ANSWERS)
        for there, here in zip(remote, local, strict=True):
            assert len(there.logprobs) == len(here.logprobs)
            assert np.allclose(there.logprobs, here.logprobs, atol=0.5)
        plain = build_reader(ReaderConfig(model="smollm2", openai=OpenAIOptions(base_url=server.base)))
        with pytest.raises(ReaderError, match=r"127\.0\.0\.1.*chat_template"):
            GenerationStage(plain).score(prompt, ["Paris"])
    finally:
        server.stop()
