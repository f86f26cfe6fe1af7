"""The ensemble pipeline: every member retrieves, one shared reader answers all prompts of a batch
together, and the voter picks the best-supported answer.

Failure isolation: a member whose retrieval or generation raises, or whose retrieval runs past
`member_timeout`, is left out of that question's vote and named in `Result.degraded` (with the reason);
the vote then runs over the remaining members with their own weights. A question fails only when no
member is left. `strict=True` raises at the first failure instead (for runs whose records must hold
every member). The reader is used by one thread at a time (llama.cpp is not thread-safe), including by
the parametric-knowledge and compression retrievers and by a timed-out member still running.

Every generation (answers, PK documents, @CP summaries) goes through one `CachedReader` over the shared
generation cache (eor.generation_cache), so a prompt that any member, question or earlier command already
generated with the same reader is read back, not generated again; `cache=False` turns this off.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eor.config import EnsembleConfig, load_config
from eor.data import Question, make_question
from eor.errors import ConfigError, EorError, InputError, ReaderError, RetrieverError
from eor.generation_cache import CacheSetting, open_cache
from eor.prompts import PromptTemplates, clean_answer

log = logging.getLogger(__name__)

#: longest failure reason kept in `Result.degraded` (foreign exceptions can carry long messages).
MAX_REASON_CHARS = 300


class MemberTimeoutError(RetrieverError):
    """A member's retrieval ran past its timeout (or is still running one that did)."""


@dataclass
class MemberOutput:
    answer: str
    passages: list[dict[str, Any]]
    prompt: str
    seconds: float
    score: float | None = None

    def record(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "passages": self.passages,
            "prompt": self.prompt,
            "seconds": self.seconds,
        }


