"""The reader as judge: a question's candidate answers (voters.candidates: the members' distinct answers and
spans of the passages they read) scored by the shared reader under each member's prompt, and under each
retrieved passage alone in the reading prompt (eor.core.likelihood), through the generation stage, so that
scores are cached and metered like generations.

Prompts are scored in sorted order, so that prompts sharing a prefix (`BM25@1`, `BM25@3`) run back to back and
the reader keeps the shared chunks in its KV cache; each prompt is evaluated once per call, each candidate
behind it. A record keeps the scores as `judge` (`JudgeScores.to_dict`): the identity that made them (the
reader, the span rule and K, whether passages were scored, the reading template), and per candidate its text,
the members that wrote it, the rule that proposed it and its likelihood summary under each prompt: a member's
name, or `#` and the passage's id for a passage alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eor.core.config import EnsembleConfig, JudgeConfig
from eor.core.likelihood import Likelihood
from eor.core.prompts import PromptTemplates, templates_for
from eor.core.results import MemberOutput
from eor.pipeline.pool import templates_digest
from eor.pipeline.stages.generation import GenerationStage
from voters.candidates import Candidate, candidates
from voters.judge_features import PASSAGE


@dataclass(frozen=True)
class Judged:
    """A candidate and its likelihood under each prompt (a member's name, or `#<passage id>`)."""

    candidate: Candidate
    scores: dict[str, Likelihood] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.candidate.text,
            "members": list(self.candidate.members),
            "rule": self.candidate.rule,
            "scores": {name: likelihood.summary() for name, likelihood in self.scores.items()},
        }


def judge_identity(config: EnsembleConfig, settings: JudgeConfig, reader_identity: str | None) -> dict[str, Any]:
    """What a question's scores depend on besides its records: the reader, the candidates' rule and K, whether
    passages alone were scored and the reading template they were scored in."""
    return {
        "reader": reader_identity,
        "rule": settings.rule,
        "k": settings.k,
        "passages": settings.passages,
        "templates": templates_digest(templates_for(config)),
    }


def passages_read(outputs: Mapping[str, MemberOutput]) -> list[dict[str, Any]]:
    """The distinct passages the members read (by text), in pool order (each member's in rank order)."""
    seen: dict[str, dict[str, Any]] = {}
    for output in outputs.values():
        for passage in output.passages:
            seen.setdefault(str(passage.get("text", "")), passage)
    return list(seen.values())


def judge(
    stage: GenerationStage,
    question: str,
    outputs: Mapping[str, MemberOutput],
    settings: JudgeConfig,
    templates: PromptTemplates | None = None,
) -> list[Judged]:
    """Every candidate of the question (`outputs`: member → its output, in pool order) scored under each
    member's prompt (a member without one, which failed, scores nothing) and, with `settings.passages`, under
    each retrieved passage (one with an id) alone in `templates`' reading prompt."""
    answers = {member: output.answer for member, output in outputs.items()}
    read = passages_read(outputs)
    found = candidates(question, answers, [str(p.get("text", "")) for p in read], rule=settings.rule, k=settings.k)
    prompts = {member: output.prompt for member, output in outputs.items() if output.prompt}
    if settings.passages:
        reading = templates or PromptTemplates()
        for passage in read:
            if passage.get("id") is not None:
                pair = (str(passage.get("title", "")), str(passage.get("text", "")))
                prompts[PASSAGE + str(passage["id"])] = reading.answer_prompt(question, [pair])
    texts = [candidate.text for candidate in found]
    scored: dict[str, list[Likelihood]] = {}
    for name in sorted(prompts, key=lambda name: prompts[name] or ""):
        scored[name] = stage.score(prompts[name] or "", texts) if texts else []
    return [Judged(candidate, {name: scored[name][index] for name in prompts}) for index, candidate in enumerate(found)]
