"""Greedy decoding of several prompts at once through llama.cpp's multi-sequence batches (`parallel` > 1).

An explicit option, off by default, because it trades exactness for speed. Each prompt is a sequence of
its own on a second llama.cpp context of the same model; the prompts are evaluated one by one in the
reader's chunks of U tokens, then every unfinished sequence advances by one greedy token per decode. A
decode of several sequences multiplies the weights by several columns at once, and llama.cpp's kernels sum
those products in another order than for one column: the first generated token is the solo one, later
tokens can differ (measured: 4 of 8 summaries of 100 tokens differed from solo generation). On this 2-core
CPU a decode step is compute-bound, so eight sequences per step made the generation phase only 1.4× faster
(a unified KV buffer; with a KV stream per sequence, 1.0× and the same differences), and each prompt is
evaluated without reusing its neighbour's chunks. docs/performance.md has the measurements. On a machine
whose decode is memory-bound (a GPU, many cores) the gain is larger.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Any

from eor.core.errors import ContextOverflowError, ReaderError


@dataclass
class Decoded:
    """One sequence's generated tokens and its share of the seconds of each phase."""

    tokens: list[int]
    prompt_tokens: int
    prompt_seconds: float = 0.0
    generation_seconds: float = 0.0


class MultiSequenceDecoder:
    """`decode(token_lists, max_tokens)` → a `Decoded` per prompt, `sequences` prompts at a time. `llm` is the
    reader's loaded llama_cpp.Llama (its model is shared, not loaded again)."""

    def __init__(
        self, llm: Any, *, sequences: int, chunk: int, context_tokens: int, threads: int, batch_threads: int
    ) -> None:
        import llama_cpp

        if sequences < 2 or chunk < sequences:
            raise ReaderError(f"batched decoding needs 2 to {chunk} sequences, not {sequences}")
        self.sequences, self.chunk, self.context_tokens = sequences, chunk, context_tokens
        self._llama_cpp = llama_cpp
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = sequences * context_tokens  # one buffer shared by every sequence
        params.n_batch = params.n_ubatch = chunk
        params.n_seq_max = sequences
        params.kv_unified = True
        params.n_threads, params.n_threads_batch = threads, batch_threads
        self._ctx = llama_cpp.llama_init_from_model(llm.model, params)
        if not self._ctx:
            raise ReaderError(f"llama.cpp could not make a context for {sequences} sequences")
        self._batch = llama_cpp.llama_batch_init(chunk, 0, 1)
        self._vocab = llama_cpp.llama_model_get_vocab(llm.model)
        self._n_vocab = llm.n_vocab()
        self._finalizer = weakref.finalize(self, _free, llama_cpp, self._ctx, self._batch)

    def close(self) -> None:
        self._finalizer()

    def decode(self, token_lists: list[list[int]], max_tokens: int) -> list[Decoded]:
        for tokens in token_lists:  # as llama-cpp-python: a prompt must fit; its generation stops at the end
            if len(tokens) >= self.context_tokens:
                raise ContextOverflowError(
                    f"Requested tokens ({len(tokens)}) exceed context window of {self.context_tokens}"
                )
        results: list[Decoded] = []
        for start in range(0, len(token_lists), self.sequences):
            results += self._decode_group(token_lists[start : start + self.sequences], max_tokens)
        return results

    # -- internals --------------------------------------------------------------------------------------------

    def _decode_group(self, token_lists: list[list[int]], max_tokens: int) -> list[Decoded]:
        import numpy as np

        llama_cpp = self._llama_cpp
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(self._ctx), True)
        done = [Decoded([], len(tokens)) for tokens in token_lists]
        following: dict[int, int] = {}
        for seq, tokens in enumerate(token_lists):  # each prompt alone, in the chunks a fresh solo run uses
            started = time.perf_counter()
            for offset in range(0, len(tokens), self.chunk):
                part = tokens[offset : offset + self.chunk]
                self._run([(token, offset + i, seq, i == len(part) - 1) for i, token in enumerate(part)])
            following[seq] = int(np.argmax(self._logits(len(part) - 1)))
            done[seq].prompt_seconds = time.perf_counter() - started
        active = list(range(len(token_lists)))
        limits = [min(max_tokens, self.context_tokens - len(tokens)) for tokens in token_lists]
        while True:
            active = [seq for seq in active if self._accept(done[seq], following[seq], limits[seq])]
            if not active:
                return done
            started = time.perf_counter()
            self._run(
                [(done[seq].tokens[-1], len(token_lists[seq]) + len(done[seq].tokens) - 1, seq, True) for seq in active]
            )
            for row, seq in enumerate(active):
                following[seq] = int(np.argmax(self._logits(row)))
            share = (time.perf_counter() - started) / len(active)
            for seq in active:
                done[seq].generation_seconds += share

    def _accept(self, decoded: Decoded, token: int, max_tokens: int) -> bool:
        """Append the greedy token unless it ends the sequence; True while the sequence goes on."""
        if self._llama_cpp.llama_vocab_is_eog(self._vocab, token):
            return False
        decoded.tokens.append(token)
        return len(decoded.tokens) < max_tokens

    def _run(self, entries: list[tuple[int, int, int, bool]]) -> None:
        """Decode (token, position, sequence, wants logits) entries as one batch."""
        batch = self._batch
        batch.n_tokens = len(entries)
        for i, (token, position, seq, logits) in enumerate(entries):
            batch.token[i], batch.pos[i], batch.logits[i] = token, position, logits
            batch.seq_id[i][0], batch.n_seq_id[i] = seq, 1
        status = self._llama_cpp.llama_decode(self._ctx, batch)
        if status != 0:
            raise ReaderError(f"llama.cpp decode failed with status {status}")

    def _logits(self, row: int) -> Any:
        import numpy as np

        return np.ctypeslib.as_array(self._llama_cpp.llama_get_logits_ith(self._ctx, row), shape=(self._n_vocab,))


def _free(llama_cpp: Any, ctx: Any, batch: Any) -> None:
    llama_cpp.llama_batch_free(batch)
    llama_cpp.llama_free(ctx)
