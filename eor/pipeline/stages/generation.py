"""The generation stage: the one way into the reader. Answers, PK's background documents, @CP's summaries (and
any future retriever that needs the reader) submit their prompts here.

For each request the stage de-duplicates the prompts, reads back those the generation cache
(eor.runs.generation_cache) already holds, orders the rest so that prompts sharing a prefix run back to back
(sorted: `Wiki@1` and `Wiki@3` of one question are neighbours), sends them to the reader in one call (or in the
calls a caller cuts them into, e.g. eRAG's `batch_size` questions per call, each sorted) and stores the
outputs. It meters what it did (prompts, cache hits, prompt and generated tokens, reader seconds)
for the process and for whoever is listening (`metering()`), and it has one failure policy
(`complete_each`): a batch that fails is retried prompt by prompt, so one bad prompt costs only its own
output.

A reader that is not thread-safe owns its lock (eor.readers.base.BatchedReader); a foreign reader without
one (any object with `generate(prompts, max_tokens=None)`) is serialised here by a lock per reader object,
shared by every stage over it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from dataclasses import asdict, dataclass, fields
from typing import Any, Self

from eor.core.confidence import Confidence
from eor.core.errors import ConfigError, InputError, ReaderError
from eor.core.faults import failpoint
from eor.core.likelihood import Likelihood
from eor.readers.base import BatchedReader, Generated, as_generated, capable, reader_identity
from eor.runs.generation_cache import Generation, GenerationCache, generation_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Completion:
    """One output of the stage. `seconds`: what its generation took (for a cache hit, when it was made, so
    that a cached run's records equal an uncached one's); `cached`: read back from the cache; token counts and
    the reader's confidence where the reader reports them (a cache hit: as they were when it was made)."""

    text: str
    seconds: float = 0.0
    cached: bool = False
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    prompt_seconds: float | None = None
    generation_seconds: float | None = None
    reused_tokens: int | None = None
    confidence: Confidence | None = None

    def meta(self) -> dict[str, Any] | None:
        """What the cache keeps beside the text: token counts and confidence (None: nothing reported)."""
        tokens = {
            name: value
            for name, value in (
                ("prompt", self.prompt_tokens),
                ("generated", self.generated_tokens),
                ("reused", self.reused_tokens),
            )
            if value is not None
        }
        meta: dict[str, Any] = {"tokens": tokens} if tokens else {}
        if self.confidence is not None:
            meta["confidence"] = self.confidence.to_json()
        return meta or None

    @classmethod
    def from_cache(cls, entry: Generation) -> Completion:
        tokens = (entry.meta or {}).get("tokens") or {}
        return cls(
            entry.text,
            entry.seconds,
            cached=True,
            prompt_tokens=tokens.get("prompt"),
            generated_tokens=tokens.get("generated"),
            reused_tokens=tokens.get("reused"),
            confidence=Confidence.from_json((entry.meta or {}).get("confidence")),
        )


class _Counts:
    """Counters of a dataclass, added and subtracted field by field."""

    def add(self, other: Self) -> None:
        for item in fields(self):  # type: ignore[arg-type]
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))

    def since(self, earlier: Self) -> Self:
        """What was done after `earlier`, a copy of these counts taken before (`dataclasses.replace(stats)`)."""
        return type(self)(**{f.name: getattr(self, f.name) - getattr(earlier, f.name) for f in fields(self)})  # type: ignore[arg-type]


@dataclass
class GenerationStats(_Counts):
    """What the stage did: prompts asked for (`requests`, repeats included), the distinct ones among them
    (`unique`), of those read back from the cache (`cache_hits`) and sent to the reader (`generated`) in
    `calls` calls, and the reader's work on them: prompt tokens evaluated and generated tokens with the seconds
    of each phase (where the reader reports them), prompt tokens kept from the prompt before instead of
    evaluated (`reused_tokens`), and its seconds in all. The one stats type of generation: the ensemble's
    records, `eor run`'s generation.json, and eRAG's and utility's `cost` report it."""

    requests: int = 0
    unique: int = 0
    cache_hits: int = 0
    generated: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    prompt_seconds: float = 0.0
    generated_tokens: int = 0
    generation_seconds: float = 0.0
    reused_tokens: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {name: round(value, 4) if isinstance(value, float) else value for name, value in asdict(self).items()}

    def share(self, parts: int) -> dict[str, float]:
        """Every count divided by `parts` (e.g. per question of a batch)."""
        return {name: round(value / max(parts, 1), 4) for name, value in asdict(self).items()}