@dataclass
class Result:
    """One answered question: the chosen answer and member, every voting member's output and vote score,
    and the members left out of the vote because they failed (`degraded`: name -> reason)."""

    id: str
    question: str
    answer: str
    member: str
    members: dict[str, MemberOutput]
    timings: dict[str, float]
    answers: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    degraded: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The object `eor ask --json` prints (`degraded` and `degraded_reasons` only when a member failed)."""
        data = {
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "member": self.member,
            "members": {
                name: {**output.record(), "score": output.score} for name, output in self.members.items()
            },
            "timings": self.timings,
        }
        return {**data, **self._degraded_fields()}

    def to_record(self) -> dict[str, Any]:
        """The line of `records.jsonl` (see eor.records)."""
        return {
            **self.extra,
            "id": self.id,
            "question": self.question,
            "answers": self.answers,
            "members": {name: output.record() for name, output in self.members.items()},
            "vote": {
                "member": self.member,
                "answer": self.answer,
                "scores": {name: output.score for name, output in self.members.items()},
            },
            **self._degraded_fields(),
        }

    def _degraded_fields(self) -> dict[str, Any]:
        if not self.degraded:
            return {}
        return {"degraded": list(self.degraded), "degraded_reasons": dict(self.degraded)}


class Ensemble:
    """Members built from the paper's notation over named sources, one reader, one voter."""

    def __init__(
        self, config: EnsembleConfig, *, reader: Any = None, voter: Any = None, cache: CacheSetting = True
    ) -> None:
        """cache: where generations are cached (eor.generation_cache): True, the default file (or none when
        EOR_GENERATION_CACHE=off); a file path; a GenerationCache; False or None: no cache. A reader without
        an `identity` is never cached."""
        from eor.readers import build_reader
        from eor.readers.cached import with_cache
        from retrievers.registry import BuildContext, SourcePool

        self.config = config
        self.templates = _templates(config)
        check_member_names(config)  # before loading any model: a typo fails at once
        self.cache = open_cache(cache)  # before loading any model: an unusable cache file fails at once
        self.reader = reader if reader is not None else build_reader(config.reader)
        self._reader_lock = reader_lock(self.reader)
        # Every generation (answers, PK, @CP) goes through this one reader: the cache, then the lock.
        self.generator = with_cache(SerialReader(self.reader, self._reader_lock), self.cache)
        corpus = config.resolve_path(config.corpus.path) if config.corpus and config.corpus.path else None
        context = BuildContext(
            corpus_path=str(corpus) if corpus else None,
            reader=self.generator,
            prompts=self.templates,
            depth=config.retrieval_depth,
            encoder=config.voter.encoder,
            parametric_max_tokens=config.prompts.parametric_max_tokens,
            compression_max_tokens=config.prompts.compression_max_tokens,
        )
        sources = {name: (spec.type, spec.params) for name, spec in config.sources.items()}
        self.pool = SourcePool(context, sources)
        self.retrievers = {name: self.pool.build(name) for name in config.members}
        self.voter = voter if voter is not None else _uniform_voter(config)
        self._abandoned: dict[str, threading.Thread] = {}  # members whose timed-out retrieval still runs

    @classmethod
    def from_config(
        cls, path: str | Path | EnsembleConfig, weights: str | Path | None = None, **kwargs: Any
    ) -> Ensemble:
        config = path if isinstance(path, EnsembleConfig) else load_config(path)
        if weights is not None:
            from voters import load_voter

            kwargs.setdefault("voter", load_voter(weights, members=config.members))
        return cls(config, **kwargs)

    @property
    def members(self) -> list[str]:
        """The member names, in the config's (and the voter's) order."""
        return list(self.config.members)

    def select(self, members: Sequence[str] | None) -> list[str]:
        """The members to run, in the ensemble's order: all of them for None, else the named subset."""
        if members is None:
            return self.members
        available = ", ".join(self.members)
        if isinstance(members, str) or any(not isinstance(name, str) for name in members):
            raise InputError(f"members must be a list of member names; available: {available}")
        requested = list(members)
        if not requested:
            raise InputError(f"members: name at least one member; available: {available}")
        unknown = [name for name in dict.fromkeys(requested) if name not in self.retrievers]
        if unknown:
            raise InputError(
                f"unknown member(s) {', '.join(map(repr, unknown))}; available: {available}"
            )
        repeated = [name for name in dict.fromkeys(requested) if requested.count(name) > 1]
        if repeated:
            raise InputError(f"members: {', '.join(map(repr, repeated))} named more than once")
        return [name for name in self.members if name in requested]

    def answer(
        self,
        question: str | Question,
        *,
        members: Sequence[str] | None = None,
        member_timeout: float | None = None,
        strict: bool = False,
    ) -> Result:
        """Answer one question (see `answer_batch` for the options)."""
        return self.answer_batch([question], members=members, member_timeout=member_timeout, strict=strict)[0]

    def answer_batch(
        self,
        questions: Sequence[str | Question],
        *,
        members: Sequence[str] | None = None,
        member_timeout: float | None = None,
        strict: bool = False,
    ) -> list[Result]:
        """Answer a batch: retrieval per member (batched per source), one reader call, one vote.

        members: run and vote over only these members (a subset of `self.members`; their weights are kept).
        member_timeout: seconds per question that a member's retrieval may take; a member that runs late
            is left out of the vote (`Result.degraded`), as is one whose retrieval or generation raises.
        strict: raise on a member's failure instead of leaving it out.
        """
        items = [q if isinstance(q, Question) else make_question(q) for q in questions]
        if not items:
            return []
        names = self.select(members)
        timeout = _check_timeout(member_timeout)
        texts = [item.question for item in items]
        failed: list[dict[str, str]] = [{} for _ in items]
        started = time.perf_counter()
        passages: dict[str, list[list[Any] | None]] = {}
        retrieval_seconds: dict[str, float] = {}
        for name in names:
            tick = time.perf_counter()
            passages[name] = self._retrieve(name, texts, timeout, strict, failed)
            retrieval_seconds[name] = (time.perf_counter() - tick) / len(items)
        retrieved = time.perf_counter()

        pairs = [(name, i) for name in names for i in range(len(items)) if passages[name][i] is not None]
        prompts = {(name, i): self._prompt(texts[i], passages[name][i]) for name, i in pairs}
        completions = self._generate(pairs, prompts, strict, failed)
        generated = time.perf_counter()

        outputs: list[dict[str, MemberOutput]] = [{} for _ in items]
        for name, i in pairs:
            if (name, i) in completions:
                text, seconds = completions[(name, i)]
                outputs[i][name] = MemberOutput(
                    answer=clean_answer(text),
                    passages=[_passage_dict(doc) for doc in passages[name][i]],
                    prompt=prompts[(name, i)],
                    seconds=round(retrieval_seconds[name] + seconds, 4),
                )
        for i, item in enumerate(items):
            if not outputs[i]:
                raise _no_member_left(item, failed[i])

        chosen = self._vote(outputs, texts)
        voted = time.perf_counter()
        timings = {
            "retrieval": round((retrieved - started) / len(items), 4),
            "generation": round((generated - retrieved) / len(items), 4),
            "voting": round((voted - generated) / len(items), 4),
        }
        timings["total"] = round(sum(timings.values()), 4)
        return [
            Result(
                item.id,
                item.question,
                outputs[i][chosen[i]].answer,
                chosen[i],
                outputs[i],
                dict(timings),
                item.answers,
                item.extra,
                failed[i],
            )
            for i, item in enumerate(items)
        ]

    def explain(self, result: Result) -> dict[str, Any]:
        """Why the vote chose its answer: the voter's own account per voting member (for the paper's voter:
        weight ω^r, whether it drops the member, similarities per metric and combined (eq. 6), pooled
        similarity and decision score (eq. 7); for the answer selector: each feature's contribution), and
        the members left out of the vote with the reason."""
        names = list(result.members)
        if not names:
            raise InputError("this result holds no member outputs to explain")
        foreign = [name for name in names if name not in self.retrievers]
        if foreign:
            raise InputError(f"this result holds member(s) {', '.join(foreign)} that this ensemble lacks")
        if not hasattr(self.voter, "explain_row"):
            raise ConfigError("explain() needs an eor voter (Voter, AnswerSelector or voters.load_voter)")
        account = self.voter.explain_row(
            [result.members[name].answer for name in names],
            [_texts(result.members[name]) for name in names],
            result.question,
            [self.members.index(name) for name in names],
        )
        members: dict[str, Any] = {}
        for name, row in zip(names, account.pop("members"), strict=True):
            if "similarity" in row:
                row["similarity"] = {names[n]: values for n, values in row["similarity"].items()}
            members[name] = {
                "answer": result.members[name].answer,
                **row,
                "score": result.members[name].score,
                "chosen": name == result.member,
            }
        return {
            "question": result.question,
            "answer": result.answer,
            "member": result.member,
            **account,
            "members": members,
            "degraded": dict(result.degraded),
        }

    # -- the stages, each isolating member failures -----------------------------------------------------

    def _retrieve(
        self, name: str, texts: list[str], timeout: float | None, strict: bool, failed: list[dict[str, str]]
    ) -> list[list[Any] | None]:
        """The member's passages per question; None where it failed (recorded in `failed`)."""
        retriever = self.retrievers[name]

        def batch(queries: list[str]) -> list[list[Any]]:
            documents = retriever.retrieve_batch(queries)
            if len(documents) != len(queries):
                raise RetrieverError(f"returned {len(documents)} results for {len(queries)} questions")
            return documents

        budget = None if timeout is None else timeout * len(texts)
        try:
            return self._guarded(name, lambda: batch(texts), budget)
        except Exception as exc:
            if strict:
                raise
            if len(texts) == 1 or isinstance(exc, MemberTimeoutError):
                _fail(failed, range(len(texts)), name, exc, "retrieval")
                return [None] * len(texts)
        # One question may have broken the batch: retry question by question, so the others keep this member.
        documents: list[list[Any] | None] = []
        for i, text in enumerate(texts):
            try:
                documents.append(self._guarded(name, lambda text=text: batch([text])[0], timeout))
            except Exception as exc:
                _fail(failed, [i], name, exc, "retrieval")
                documents.append(None)
        return documents

    def _guarded(self, name: str, work: Callable[[], Any], timeout: float | None) -> Any:
        """`work()`, abandoned (MemberTimeoutError) when it runs past `timeout` seconds.

        Python cannot stop a thread, so a late member keeps running in the background; until it ends, the
        member is skipped at once rather than piling up more stuck threads.
        """
        if timeout is None:
            return work()
        running = self._abandoned.get(name)
        if running is not None and running.is_alive():
            raise MemberTimeoutError("retrieval skipped: an earlier retrieval that timed out is still running")
        self._abandoned.pop(name, None)
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["value"] = work()
            except BaseException as exc:  # handed to the calling thread below
                box["error"] = exc

        thread = threading.Thread(target=target, name=f"eor-retrieval-{name}", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            self._abandoned[name] = thread
            raise MemberTimeoutError(f"retrieval timed out after {timeout:g} s")
        if "error" in box:
            raise box["error"]
        return box["value"]

    def _generate(
        self,
        pairs: list[tuple[str, int]],
        prompts: dict[tuple[str, int], str],
        strict: bool,
        failed: list[dict[str, str]],
    ) -> dict[tuple[str, int], tuple[str, float]]:
        """(completion, seconds) per (member, question): one reader call; on an error, member by member."""
        if not pairs:
            return {}
        try:
            return dict(zip(pairs, self._read([prompts[pair] for pair in pairs]), strict=True))
        except Exception as exc:
            if strict:
                raise
            log.warning("the reader failed on a batch of %d prompts (%s); retrying member by member",
                        len(pairs), _reason(exc, "generation"))
        completions: dict[tuple[str, int], tuple[str, float]] = {}
        for name in dict.fromkeys(name for name, _ in pairs):
            own = [pair for pair in pairs if pair[0] == name]
            try:
                completions.update(zip(own, self._read([prompts[pair] for pair in own]), strict=True))
                continue
            except Exception as exc:
                if len(own) == 1:
                    _fail(failed, [own[0][1]], name, exc, "generation")
                    continue
            for pair in own:
                try:
                    completions.update(zip([pair], self._read([prompts[pair]]), strict=True))
                except Exception as exc:
                    _fail(failed, [pair[1]], name, exc, "generation")
        return completions

    def _read(self, prompts: list[str]) -> list[tuple[str, float]]:
        with self._reader_lock:
            raw = self.generator.generate(prompts)
            seconds = list(getattr(self.generator, "last_seconds", [])) or [0.0] * len(prompts)
        if len(raw) != len(prompts):
            raise ReaderError(f"the reader returned {len(raw)} completions for {len(prompts)} prompts")
        if len(seconds) != len(prompts):
            seconds = [0.0] * len(prompts)
        return list(zip(raw, seconds, strict=True))

    def _vote(self, outputs: list[dict[str, MemberOutput]], questions: list[str]) -> list[str]:
        """The chosen member per question; sets every voting member's score (None when its weight drops it).

        Questions are voted in groups with the same voting members: the whole pool (the usual case) goes
        through the voter as it is; a subset (requested, or left after failures) keeps its members' weights.
        """
        from voters import choose

        groups: dict[tuple[str, ...], list[int]] = {}
        for i, output in enumerate(outputs):
            groups.setdefault(tuple(output), []).append(i)
        chosen = [""] * len(outputs)
        for voting, index in groups.items():
            answers = [[outputs[i][name].answer for name in voting] for i in index]
            passages = [[_texts(outputs[i][name]) for name in voting] for i in index]
            texts = [questions[i] for i in index]
            subset = None if list(voting) == self.members else [self.members.index(name) for name in voting]
            scores = np.asarray(self.voter.decision_scores(answers, passages, texts, subset), dtype=float)
            for row, i, best in zip(scores, index, choose(scores), strict=True):
                for m, name in enumerate(voting):
                    score = float(row[m])
                    outputs[i][name].score = score if math.isfinite(score) else None  # dropped by its weight
                chosen[i] = voting[int(best)]
        return chosen

    def _prompt(self, question: str, documents: list[Any]) -> str:
        if not documents:
            return self.templates.answer_prompt(question, None)
        document = self.templates.document(
            [(doc.metadata.get("title", ""), doc.page_content) for doc in documents]
        )
        words = document.split(" ")
        if len(words) > self.config.max_document_words:  # keeps every prompt inside the reader's context
            document = " ".join(words[: self.config.max_document_words])
        return self.templates.answer_prompt(question, document)


class SerialReader:
    """A reader that generates for one thread at a time (shares the lock of `reader_lock(reader)`).

    The retrievers that call the reader themselves (parametric knowledge, compression) get this wrapper, so
    a member still running after its timeout cannot enter llama.cpp while the next batch is generating.
    """

    def __init__(self, reader: Any, lock: Any) -> None:
        self.reader = reader
        self.lock = lock
        self._local = threading.local()

    def generate(self, *args: Any, **kwargs: Any) -> list[str]:
        with self.lock:
            outputs = self.reader.generate(*args, **kwargs)
            self._local.seconds = list(getattr(self.reader, "last_seconds", None) or [])
            return outputs

    @property
    def last_seconds(self) -> list[float]:
        """The seconds per prompt of this thread's latest call (another thread may have used the reader since)."""
        return list(getattr(self._local, "seconds", []))

    def __getattr__(self, name: str) -> Any:
        if name in ("reader", "_local"):  # not set yet: avoid recursing
            raise AttributeError(name)
        return getattr(self.reader, name)


_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def reader_lock(reader: Any) -> threading.RLock:
    """The lock of this reader object, shared by every ensemble that uses it."""
    with _LOCKS_GUARD:
        try:
            lock = _LOCKS.get(reader)
            if lock is None:
                lock = _LOCKS[reader] = threading.RLock()
        except TypeError:  # neither weak-referenceable nor hashable: a lock of this ensemble's own
            lock = threading.RLock()
    return lock


def _check_timeout(value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise InputError(f"member_timeout must be a positive number of seconds or None, got {value!r}")
    return float(value)


def _reason(exc: BaseException, stage: str) -> str:
    if isinstance(exc, MemberTimeoutError):
        return str(exc)
    message = (str(exc).splitlines() or [""])[0]
    reason = f"{stage} failed: {type(exc).__name__}" + (f": {message}" if message else "")
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 1] + "…"


def _fail(failed: list[dict[str, str]], questions: Sequence[int], name: str, exc: BaseException, stage: str) -> None:
    reason = _reason(exc, stage)
    for i in questions:
        failed[i][name] = reason
    log.warning("member %s left out of the vote of %d question(s): %s", name, len(questions), reason)


def _no_member_left(item: Question, reasons: dict[str, str]) -> EorError:
    detail = "; ".join(f"{name}: {reason}" for name, reason in reasons.items())
    generation = all(reason.startswith("generation") for reason in reasons.values())
    cls = ReaderError if reasons and generation else RetrieverError
    return cls(f"every member failed on question {item.id}: {detail}")


def _texts(output: MemberOutput) -> list[str]:
    return [p["text"] for p in output.passages]


def check_member_names(config: EnsembleConfig) -> None:
    """Every member names only known sources (RetrieverError otherwise); cheap, loads no model."""
    from retrievers import notation
    from retrievers.registry import source_names

    known = source_names(config.sources)
    for member in config.members:
        unknown = sorted(notation.sources(notation.parse(member)) - known)
        if unknown:
            raise RetrieverError(
                f"member {member!r}: unknown source(s) {', '.join(unknown)}; available: {', '.join(sorted(known))}"
            )


def _passage_dict(document: Any) -> dict[str, Any]:
    meta = document.metadata
    return {
        "id": meta.get("id"),
        "title": meta.get("title", ""),
        "text": document.page_content,
        "score": meta.get("score"),
    }


def _templates(config: EnsembleConfig) -> PromptTemplates:
    p = config.prompts
    overrides = {
        key: value
        for key in ("retrieval_free", "reading", "parametric", "compression", "passage")
        if (value := getattr(p, key)) is not None
    }
    return PromptTemplates.for_style(p.style, **overrides)


def _uniform_voter(config: EnsembleConfig) -> Any:
    from voters import Voter

    v = config.voter
    params = v.resolved_metric_params()
    return Voter.uniform(
        len(config.members),
        metrics=tuple(v.metrics),
        pooling=v.pooling,
        threshold=v.threshold,
        members=list(config.members),
        metric_params=params or None,
    )
