"""llama.cpp reader (llama-cpp-python): the default for GGUF models on a CPU.

Prompts reuse the KV cache of the prompt before them, deterministically. llama.cpp evaluates a prompt in
batches, and the floating-point sums of a token's computation depend on where the batch boundaries fall
(which kernel handles which group of tokens). Reusing an arbitrary shared prefix, as llama-cpp-python does by
default, moves those boundaries, and the same prompt got different greedy answers depending on what ran
before it. Here every prompt is evaluated in fixed chunks of `U = prefix_chunk` tokens counted from position
0 (`n_batch = n_ubatch = U`), and a prompt reuses only a whole number of chunks of the tokens it shares with
the previous *prompt* (never its generated tokens), always leaving at least one token to evaluate. The rest
is evaluated in exactly the chunks a fresh evaluation would use, so an answer depends on its prompt alone:
`tests/test_prefix_reuse.py` compares the final logits byte for byte, fresh, reused and in shuffled orders.

`prefix_chunk=0` is the former path: every prompt from an empty KV cache in llama.cpp's default batches
of 512 tokens.

The reader also scores given continuations after a prompt (`score`, the reader as judge, eor.core.likelihood):
the prompt evaluated as above, each continuation behind it in one batch counted from the prompt's end, logits
read for the continuation's tokens only; `tests/test_scoring.py` compares each token with llama-cpp-python's
own evaluation with every position's logits kept.

The model loads on first use, so a run served entirely by the generation cache never loads it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eor.core.cache_policy import memo
from eor.core.confidence import StepRecorder, token_logprob
from eor.core.errors import ConfigError, ContextOverflowError, ReaderError
from eor.core.likelihood import TURN_MARK, Likelihood, log_softmax_rows, turn_end_text
from eor.core.models import file_sha256
from eor.readers.base import BatchedReader, Generated
from eor.readers.llamacpp_batch import MultiSequenceDecoder
from eor.readers.llamacpp_states import DEFAULT_MAX_BYTES, PromptStates

if TYPE_CHECKING:
    import numpy as np

DEFAULT_PREFIX_CHUNK = 64
FRESH_BATCH = 512  # llama.cpp's default n_batch, the chunking of the former always-fresh path


def reusable_prefix(previous: list[int], tokens: list[int], chunk: int) -> int:
    """How many leading tokens of `tokens` may be kept from `previous` (the prompt evaluated before it): a
    multiple of `chunk` no longer than their common prefix, leaving at least one token to evaluate (its
    logits choose the first generated token). 0 when `chunk` is 0 (no reuse)."""
    if chunk <= 0:
        return 0
    common = 0
    for old, new in zip(previous, tokens, strict=False):
        if old != new:
            break
        common += 1
    return chunk * (min(common, len(tokens) - 1) // chunk)


class _PromptTokens(Exception):  # noqa: N818 - not an error: carries the tokens out of a dry run
    def __init__(self, tokens: list[int]) -> None:
        super().__init__("prompt tokens")
        self.tokens = tokens


def _last_logits(llm: Any) -> np.ndarray:
    """The logits of the latest decode's last token, as a numpy view of llama.cpp's buffer (valid until the
    next decode)."""
    import llama_cpp
    import numpy as np

    row = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(row, shape=(llm.n_vocab(),))


def _recorded(llm: Any, inner: Any, recorder: StepRecorder) -> Any:
    """`inner`'s tokens (a llama-cpp-python generation), each noted with the logits it was sampled from (the
    last row of the latest decode, which the sampler has just read): no extra evaluation."""
    sent = None
    try:
        while True:
            try:
                token = inner.send(sent)
            except StopIteration:
                return
            recorder.step(_last_logits(llm), token)
            sent = yield token
    finally:
        inner.close()


def evaluate_prompt(llm: Any, tokens: list[int]) -> np.ndarray:
    """Evaluate a prompt on a ChunkAlignedLlama as its `generate` does (whole chunks of the previous prompt kept,
    the rest in the chunks a fresh evaluation uses) and return a copy of its last token's logits."""
    restored = llm.states.restore(llm, tokens)
    if restored is not None:  # generation evaluated it a moment ago (eor.readers.llamacpp_states)
        llm.reused_tokens, llm.previous_prompt = len(tokens), tokens
        return restored.copy()
    keep = reusable_prefix(llm.previous_prompt, tokens, llm.prefix_chunk)
    llm.n_tokens = keep  # llama-cpp-python's eval drops the KV cache from here and evaluates the rest
    llm.reused_tokens = keep
    llm.previous_prompt = tokens
    llm.eval(tokens[keep:])
    logits = _last_logits(llm).copy()
    llm.states.save(llm, tokens, logits)
    return logits