@dataclass
class ScoreStats(_Counts):
    """What the stage's scoring did: continuations asked for (`requests`), the distinct ones (`unique`), those
    read back from the cache (`cache_hits`) and scored by the reader (`scored`) in `calls` calls, their tokens
    (the end of turn included) and the reader's seconds."""

    requests: int = 0
    unique: int = 0
    cache_hits: int = 0
    scored: int = 0
    calls: int = 0
    tokens: int = 0
    seconds: float = 0.0


_METERS: contextvars.ContextVar[tuple[GenerationStats, ...]] = contextvars.ContextVar("eor_meters", default=())
_METER_LOCK = threading.Lock()


@contextlib.contextmanager
def metering() -> Iterator[GenerationStats]:
    """`with metering() as stats:` adds to `stats` every generation made in this context (this thread, and
    threads started with a copy of its context, e.g. `contextvars.copy_context().run`)."""
    stats = GenerationStats()
    token = _METERS.set((*_METERS.get(), stats))
    try:
        yield stats
    finally:
        _METERS.reset(token)


def _record(step: GenerationStats) -> None:
    with _METER_LOCK:
        for stats in _METERS.get():
            stats.add(step)


class GenerationStage:
    """`complete(prompts)` → a `Completion` per prompt; `generate(prompts)` → texts (the reader protocol, what
    retrievers that need the reader are given). `cache`: a GenerationCache, or None; a reader without an
    `identity` is never cached (its outputs cannot be keyed safely)."""

    def __init__(self, reader: Any, cache: GenerationCache | None = None) -> None:
        if isinstance(reader, GenerationStage):
            raise ConfigError("a generation stage cannot wrap another one")
        self.reader = reader
        self.identity = reader_identity(reader)
        if cache is not None and self.identity is None:
            log.info("reader %r has no identity: its generations are not cached", getattr(reader, "name", reader))
            cache = None
        self.cache = cache
        self.name = getattr(reader, "name", type(reader).__name__)
        self.default_max_tokens = getattr(reader, "default_max_tokens", None)
        self.stats = GenerationStats()  # this stage, since it was made
        self.score_stats = ScoreStats()  # its scoring (`score`), since it was made
        self._lock = _lock_for(reader)
        self._stats_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"GenerationStage({self.name!r}, cache={self.cache!r})"

    def __getattr__(self, name: str) -> Any:
        # Everything else (context_tokens, the tokenizer, ...) is the reader's.
        if name == "reader":  # not set yet (during unpickling): avoid recursing
            raise AttributeError(name)
        return getattr(self.reader, name)

    # -- the reader protocol ------------------------------------------------------------------------------

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        return [completion.text for completion in self.complete(prompts, max_tokens)]

    @property
    def last_seconds(self) -> list[float]:
        """Seconds per prompt of this thread's latest `generate`/`complete` call."""
        return list(getattr(self._local, "seconds", []))

    @property
    def _local(self) -> threading.local:
        local = self.__dict__.get("_thread_local")
        if local is None:
            local = self.__dict__.setdefault("_thread_local", threading.local())
        return local

    # -- completions ----------------------------------------------------------------------------------------

    def key(self, prompt: str, max_tokens: int | None = None) -> str:
        """The cache key of a prompt: (reader identity, prompt, effective max_tokens)."""
        return generation_key(str(self.identity), prompt, {"max_tokens": max_tokens or self.default_max_tokens})

    def complete(
        self,
        prompts: Sequence[str],
        max_tokens: int | None = None,
        confidence: bool = False,
        *,
        calls: Callable[[list[str]], Iterable[Sequence[str]]] | None = None,
        progress: Callable[[int], Any] | None = None,
    ) -> list[Completion]:
        """A Completion per prompt, in order; raises the reader's error when a call fails. `confidence`:
        the caller wants each completion's confidence: a cache entry made before the cache kept it is
        generated again (once: the entry is then replaced), when the reader can report it. `calls`: how the
        distinct prompts to generate (in the order of `prompts`) are cut into reader calls, each part once
        (default: all in one call); each call is sorted, so that shared prefixes run back to back.
        `progress`: `(prompts to generate) -> bar` with `update(n)` and `close()`, opened when there is
        something to generate and updated after each call."""
        prompts = list(prompts)
        if any(not isinstance(prompt, str) for prompt in prompts):
            raise InputError("reader prompts must be strings")
        distinct = list(dict.fromkeys(prompts))
        done = self._from_cache(distinct, max_tokens)
        stale = set()
        if confidence and capable(self.reader, "confidence"):
            stale = {prompt for prompt, completion in done.items() if completion.confidence is None}
            done = {prompt: completion for prompt, completion in done.items() if prompt not in stale}
        missing = [prompt for prompt in distinct if prompt not in done]
        parts = _cut(missing, calls)
        step = GenerationStats(requests=len(prompts), unique=len(distinct), cache_hits=len(done))
        bar = progress(len(missing)) if progress is not None and missing else None
        try:
            for part in parts:
                made = self._generate(part, max_tokens, replace=stale)
                done.update(made)
                step.generated += len(part)
                step.calls += 1
                for completion in made.values():
                    step.prompt_tokens += completion.prompt_tokens or 0
                    step.prompt_seconds += completion.prompt_seconds or 0.0
                    step.generated_tokens += completion.generated_tokens or 0
                    step.generation_seconds += completion.generation_seconds or 0.0
                    step.reused_tokens += completion.reused_tokens or 0
                    step.seconds += completion.seconds
                if bar is not None:
                    bar.update(len(part))
        finally:  # what was generated is accounted for even when a later call fails
            if bar is not None:
                bar.close()
            self._account(step)
        self._local.seconds = [done[prompt].seconds for prompt in prompts]
        return [done[prompt] for prompt in prompts]

    def complete_each(
        self, prompts: Sequence[str], max_tokens: int | None = None, confidence: bool = False
    ) -> list[Completion | Exception]:
        """Like `complete`, but a failure costs only the prompts that fail: the batch is retried prompt by
        prompt, and each failing prompt gets its exception in place of a Completion."""
        prompts = list(prompts)
        try:
            return list(self.complete(prompts, max_tokens, confidence))
        except InputError:
            raise
        except Exception as exc:
            if len(set(prompts)) == 1:
                return [exc] * len(prompts)
            log.warning(
                "the reader failed on a batch of %d prompts (%s: %s); retrying prompt by prompt",
                len(prompts),
                type(exc).__name__,
                exc,
            )
        results: dict[str, Completion | Exception] = {}
        for prompt in dict.fromkeys(prompts):
            try:
                results[prompt] = self.complete([prompt], max_tokens, confidence)[0]
            except Exception as exc:
                results[prompt] = exc
        return [results[prompt] for prompt in prompts]

    # -- scores -------------------------------------------------------------------------------------------------

    def score_key(self, prompt: str, continuation: str) -> str:
        """The cache key of a score: (reader identity, prompt, continuation); never a generation's key."""
        return generation_key(str(self.identity), prompt, {"score": continuation})

    def score(self, prompt: str, continuations: Sequence[str]) -> list[Likelihood]:
        """The reader's log-probability of each continuation after `prompt` (eor.core.likelihood), in order:
        those the cache holds are read back, the rest scored in one reader call (the prompt evaluated once)
        and stored. A reader that cannot score raises ReaderError naming it."""
        continuations = list(continuations)
        if not isinstance(prompt, str) or any(not isinstance(text, str) for text in continuations):
            raise InputError("a prompt and its continuations to score must be strings")
        if not callable(getattr(self.reader, "score", None)) or not capable(self.reader, "scores"):
            why = getattr(self.reader, "why_not_scoring", None)
            raise ReaderError(why() if callable(why) else f"reader {self.name!r} cannot score continuations")
        distinct = list(dict.fromkeys(continuations))
        keys = {text: self.score_key(prompt, text) for text in distinct}
        found = self.cache.get_many(keys.values()) if self.cache is not None and distinct else {}
        done = {
            text: likelihood
            for text, key in keys.items()
            if key in found and (likelihood := Likelihood.from_json((found[key].meta or {}).get("likelihood")))
        }
        missing = [text for text in distinct if text not in done]
        step = ScoreStats(requests=len(continuations), unique=len(distinct), cache_hits=len(done))
        if missing:
            started = time.perf_counter()
            with self._lock:
                scored = list(self.reader.score(prompt, missing))
            seconds = time.perf_counter() - started
            if len(scored) != len(missing):
                raise ReaderError(f"the reader returned {len(scored)} scores for {len(missing)} continuations")
            done.update(zip(missing, scored, strict=True))
            step.scored, step.calls, step.seconds = len(missing), 1, seconds
            step.tokens = sum(len(likelihood.logprobs) for likelihood in scored)
            if self.cache is not None:
                share = seconds / len(missing)
                self.cache.put_many(
                    Generation(keys[text], str(self.identity), text, share, {"likelihood": done[text].to_json()})
                    for text in missing
                )
        with self._stats_lock:
            self.score_stats.add(step)
        return [done[text] for text in continuations]

    # -- internals --------------------------------------------------------------------------------------------

    def _from_cache(self, prompts: list[str], max_tokens: int | None) -> dict[str, Completion]:
        if self.cache is None or not prompts:
            return {}
        keys = {prompt: self.key(prompt, max_tokens) for prompt in prompts}
        found = self.cache.get_many(keys.values())
        return {prompt: Completion.from_cache(found[key]) for prompt, key in keys.items() if key in found}

    def _generate(self, prompts: list[str], max_tokens: int | None, replace: Set[str] = frozenset()) -> dict:
        """The reader's completions of distinct `prompts` (one call), stored in the cache before returning;
        the entries of `replace` (regenerated for what they lacked) overwrite the old ones."""
        with self._lock:
            outputs = self._call_reader(prompts, max_tokens)
        failpoint("generation")  # tests: die with the outputs made but not stored
        if len(outputs) != len(prompts):
            raise ReaderError(f"the reader returned {len(outputs)} completions for {len(prompts)} prompts")
        made = {
            prompt: Completion(
                out.text,
                float(out.seconds),
                False,
                out.prompt_tokens,
                out.generated_tokens,
                out.prompt_seconds,
                out.generation_seconds,
                out.reused_tokens,
                out.confidence,
            )
            for prompt, out in zip(prompts, outputs, strict=True)
        }
        if self.cache is not None:
            for renewed in (False, True):
                self.cache.put_many(
                    (
                        Generation(self.key(p, max_tokens), str(self.identity), c.text, c.seconds, c.meta())
                        for p, c in made.items()
                        if (p in replace) == renewed
                    ),
                    replace=renewed,
                )
        return made

    def _call_reader(self, prompts: list[str], max_tokens: int | None) -> list[Generated]:
        kwargs = {} if max_tokens is None else {"max_tokens": max_tokens}
        if isinstance(self.reader, BatchedReader):  # not a wrapper that forwards it: the wrapper's generate runs
            return [as_generated(output) for output in self.reader.generate_timed(prompts, **kwargs)]
        started = time.perf_counter()
        texts = self.reader.generate(prompts, **kwargs)
        elapsed = time.perf_counter() - started
        if not isinstance(texts, list) or any(not isinstance(text, str) for text in texts):
            raise ReaderError(f"reader {self.name!r} must return a list of strings")
        seconds = list(getattr(self.reader, "last_seconds", None) or [])
        if len(seconds) != len(texts):
            seconds = [elapsed / max(len(texts), 1)] * len(texts)
        return [Generated(text, float(spent)) for text, spent in zip(texts, seconds, strict=True)]

    def _account(self, step: GenerationStats) -> None:
        with self._stats_lock:
            self.stats.add(step)
        _record(step)


