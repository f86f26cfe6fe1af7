"""The ensemble pipeline: every member retrieves, one shared reader answers all prompts of a batch
together, and the voter picks the best-supported answer."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eor.config import EnsembleConfig, load_config
from eor.data import Question, make_question
from eor.errors import RetrieverError
from eor.prompts import PromptTemplates, clean_answer


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
    """One answered question: the chosen answer and member, every member's output and vote score."""

    id: str
    question: str
    answer: str
    member: str
    members: dict[str, MemberOutput]
    timings: dict[str, float]
    answers: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The object `eor ask --json` prints."""
        return {
            "id": self.id,
            "question": self.question,
            "answer": self.answer,
            "member": self.member,
            "members": {
                name: {**output.record(), "score": output.score} for name, output in self.members.items()
            },
            "timings": self.timings,
        }

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
        }


class Ensemble:
    """Members built from the paper's notation over named sources, one reader, one voter."""

    def __init__(self, config: EnsembleConfig, *, reader: Any = None, voter: Any = None) -> None:
        from eor.readers import build_reader
        from retrievers.registry import BuildContext, SourcePool

        self.config = config
        self.templates = _templates(config)
        _check_member_names(config)  # before loading any model: a typo fails at once
        self.reader = reader if reader is not None else build_reader(config.reader)
        corpus = config.resolve_path(config.corpus.path) if config.corpus and config.corpus.path else None
        context = BuildContext(
            corpus_path=str(corpus) if corpus else None,
            reader=self.reader,
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

    @classmethod
    def from_config(
        cls, path: str | Path | EnsembleConfig, weights: str | Path | None = None, **kwargs: Any
    ) -> Ensemble:
        config = path if isinstance(path, EnsembleConfig) else load_config(path)
        if weights is not None:
            from voters import Voter

            kwargs.setdefault("voter", Voter.load(weights, members=config.members))
        return cls(config, **kwargs)

    @property
    def members(self) -> list[str]:
        return list(self.config.members)

    def answer(self, question: str) -> Result:
        return self.answer_batch([question])[0]

    def answer_batch(self, questions: list[str | Question]) -> list[Result]:
        """Answer a batch: retrieval per member (batched per source), one reader call, one vote."""
        from voters import choose

        items = [q if isinstance(q, Question) else make_question(q) for q in questions]
        if not items:
            return []
        texts = [item.question for item in items]
        started = time.perf_counter()
        passages: dict[str, list[list[Any]]] = {}
        retrieval_seconds: dict[str, float] = {}
        for name, retriever in self.retrievers.items():
            tick = time.perf_counter()
            passages[name] = retriever.retrieve_batch(texts)
            retrieval_seconds[name] = (time.perf_counter() - tick) / len(items)
        retrieved = time.perf_counter()

        prompts = {
            name: [self._prompt(text, docs) for text, docs in zip(texts, passages[name], strict=True)]
            for name in self.retrievers
        }
        flat = [prompt for name in self.retrievers for prompt in prompts[name]]
        raw = self.reader.generate(flat)
        seconds = list(getattr(self.reader, "last_seconds", [])) or [0.0] * len(flat)
        generated = time.perf_counter()

        outputs: list[dict[str, MemberOutput]] = [{} for _ in items]
        position = 0
        for name in self.retrievers:
            for i in range(len(items)):
                outputs[i][name] = MemberOutput(
                    answer=clean_answer(raw[position]),
                    passages=[_passage_dict(doc) for doc in passages[name][i]],
                    prompt=prompts[name][i],
                    seconds=round(retrieval_seconds[name] + seconds[position], 4),
                )
                position += 1

        names = list(self.retrievers)
        answers = [[outputs[i][name].answer for name in names] for i in range(len(items))]
        texts_by_member = [
            [" ".join(p["text"] for p in outputs[i][name].passages) for name in names]
            for i in range(len(items))
        ]
        scores = self.voter.decision_scores(answers, texts_by_member)
        chosen = choose(scores)
        voted = time.perf_counter()
        timings = {
            "retrieval": round((retrieved - started) / len(items), 4),
            "generation": round((generated - retrieved) / len(items), 4),
            "voting": round((voted - generated) / len(items), 4),
        }
        timings["total"] = round(sum(timings.values()), 4)
        results = []
        for i, item in enumerate(items):
            for m, name in enumerate(names):
                score = float(scores[i][m])
                outputs[i][name].score = score if math.isfinite(score) else None  # dropped by its weight
            best = names[int(chosen[i])]
            results.append(
                Result(
                    item.id,
                    item.question,
                    outputs[i][best].answer,
                    best,
                    outputs[i],
                    dict(timings),
                    item.answers,
                    item.extra,
                )
            )
        return results

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


def _check_member_names(config: EnsembleConfig) -> None:
    from retrievers import notation
    from retrievers.registry import DEFAULT_SOURCES

    known = set(DEFAULT_SOURCES) | set(config.sources)
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
    params = {name: {"model": v.encoder} for name in ("cosine", "bertscore") if name in v.metrics}
    return Voter.uniform(
        len(config.members),
        metrics=tuple(v.metrics),
        pooling=v.pooling,
        threshold=v.threshold,
        members=list(config.members),
        metric_params=params or None,
    )