def continuation_logprobs(llm: Any, first: np.ndarray, tokens: list[int]) -> list[float]:
    """Each token's log-probability after the prompt `llm` has just evaluated (`first`: its last logits): the
    continuation is evaluated behind the prompt in the KV cache, in chunks of n_batch counted from the prompt's
    end, logits read for its own tokens only; its cells are dropped again afterwards."""
    import llama_cpp
    import numpy as np

    values = [token_logprob(first, tokens[0])]
    start = llm.n_tokens
    fed = tokens[:-1]
    try:
        for offset in range(0, len(fed), llm.n_batch):
            part = fed[offset : offset + llm.n_batch]
            llm._batch.set_batch(batch=part, n_past=start + offset, logits_all=True)
            llm._ctx.decode(llm._batch)
            rows = np.ctypeslib.as_array(llama_cpp.llama_get_logits(llm.ctx), shape=(len(part), llm.n_vocab()))
            values += log_softmax_rows(rows, tokens[offset + 1 : offset + 1 + len(part)])
    finally:
        llm._ctx.kv_cache_seq_rm(-1, start, -1)
    return values


@memo
def _chunk_aligned_llama() -> type:
    """llama_cpp.Llama with chunk-aligned prefix reuse (imported lazily: llama-cpp-python is heavy)."""
    from llama_cpp import Llama

    class ChunkAlignedLlama(Llama):
        """`generate` keeps `reusable_prefix` tokens of the previous prompt in the KV cache and lets
        llama-cpp-python evaluate the rest; `eval` keeps the logits each prompt's first token is chosen from
        (`prompt_logits`), for checking that reuse changes nothing."""

        def __init__(self, *args: Any, prefix_chunk: int, states: PromptStates, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.prefix_chunk = prefix_chunk
            self.previous_prompt: list[int] = []
            self.reused_tokens = 0
            self.prompt_logits: np.ndarray | None = None
            self.recorder: Any = None  # an eor.core.confidence.StepRecorder while a generation's confidence is kept
            self.states = states  # the KV cells of the latest prompts, for scoring (eor.readers.llamacpp_states)
            self._keep_logits = False
            self._dry_run = False

        def chat_tokens(self, prompt: str) -> list[int]:
            """The tokens `create_chat_completion` evaluates for a one-message chat of `prompt`: the chat
            handler runs as for a completion, and `generate` records its tokens instead of evaluating them."""
            self._dry_run = True
            try:
                self.create_chat_completion(messages=[{"role": "user", "content": prompt}], max_tokens=1)
            except _PromptTokens as captured:
                return captured.tokens
            finally:
                self._dry_run = False
            raise ReaderError("llama-cpp-python completed a chat without generating")  # pragma: no cover

        def forget(self) -> None:
            """Evaluate the next prompt from an empty cache (after a failure the cache may be partial)."""
            self.previous_prompt = []

        def generate(self, tokens: Any, reset: bool = True, **kwargs: Any) -> Any:  # type: ignore[override]
            tokens = list(tokens)
            if self._dry_run:
                raise _PromptTokens(tokens)
            if reset:
                keep = reusable_prefix(self.previous_prompt, tokens, self.prefix_chunk)
                # llama-cpp-python matches the new tokens against input_ids[:n_tokens] (here the kept chunks,
                # equal to the new prompt's first `keep` tokens), drops the rest of the KV cache and
                # evaluates from there; with n_tokens 0 it resets and evaluates everything.
                self.n_tokens = keep
                self.reused_tokens = keep
                self.previous_prompt = tokens
                self._keep_logits = True
            inner = super().generate(tokens, reset=reset, **kwargs)
            return inner if self.recorder is None else _recorded(self, inner, self.recorder)

        def eval(self, tokens: Any) -> None:
            super().eval(tokens)
            if self._keep_logits:  # the prompt's evaluation (the first eval of a generate)
                self._keep_logits = False
                self.prompt_logits = _last_logits(self).copy()
                self.states.save(self, self.previous_prompt, self.prompt_logits)

    return ChunkAlignedLlama


class LlamaCppReader(BatchedReader):
    """Greedy chat completions from a local GGUF file, one prompt at a time, reusing whole chunks of the
    previous prompt (see the module's text). `prefix_chunk`: U (a multiple of 8), or 0 for the former path
    (every prompt fresh, batches of 512). `batch_threads`: threads for prompt evaluation (default: `threads`).
    `parallel`: decode up to this many prompts of a call together when each may generate more than
    `parallel_min_tokens` tokens (summaries, background documents); faster, but outputs can differ from
    solo generation after the first token (eor.readers.llamacpp_batch); 1 (the default): one at a time.
    `prompt_states`: bytes of the latest prompts' KV cells kept for scoring them without evaluating them again
    (eor.readers.llamacpp_states; 0: none)."""

    counts_tokens = True
    confidence = True
    scores = True

    def __init__(
        self,
        model_path: Path,
        *,
        name: str | None = None,
        context_tokens: int = 8192,
        threads: int | None = None,
        batch_threads: int | None = None,
        max_tokens: int = 32,
        seed: int = 0,
        prefix_chunk: int = DEFAULT_PREFIX_CHUNK,
        parallel: int = 1,
        parallel_min_tokens: int = 64,
        record_confidence: bool = True,
        prompt_states: int = DEFAULT_MAX_BYTES,
    ) -> None:
        super().__init__()
        try:
            import llama_cpp  # noqa: F401  (checked now; the model itself loads on first use)
        except ImportError as exc:  # pragma: no cover - llama-cpp-python is a core dependency
            raise ReaderError("llama-cpp-python is not installed: pip install llama-cpp-python") from exc
        if prefix_chunk < 0 or prefix_chunk % 8:
            raise ConfigError(f"reader prefix_chunk must be 0 or a positive multiple of 8, not {prefix_chunk}")
        self.model_path = Path(model_path)
        if not self.model_path.is_file():
            raise ReaderError(f"model file not found: {self.model_path}")
        self.name = name or self.model_path.name
        self.default_max_tokens = max_tokens
        self.context_tokens = context_tokens
        self.threads = threads or os.cpu_count() or 1
        self.batch_threads = batch_threads or self.threads
        self.seed = seed
        self.prefix_chunk = prefix_chunk
        if parallel < 1 or (parallel > 1 and parallel > (prefix_chunk or FRESH_BATCH)):
            raise ConfigError(f"reader parallel must be between 1 and the chunk size, not {parallel}")
        self.parallel = parallel
        self.parallel_min_tokens = parallel_min_tokens
        self.record_confidence = record_confidence
        self.confidence = record_confidence  # the capability: what this reader's completions carry
        self._identity: str | None = None
        self._model = None
        self._decoder: MultiSequenceDecoder | None = None
        self._end_of_turn: int | None = None
        self.prompt_states = prompt_states

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def _llm(self):  # noqa: ANN202 - ChunkAlignedLlama, imported lazily
        """The llama.cpp model, loaded on first use."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    batch = self.prefix_chunk or FRESH_BATCH
                    try:
                        self._model = _chunk_aligned_llama()(
                            model_path=str(self.model_path),
                            prefix_chunk=self.prefix_chunk,
                            n_ctx=self.context_tokens,
                            n_batch=batch,
                            n_ubatch=batch,
                            n_threads=self.threads,
                            n_threads_batch=self.batch_threads,
                            seed=self.seed,
                            verbose=False,
                            states=PromptStates(self.prompt_states),
                        )
                    except ValueError as exc:  # llama-cpp-python's error for a file it cannot load
                        raise ReaderError(f"{self.name}: cannot load {self.model_path}: {exc}") from None
        return self._model

    @property
    def identity(self) -> str:
        """Backend, model file and its sha256 (memoised, see eor.core.models.file_sha256), context size, the
        llama-cpp-python version and the chunk size U of prefix reuse (absent for the always-fresh path, whose
        identity is unchanged). Not the thread count (each dot product is summed by one thread) nor the seed
        (decoding is greedy). U stays: with U = 64 or 128 the logits equal those of the fresh path byte for
        byte on the prompts we tried, with U = 32 some did not, so outputs may depend on it; so does
        batched decoding (`parallel`), which changes outputs."""
        if self._identity is None:
            import llama_cpp

            digest = file_sha256(self.model_path)[:16]
            chunk = f"|chunk={self.prefix_chunk}" if self.prefix_chunk else ""
            parallel = f"|parallel={self.parallel}>{self.parallel_min_tokens}" if self.parallel > 1 else ""
            self._identity = (
                f"llama.cpp:{self.model_path.name}@sha256:{digest}|n_ctx={self.context_tokens}"
                f"|llama-cpp-python={llama_cpp.__version__}{chunk}{parallel}"
            )
        return self._identity

    def forget(self) -> None:
        """Evaluate the next prompt from an empty KV cache: no prefix of the previous prompt is kept."""
        self._llm.forget()

    def chat_tokens(self, prompt: str) -> list[int]:
        """The tokens the reader evaluates for `prompt` (the one-message chat it answers), without evaluating
        them: what replays of prefix reuse compare (eor.runs.costs)."""
        return self._llm.chat_tokens(prompt)

    def count_tokens(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=False))

    def prompt_logits(self, prompt: str) -> bytes:
        """The raw float32 logits the first answer token of `prompt` is chosen from, evaluated the way
        `generate` evaluates it (reusing chunks of the previous prompt): for checking determinism."""
        self._generate_one(prompt, 1)
        return self._llm.prompt_logits.tobytes()

    def end_of_turn(self) -> int:
        """The token that ends the assistant's turn: the first token the model's chat template writes after an
        assistant message (ChatML's `<|im_end|>`), else llama.cpp's end of sequence."""
        if self._end_of_turn is None:
            from llama_cpp import llama_chat_format

            llm = self._llm
            template = llm.metadata.get("tokenizer.chat_template")
            end = None
            if template:

                def special(token: int) -> str:
                    return llm.detokenize([token], special=True).decode("utf-8", errors="ignore") if token >= 0 else ""

                formatter = llama_chat_format.Jinja2ChatFormatter(
                    template=template, eos_token=special(llm.token_eos()), bos_token=special(llm.token_bos())
                )
                chat: Any = [{"role": "user", "content": "?"}, {"role": "assistant", "content": TURN_MARK}]
                end = turn_end_text(formatter(messages=chat).prompt)
            tokens = llm.tokenize(end.encode("utf-8"), add_bos=False, special=True) if end else []
            self._end_of_turn = tokens[0] if tokens else int(llm.token_eos())
        return self._end_of_turn

    def continuation_tokens(self, text: str) -> list[int]:
        """The tokens a continuation is scored as: its text's tokens, then the end of the assistant's turn."""
        return [*self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False), self.end_of_turn()]

    def _score(self, prompt: str, continuations: list[str]) -> list[Likelihood]:
        """The prompt evaluated once (reusing whole chunks of the prompt before, as for generation), or its KV
        cells put back when it was evaluated lately (eor.readers.llamacpp_states), then each continuation alone
        behind it: a score depends on its prompt and continuation only."""
        llm = self._llm
        tokens = llm.chat_tokens(prompt)
        followers = [self.continuation_tokens(text) for text in continuations]
        longest = max(len(follower) for follower in followers)
        if (needed := len(tokens) + longest) > self.context_tokens:
            raise ContextOverflowError(
                f"{self.name}: Requested tokens ({needed}) exceed context window of {self.context_tokens}"
            )
        try:
            first = evaluate_prompt(llm, tokens)
            return [Likelihood(tuple(continuation_logprobs(llm, first, follower))) for follower in followers]
        except BaseException:
            llm.forget()
            raise

    def _generate_batch(self, prompts: list[str], max_tokens: int) -> Sequence[Generated | tuple[str, float] | str]:
        if self.parallel < 2 or len(prompts) < 2 or max_tokens <= self.parallel_min_tokens:
            return super()._generate_batch(prompts, max_tokens)
        return self._decode_together(prompts, max_tokens)

    def _decode_together(self, prompts: list[str], max_tokens: int) -> list[Generated]:
        """Several prompts decoded at once (eor.readers.llamacpp_batch), from the prompt tokens and into the
        text of a solo `create_chat_completion`."""
        llm = self._llm
        if self._decoder is None:
            self._decoder = MultiSequenceDecoder(
                llm,
                sequences=self.parallel,
                chunk=self.prefix_chunk or FRESH_BATCH,
                context_tokens=self.context_tokens,
                threads=self.threads,
                batch_threads=self.batch_threads,
            )
        token_lists = [llm.chat_tokens(prompt) for prompt in prompts]
        results = []
        for tokens, decoded in zip(token_lists, self._decoder.decode(token_lists, max_tokens), strict=True):
            text = llm.detokenize(decoded.tokens, prev_tokens=tokens).decode("utf-8", errors="ignore")
            results.append(
                Generated(
                    text,
                    seconds=decoded.prompt_seconds + decoded.generation_seconds,
                    prompt_tokens=decoded.prompt_tokens,
                    generated_tokens=len(decoded.tokens),
                    prompt_seconds=decoded.prompt_seconds,
                    generation_seconds=decoded.generation_seconds,
                    reused_tokens=0,
                )
            )
        return results

    def _generate_one(self, prompt: str, max_tokens: int) -> Generated:
        import llama_cpp

        llm = self._llm
        llama_cpp.llama_perf_context_reset(llm.ctx)
        llm.recorder = recorder = StepRecorder() if self.record_confidence else None
        try:
            response = llm.create_chat_completion(
                messages=[{"role": "user", "content": prompt}], temperature=0.0, max_tokens=max_tokens
            )
        except ValueError as exc:  # llama-cpp-python raises ValueError when the prompt exceeds the context
            llm.forget()
            error = ContextOverflowError if "context window" in str(exc) else ReaderError
            raise error(f"{self.name}: {exc}") from exc
        except BaseException:
            llm.forget()
            raise
        finally:
            llm.recorder = None
        perf = llama_cpp.llama_perf_context(llm.ctx)  # what llama.cpp itself evaluated, and its time
        usage = response.get("usage") or {}
        generated = usage.get("completion_tokens", int(perf.n_eval))
        return Generated(
            response["choices"][0]["message"]["content"] or "",
            prompt_tokens=int(perf.n_p_eval),  # evaluated; the reused chunks are not counted
            generated_tokens=generated,
            prompt_seconds=perf.t_p_eval_ms / 1000,
            generation_seconds=perf.t_eval_ms / 1000,
            reused_tokens=llm.reused_tokens,
            confidence=None if recorder is None else recorder.confidence(generated),  # the text's, not the end token
        )
