"""A reader in front of another reader and the generation cache: hits come from the cache, the distinct misses
go to the wrapped reader in one call and are stored.

Every component that generates (the ensemble's answers, PK's background documents, @CP's summaries, eRAG's
labels) goes through one `CachedReader`, so an identical prompt is generated once whichever asks for it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from eor.errors import ConfigError, InputError, ReaderError
from eor.generation_cache import Generation, GenerationCache, generation_key

log = logging.getLogger(__name__)


def reader_identity(reader: Any) -> str | None:
    """The reader's `identity` (see eor.readers.base.Reader), or None when it has none."""
    identity = getattr(reader, "identity", None)
    return identity if isinstance(identity, str) and identity else None


@dataclass
class CacheCounters:
    """Distinct prompts per call, summed over calls: found in the cache (`hits`), not found (`misses`), sent
    to the wrapped reader and stored (`generated`); `requests` counts prompts asked for, repeats included;
    `calls` counts calls to the wrapped reader."""

    requests: int = 0
    hits: int = 0
    misses: int = 0
    generated: int = 0
    calls: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class CachedReader:
    """`generate(prompts, max_tokens=None)` answered from `cache` where it can, by `reader` otherwise.

    The key of a prompt is (the reader's identity, the prompt, the effective max_tokens). A hit reports, in
    `last_seconds`, the seconds its generation took when it was made, so the records of a cached run match
    those of an uncached one (the run's wall-clock `timings` show the real time). `last_hits` says which
    prompts of the latest call were hits. Both are kept per thread. A failing reader stores nothing.
    """

    def __init__(self, reader: Any, cache: GenerationCache, *, identity: str | None = None) -> None:
        identity = identity or reader_identity(reader)
        if identity is None:
            raise ConfigError(
                f"reader {getattr(reader, 'name', type(reader).__name__)!r} has no `identity`, so its outputs "
                "cannot be cached; give it an `identity` string or turn the cache off"
            )
        self.reader = reader
        self.cache = cache
        self.identity = identity
        self.name = getattr(reader, "name", type(reader).__name__)
        self.default_max_tokens = getattr(reader, "default_max_tokens", None)
        self.counters = CacheCounters()
        self._local = threading.local()
        self._counting = threading.Lock()

    @property
    def last_seconds(self) -> list[float]:
        return list(getattr(self._local, "seconds", []))

    @property
    def last_hits(self) -> list[bool]:
        return list(getattr(self._local, "hits", []))

    def key(self, prompt: str, max_tokens: int | None = None) -> str:
        return generation_key(self.identity, prompt, {"max_tokens": max_tokens or self.default_max_tokens})

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        if any(not isinstance(prompt, str) for prompt in prompts):
            raise InputError("reader prompts must be strings")
        keys = {prompt: self.key(prompt, max_tokens) for prompt in dict.fromkeys(prompts)}
        found = self.cache.get_many(keys.values())
        done = {prompt: (found[key].text, found[key].seconds) for prompt, key in keys.items() if key in found}
        missing = [prompt for prompt in keys if prompt not in done]
        if missing:
            done.update(self._generate(missing, max_tokens, keys))
        with self._counting:
            self.counters.requests += len(prompts)
            self.counters.hits += len(keys) - len(missing)
            self.counters.misses += len(missing)
            if missing:
                self.counters.calls += 1
                self.counters.generated += len(missing)
        self._local.seconds = [done[prompt][1] for prompt in prompts]
        self._local.hits = [prompt not in missing for prompt in prompts]
        return [done[prompt][0] for prompt in prompts]

    def _generate(
        self, prompts: list[str], max_tokens: int | None, keys: dict[str, str]
    ) -> dict[str, tuple[str, float]]:
        """The wrapped reader's outputs for `prompts` (one call), stored before they are returned."""
        started = time.perf_counter()
        if max_tokens is None:
            outputs = self.reader.generate(prompts)
        else:
            outputs = self.reader.generate(prompts, max_tokens=max_tokens)
        elapsed = time.perf_counter() - started
        if len(outputs) != len(prompts) or any(not isinstance(text, str) for text in outputs):
            raise ReaderError(f"the reader returned {len(outputs)} completions for {len(prompts)} prompts")
        seconds = list(getattr(self.reader, "last_seconds", None) or [])
        if len(seconds) != len(prompts):
            seconds = [elapsed / len(prompts)] * len(prompts)
        self.cache.put_many(
            Generation(keys[prompt], self.identity, text, float(spent))
            for prompt, text, spent in zip(prompts, outputs, seconds, strict=True)
        )
        return {prompt: (text, float(spent)) for prompt, text, spent in zip(prompts, outputs, seconds, strict=True)}

    def __getattr__(self, name: str) -> Any:
        # Everything else (context_tokens, the tokenizer, ...) is the wrapped reader's.
        if name == "reader":  # not set yet (during unpickling): avoid recursing
            raise AttributeError(name)
        return getattr(self.reader, name)


def with_cache(reader: Any, cache: GenerationCache | None) -> Any:
    """`reader` behind `cache` (a CachedReader), or `reader` itself when there is no cache or the reader has
    no identity (its outputs cannot be keyed safely)."""
    if cache is None:
        return reader
    if isinstance(reader, CachedReader):
        return reader
    if reader_identity(reader) is None:
        log.info("reader %r has no identity: its generations are not cached", getattr(reader, "name", reader))
        return reader
    return CachedReader(reader, cache)
