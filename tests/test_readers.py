"""Each reader backend with a real packaged model: llama.cpp, transformers, and OpenAI-compatible HTTP
against llama-cpp-python's own server on 127.0.0.1."""

from __future__ import annotations

import pytest

from eor.core.config import LlamaCppOptions, OpenAIOptions, ReaderConfig, TransformersOptions
from eor.core.errors import ConfigError, MissingSecretError, ModelNotFoundError
from eor.core.prompts import PromptTemplates, clean_answer
from eor.readers import READERS, Reader, build_reader

TEMPLATES = PromptTemplates()


def test_registry_lists_backends() -> None:
    assert set(READERS) == {"llama.cpp", "transformers", "openai"}
    with pytest.raises(ConfigError, match="valid: auto, llama.cpp, transformers, openai"):
        build_reader(ReaderConfig(model="smollm2-135m", backend="vllm-local"))


def test_llamacpp_batch_keeps_order_and_deduplicates(smollm2) -> None:
    assert isinstance(smollm2, Reader)
    prompts = ["Say the word blue.", "Say the word red.", "Say the word blue."]
    outputs = smollm2.generate(prompts, max_tokens=8)
    assert len(outputs) == 3 and all(isinstance(text, str) and text for text in outputs)
    assert outputs[0] == outputs[2]  # greedy and de-duplicated
    assert len(smollm2.last_seconds) == 3 and all(s >= 0 for s in smollm2.last_seconds)
    assert smollm2.generate(prompts[:1], max_tokens=8) == outputs[:1]  # deterministic across calls


def test_llamacpp_answer_depends_on_the_prompt_alone(smollm2) -> None:
    """A prompt sharing a prefix with the one before it must not reuse that prefix's KV cache: the
    different evaluation batches flip greedy choices (seen in CI before the reader reset its cache)."""
    stem = "Generate a background document to answer the given question. "
    first, second = stem + "who discovered penicillin.", stem + "what is the boiling point of water."
    alone = smollm2.generate([first], max_tokens=24)
    smollm2.generate([second], max_tokens=24)
    assert smollm2.generate([first], max_tokens=24) == alone
    assert smollm2.generate([second, first], max_tokens=24)[1] == alone[0]


def test_qwen_answers_real_questions(qwen) -> None:
    questions = ["what is the capital of france", "who wrote the play hamlet"]
    answers = [clean_answer(text) for text in qwen.generate([TEMPLATES.answer_prompt(q, []) for q in questions])]
    assert answers[0] == "Paris"
    assert "Shakespeare" in answers[1]


def test_qwen_reads_the_given_passage(qwen) -> None:
    passage = ("Zorblax", "The capital of the fictional country of Zorblax is Quimbleton, founded in 1820.")
    answer = clean_answer(qwen.generate([TEMPLATES.answer_prompt("what is the capital of zorblax", [passage])])[0])
    assert answer == "Quimbleton"


def test_build_reader_auto_picks_llamacpp_for_gguf() -> None:
    reader = build_reader(
        ReaderConfig(model="smollm2-135m", max_tokens=4, llama_cpp=LlamaCppOptions(context_tokens=512))
    )
    assert type(reader).__name__ == "LlamaCppReader"
    with pytest.raises(ConfigError, match="needs a .gguf file"):
        build_reader(ReaderConfig(model="minilm-l6", backend="llama.cpp"))


def test_missing_model_file_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        build_reader(ReaderConfig(model=str(tmp_path / "nope.gguf")))


def test_transformers_causal_from_packaged_gguf() -> None:
    """The transformers path loads the same GGUF (dequantised) and applies the chat template."""
    reader = build_reader(
        ReaderConfig(
            model="smollm2-135m", backend="transformers", max_tokens=12, transformers=TransformersOptions(batch_size=2)
        )
    )
    prompts = ["What is the capital of France?", "Name a colour.", "What is the capital of France?"]
    outputs = reader.generate(prompts)
    assert "Paris" in outputs[0] and outputs[0] == outputs[2]
    assert outputs[1] and reader.seq2seq is False