def _cut(missing: list[str], calls: Callable[[list[str]], Iterable[Sequence[str]]] | None) -> list[list[str]]:
    """The reader calls of `missing` (distinct prompts): one, or the parts `calls` cuts them into; each sorted
    (shared prefixes back to back), empty parts dropped."""
    if calls is None:
        return [sorted(missing)] if missing else []
    parts = [sorted(part) for part in calls(list(missing)) if part]
    if sorted(prompt for part in parts for prompt in part) != sorted(missing):
        raise InputError("`calls` must cut the prompts to generate into parts that hold each of them exactly once")
    return parts


_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _lock_for(reader: Any) -> contextlib.AbstractContextManager:
    """No lock for a reader that is thread-safe or owns its lock (a BatchedReader); else the lock of this
    reader object."""
    if capable(reader, "thread_safe") or isinstance(reader, BatchedReader):
        return contextlib.nullcontext()
    return reader_lock(reader)


def reader_lock(reader: Any) -> threading.RLock:
    """The lock of a foreign reader object, shared by every stage over it."""
    with _LOCKS_GUARD:
        try:
            lock = _LOCKS.get(reader)
            if lock is None:
                lock = _LOCKS[reader] = threading.RLock()
        except TypeError:  # neither weak-referenceable nor hashable: a lock of this stage's own
            lock = threading.RLock()
    return lock
