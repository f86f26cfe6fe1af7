"""The reader protocol and the batching logic shared by the backends."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from eor.core.confidence import Confidence
from eor.core.errors import InputError, ReaderError
from eor.core.likelihood import Likelihood


@runtime_checkable
class Reader(Protocol):
    """Any LLM that turns a batch of prompts into completions, deterministically (greedy) by default.

    A reader may also have `identity`: a string that changes whenever its outputs for a prompt could change
    (backend, model file hash, settings that affect outputs). Only readers with an identity are cached in
    the generation cache (eor.runs.generation_cache); a reader without one is always asked.

    What a reader can do is declared in attributes (`capable` reads them; a reader that does not declare
    one has the default of CAPABILITIES):

    - `thread_safe` (False): `generate` may run on several threads at once; otherwise eor serialises calls;
    - `batches` (False): the prompts of several questions in one call run faster than one by one, so the
      server answers waiting questions together (llama.cpp runs prompts one by one: False);
    - `counts_tokens` (False): `count_tokens(text)` gives the prompt tokens by the reader's own tokenizer;
    - `confidence` (False): its completions carry the log-probability of each generated token
      (`Generated.confidence`, eor.core.confidence), read where the backend computed them to decode;
    - `scores` (False): `score(prompt, continuations)` gives the log-probability of given continuations after
      a prompt, token by token, the end of the assistant's turn included (eor.core.likelihood).
    """

    name: str

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]: ...


CAPABILITIES: dict[str, bool] = {
    "thread_safe": False,
    "batches": False,
    "counts_tokens": False,
    "confidence": False,
    "scores": False,
}


def capable(reader: Any, capability: str) -> bool:
    """Whether `reader` declares `capability` (see `Reader`)."""
    if capability not in CAPABILITIES:
        raise KeyError(f"unknown reader capability {capability!r}; known: {', '.join(CAPABILITIES)}")
    return bool(getattr(reader, capability, CAPABILITIES[capability]))


@dataclass(frozen=True)
class Generated:
    """One completion with what it cost: seconds in all, and where the backend reports them (None otherwise)
    the prompt tokens it evaluated and the generated tokens, with the seconds of each phase, the prompt
    tokens it kept from the prompt before (`reused_tokens`, a backend with prefix reuse), and the reader's
    confidence in each generated token (a backend with the `confidence` capability)."""

    text: str
    seconds: float = 0.0
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    prompt_seconds: float | None = None
    generation_seconds: float | None = None
    reused_tokens: int | None = None
    confidence: Confidence | None = None


class BatchedReader:
    """Base class: de-duplicates a batch, generates each distinct prompt once, in the order given.

    The generation stage (eor.generation) orders a batch so that prompts sharing long prefixes run back to
    back (e.g. `Wiki@1` and `Wiki@3` of one question), which lets backends with a prefix cache (an
    OpenAI-compatible server with prompt caching, e.g. vLLM or llama-server) reuse prompt processing.

    A backend that is not thread-safe (`thread_safe = False`, the default) owns a lock: one batch at a time
    enters it, whoever calls. Subclasses implement `_generate_batch` or `_generate_one` (returning text, a
    (text, seconds) pair or a `Generated`). `generate_timed` returns `Generated` per prompt; `last_seconds`
    holds the seconds of each prompt of the latest call, in the caller's order.
    """

    name = "reader"
    default_max_tokens = 32
    thread_safe = False
    batches = False
    counts_tokens = False
    confidence = False
    scores = False

    def __init__(self) -> None:
        self.last_seconds: list[float] = []
        self._lock = threading.RLock()

    @property
    def identity(self) -> str | None:
        """What the outputs depend on besides the prompt and max_tokens (see `Reader`); None: not cacheable."""
        return None

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        return [generated.text for generated in self.generate_timed(prompts, max_tokens)]

    def count_tokens(self, text: str) -> int:
        """The prompt tokens of `text` by this reader's tokenizer (readers with `counts_tokens`)."""
        raise NotImplementedError(f"{type(self).__name__} does not count tokens")

    def generate_timed(self, prompts: list[str], max_tokens: int | None = None) -> list[Generated]:
        """A `Generated` per prompt, in the caller's order (a repeated prompt is generated once)."""
        if any(not isinstance(prompt, str) for prompt in prompts):
            raise InputError("reader prompts must be strings")
        unique = list(dict.fromkeys(prompts))
        lock = contextlib.nullcontext() if self.thread_safe else self._lock
        with lock:
            outputs = self._generate_batch(unique, max_tokens or self.default_max_tokens)
            if len(outputs) != len(unique):
                raise ReaderError(f"{self.name}: {len(outputs)} completions for {len(unique)} prompts")
            done = dict(zip(unique, map(as_generated, outputs), strict=True))
            self.last_seconds = [done[prompt].seconds for prompt in prompts]
        return [done[prompt] for prompt in prompts]

    def score(self, prompt: str, continuations: Sequence[str]) -> list[Likelihood]:
        """The log-probability of each continuation after `prompt` (readers with `scores`), in the caller's
        order; a repeated continuation is scored once, and each score depends on the prompt and its
        continuation alone, not on what else is scored with it."""
        if not isinstance(prompt, str) or any(not isinstance(text, str) for text in continuations):
            raise InputError("a prompt and its continuations to score must be strings")
        if not capable(self, "scores"):
            raise ReaderError(self.why_not_scoring())
        unique = list(dict.fromkeys(continuations))
        lock = contextlib.nullcontext() if self.thread_safe else self._lock
        with lock:
            scored = list(self._score(prompt, unique)) if unique else []
        if len(scored) != len(unique):
            raise ReaderError(f"{self.name}: {len(scored)} scores for {len(unique)} continuations")
        done = dict(zip(unique, scored, strict=True))
        return [done[text] for text in continuations]

    def why_not_scoring(self) -> str:
        """What a reader without `scores` says when asked to score."""
        return f"{self.name}: this {type(self).__name__} cannot score continuations"

    def _score(self, prompt: str, continuations: list[str]) -> Sequence[Likelihood]:
        raise NotImplementedError

    def _generate_batch(self, prompts: list[str], max_tokens: int) -> Sequence[Generated | tuple[str, float] | str]:
        """A completion per prompt; the default runs prompts one by one through `_generate_one`."""
        results = []
        for prompt in prompts:
            started = time.perf_counter()
            output = as_generated(self._generate_one(prompt, max_tokens))
            results.append(dataclasses.replace(output, seconds=time.perf_counter() - started))
        return results

    def _generate_one(self, prompt: str, max_tokens: int) -> str | Generated:
        raise NotImplementedError


def as_generated(output: Any) -> Generated:
    """A backend's output as `Generated`: a Generated, a (text, seconds) pair, or bare text."""
    if isinstance(output, Generated):
        return output
    if isinstance(output, tuple) and len(output) == 2:
        return Generated(str(output[0]), float(output[1]))
    if isinstance(output, str):
        return Generated(output)
    raise ReaderError(f"a reader backend returned {type(output).__name__}, not text")


def reader_identity(reader: Any) -> str | None:
    """The reader's `identity` (see `Reader`), or None when it has none."""
    identity = getattr(reader, "identity", None)
    return identity if isinstance(identity, str) and identity else None
