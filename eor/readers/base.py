"""The reader protocol and the batching logic shared by the backends."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from eor.errors import InputError


@runtime_checkable
class Reader(Protocol):
    """Any LLM that turns a batch of prompts into completions, deterministically (greedy) by default.

    A reader may also have `identity`: a string that changes whenever its outputs for a prompt could change
    (backend, model file hash, settings that affect outputs). Only readers with an identity are cached in
    the generation cache (eor.generation_cache); a reader without one is always asked.
    """

    name: str

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]: ...


class BatchedReader:
    """Base class: de-duplicates a batch and orders it so that neighbouring prompts share long prefixes.

    Sorting prompts puts e.g. `Wiki@1`, `Wiki@3` and `Wiki@10` of the same question next to each other,
    which lets backends with a prefix cache (an OpenAI-compatible server with prompt caching, e.g. vLLM or
    llama-server) reuse most of the prompt processing. The in-process llama.cpp reader does not reuse
    prefixes, so that its answers are reproducible (see `LlamaCppReader`).
    Subclasses implement `_generate_batch` or `_generate_one`; `last_seconds` holds the generation time
    of each prompt of the latest call, in the caller's order.
    """

    name = "reader"
    default_max_tokens = 32

    def __init__(self) -> None:
        self.last_seconds: list[float] = []

    @property
    def identity(self) -> str | None:
        """What the outputs depend on besides the prompt and max_tokens (see `Reader`); None: not cacheable."""
        return None

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        if any(not isinstance(prompt, str) for prompt in prompts):
            raise InputError("reader prompts must be strings")
        unique = sorted(set(prompts))
        timed = dict(
            zip(unique, self._generate_batch(unique, max_tokens or self.default_max_tokens), strict=True)
        )
        self.last_seconds = [timed[prompt][1] for prompt in prompts]
        return [timed[prompt][0] for prompt in prompts]

    def _generate_batch(self, prompts: list[str], max_tokens: int) -> list[tuple[str, float]]:
        """(completion, seconds) per prompt; the default runs prompts one by one."""
        results = []
        for prompt in prompts:
            started = time.perf_counter()
            text = self._generate_one(prompt, max_tokens)
            results.append((text, time.perf_counter() - started))
        return results

    def _generate_one(self, prompt: str, max_tokens: int) -> str:
        raise NotImplementedError
