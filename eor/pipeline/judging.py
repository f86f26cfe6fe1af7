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

A judge voter (voters.judge_selector, `judge.weights`) answers with these scores in the vote stage of its own,
eor.pipeline.stages.judged.
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


def scored_families(config: EnsembleConfig) -> frozenset[str]:
    """The likelihood families (voters.judge_features) the config's `judge:` scores live: none without
    `judge.score` (or without a judge), the members' prompts, and with `judge.passages` the passages alone."""
    settings = config.judge
    if settings is None or not settings.score:
        return frozenset()
    return frozenset(("scores", "passages") if settings.passages else ("scores",))


def judged_members(config: EnsembleConfig) -> list[str]:
    """The members the judge weighs: `judge.members` (each a member of the config: validated at the door), else
    the config's."""
    assert config.judge is not None
    chosen = config.judge.members
    return list(config.members) if chosen is None else list(chosen)


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
    each retrieved passage (one with an id) alone in `templates`' reading prompt; with `settings.score` false,
    the candidates alone (no reader)."""
    answers = {member: output.answer for member, output in outputs.items()}
    read = passages_read(outputs)
    found = candidates(question, answers, [str(p.get("text", "")) for p in read], rule=settings.rule, k=settings.k)
    if not settings.score:
        return [Judged(candidate) for candidate in found]
    prompts = {member: output.prompt for member, output in outputs.items() if output.prompt}
    if settings.passages:
        reading = templates or PromptTemplates()
        for passage in read:
            if passage.get("id") is not None:
                pair = (str(passage.get("title", "")), str(passage.get("text", "")))
                prompts[PASSAGE + str(passage["id"])] = reading.answer_prompt(question, [pair])
    texts = [candidate.text for candidate in found]
    scored = _scored(stage, prompts, texts)
    return [Judged(candidate, {name: scored[name][index] for name in prompts}) for index, candidate in enumerate(found)]


def _scored(stage: GenerationStage, prompts: Mapping[str, str], texts: list[str]) -> dict[str, list[Likelihood]]:
    """Each of `texts` scored under each prompt (name → prompt), the prompts in sorted order (shared prefixes
    back to back); no reader call when there is no text."""
    order = sorted(prompts, key=lambda name: prompts[name])
    return {name: stage.score(prompts[name], texts) if texts else [] for name in order}


#: the null candidate (SQuAD 2.0's "no answer" as the reader would write it): phrasings of declining, each scored
#: under every member's prompt like a candidate; together they are the reader's likelihood of declining
NULL_ANSWERS = ("Unknown", "I don't know", "The passages do not say")


def null_scores(
    stage: GenerationStage, outputs: Mapping[str, MemberOutput], texts: tuple[str, ...] = NULL_ANSWERS
) -> dict[str, Any]:
    """The null candidate scored under each member's prompt (a member without one, which failed, scores
    nothing), as records keep it (`judge["null"]`): its phrasings, and per member the likelihood summary of
    each. Scored right after the member's candidates, a prompt is not evaluated again (the reader keeps its
    state: eor.readers.llamacpp_states)."""
    prompts = {member: output.prompt for member, output in outputs.items() if output.prompt}
    scored = _scored(stage, prompts, list(texts))
    return {
        "texts": list(texts),
        "scores": {name: [likelihood.summary() for likelihood in scored[name]] for name in prompts},
    }
