"""The KV cache of the prompts a llama.cpp reader evaluated last, kept so that the reader as judge scores
candidates behind a prompt that generation has just evaluated without evaluating it again.

After a prompt's evaluation (before its answer is generated) the reader copies llama.cpp's state of sequence 0,
the prompt's KV cells alone (`llama_state_seq_get_data`: about 12 KB a token for Qwen2.5-0.5B), with the
logits of its last token. Scoring that prompt later puts the cells back (`llama_state_seq_set_data`) instead of
evaluating it: the cells are the bytes evaluation made, so the scores are those of evaluating it again
(`tests/test_scoring.py`). The copies are bounded in bytes, the least recently used dropped first.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import Any

DEFAULT_MAX_BYTES = 96 * 2**20  # the 7-member pool's prompts of one question take about 30 MB with Qwen2.5-0.5B


class PromptStates:
    """Prompt tokens → (their KV cells as llama.cpp serialises sequence 0, their last token's logits);
    `max_bytes` 0 keeps none."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.restored = 0  # prompts put back instead of evaluated, since the reader was made
        self._states: OrderedDict[tuple[int, ...], tuple[bytes, Any]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._states)

    def save(self, llm: Any, tokens: list[int], logits: Any) -> None:
        """Copy the KV cells of the prompt `llm` has just evaluated (`tokens`, nothing else in its cache)."""
        import llama_cpp

        if self.max_bytes <= 0:
            return
        key = tuple(tokens)
        size = llama_cpp.llama_state_seq_get_size(llm.ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(llm.ctx, buffer, size, 0)
        data = bytes(buffer)[:written]
        if key in self._states:
            self._bytes -= len(self._states.pop(key)[0])
        self._states[key] = (data, logits)
        self._bytes += len(data)
        while self._bytes > self.max_bytes and len(self._states) > 1:
            self._bytes -= len(self._states.popitem(last=False)[1][0])

    def restore(self, llm: Any, tokens: list[int]) -> Any:
        """Put the saved cells of `tokens` back as sequence 0 (the cache emptied first) and return the last
        token's logits; None when they are not kept (the caller evaluates the prompt)."""
        import llama_cpp

        key = tuple(tokens)
        found = self._states.get(key)
        if found is None:
            return None
        self._states.move_to_end(key)
        data, logits = found
        llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(llm.ctx), -1, 0, -1)
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if llama_cpp.llama_state_seq_set_data(llm.ctx, buffer, len(data), 0) != len(data):
            llm.n_tokens = 0  # nothing trustworthy in the cache: evaluate
            return None
        llm.input_ids[: len(tokens)] = tokens
        llm.n_tokens = len(tokens)
        self.restored += 1
        return logits