def _tiny_seq2seq(folder) -> None:
    """A randomly initialised T5 with a word-level tokenizer, built from a config: no download."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    vocab = {
        "<pad>": 0,
        "</s>": 1,
        "<unk>": 2,
        **{w: i + 3 for i, w in enumerate("what is the capital of france".split())},
    }
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")
    fast.save_pretrained(folder)
    config = T5Config(
        vocab_size=len(vocab),
        d_model=16,
        d_ff=32,
        d_kv=8,
        num_layers=1,
        num_heads=2,
        decoder_start_token_id=0,
        pad_token_id=0,
        eos_token_id=1,
    )
    T5ForConditionalGeneration(config).save_pretrained(folder)


def test_transformers_seq2seq(tmp_path) -> None:
    _tiny_seq2seq(tmp_path)
    reader = build_reader(ReaderConfig(model=str(tmp_path), backend="transformers", max_tokens=5))
    assert reader.seq2seq is True
    outputs = reader.generate(["what is the capital of france", "what is"])
    assert len(outputs) == 2 and all(isinstance(text, str) for text in outputs)
    assert reader.generate(["what is"]) == outputs[1:]  # greedy: the same prompt gives the same text


@pytest.fixture(scope="module")
def llama_server():
    """llama-cpp-python's OpenAI-compatible server with SmolLM2 on 127.0.0.1 (a real server, no mock)."""
    from tests.llama_server import LlamaServer

    server = LlamaServer().wait_ready()
    try:
        yield server.base
    finally:
        server.stop()


def test_openai_compatible_reader_against_loopback_server(llama_server, smollm2) -> None:
    reader = build_reader(
        ReaderConfig(model="smollm2", max_tokens=8, openai=OpenAIOptions(base_url=llama_server, concurrency=2))
    )
    assert type(reader).__name__ == "OpenAIReader"
    prompts = ["Say the word blue.", "Say the word red.", "Say the word blue."]
    outputs = reader.generate(prompts)
    assert outputs[0] == outputs[2] and all(outputs)
    # Same model, same greedy decoding, same chat template: the server agrees with the local backend.
    assert outputs == smollm2.generate(prompts, max_tokens=8)


def test_openai_reader_needs_its_key(monkeypatch) -> None:
    monkeypatch.delenv("EOR_TEST_MISSING_KEY", raising=False)
    with pytest.raises(MissingSecretError, match="EOR_TEST_MISSING_KEY"):
        build_reader(
            ReaderConfig(
                model="gpt-4o-mini", backend="openai", openai=OpenAIOptions(api_key_env="EOR_TEST_MISSING_KEY")
            )
        )


def test_readers_declare_what_they_can_do(smollm2) -> None:
    """Capabilities are declared attributes (eor.readers.base.Reader), read the same way for foreign readers."""
    from types import SimpleNamespace

    from eor.evaluation.erag.time_and_memory import count_tokens
    from eor.readers.base import capable
    from eor.readers.openai_compat import OpenAIReader
    from eor.server.worker import default_batch

    class Foreign:
        name = "foreign"

        def generate(self, prompts, max_tokens=None):
            return ["x" for _ in prompts]

    openai = OpenAIReader("m", base_url="http://127.0.0.1:9")
    assert [capable(smollm2, c) for c in ("thread_safe", "batches", "counts_tokens")] == [False, False, True]
    assert [capable(openai, c) for c in ("thread_safe", "batches", "counts_tokens")] == [True, True, False]
    assert [capable(Foreign(), c) for c in ("thread_safe", "batches", "counts_tokens")] == [False, False, False]
    assert [capable(reader, "confidence") for reader in (smollm2, openai, Foreign())] == [True, True, False]
    assert [capable(reader, "scores") for reader in (smollm2, openai, Foreign())] == [True, False, False]  # no template
    tokens = smollm2._llm.tokenize(b"who wrote hamlet", add_bos=True, special=False)
    assert count_tokens(smollm2, "who wrote hamlet") == len(tokens) >= 3
    assert count_tokens(openai, "who wrote hamlet") is None and count_tokens(Foreign(), "x") is None
    config = SimpleNamespace(batch_size=8)
    assert default_batch(SimpleNamespace(reader=smollm2, config=config)) == 1  # one prompt at a time
    assert default_batch(SimpleNamespace(reader=openai, config=config)) == 8
    with pytest.raises(KeyError, match="unknown reader capability"):
        capable(smollm2, "flies")
