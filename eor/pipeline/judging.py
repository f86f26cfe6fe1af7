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

`JudgeStage` answers with a judge voter (voters.judge_selector, `judge.weights`): after the members answered,
the question's candidates are scored as above (the members' prompts were just evaluated, and the reader keeps
their states: eor.readers.llamacpp_states), the voter's fit for what was scored chooses among them, and its
P(right) and abstention thresholds decide whether to answer. With `judge.after: cascade` the config's voter is a
cascade trained with this judge as its last step (`eor train --voter cascade --judge`, eor.learning.judge_cascade):
its steps answer the questions they stop, and the judge answers those it runs to its end (`reached_end`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eor.core.answers import normalize_answer
from eor.core.config import EnsembleConfig, JudgeConfig
from eor.core.errors import ConfigError, InputError
from eor.core.likelihood import Likelihood
from eor.core.prompts import PromptTemplates, templates_for
from eor.core.results import MemberOutput, Result
from eor.pipeline.abstention import abstention
from eor.pipeline.pool import templates_digest
from eor.pipeline.stages.generation import GenerationStage
from voters.candidates import Candidate, candidates
from voters.judge_features import PASSAGE, Evidence, judge_features, relevance_of
from voters.judge_selector import JudgeSelector, JudgeVoter
from voters.right import RightModel


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


#: the weights-file metadata key of a cascade trained with the judge as its last step (eor.learning.judge_cascade)
LAST_STEP = "last_step"


def ends_with_judge(voter: Any) -> dict[str, Any] | None:
    """The judge a cascade was trained to end with (its weights file's `meta.last_step`); None for any other
    voter."""
    entry = (getattr(voter, "metadata_", None) or {}).get(LAST_STEP)
    return dict(entry) if isinstance(entry, Mapping) else None


def reached_end(result: Result) -> bool:
    """Whether every member the answering ran for `result` was asked: no cascade, or one run to its end."""
    return result.cascade is None or not result.cascade.get("skipped")


def load_judge(config: EnsembleConfig) -> JudgeVoter | None:
    """The judge voter a config's `judge.weights` names (None without one), read once: its digest and fits are
    what `check_voter_with_judge` compares and `judge_stage` answers with."""
    if config.judge is None or config.judge.weights is None:
        return None
    path = config.resolve_path(config.judge.weights)
    if not path.is_file():
        raise ConfigError(f"judge.weights: no file {path}")
    return JudgeVoter.load(path)


def check_voter_with_judge(voter: Any, config: EnsembleConfig, judge: JudgeVoter | None) -> None:
    """A cascade trained with the judge as its last step answers only beside that judge (`judge`, the config's
    `judge.weights` as `load_judge` read it: the same file by digest, `judge.after: cascade`); `judge.after:
    cascade` needs such a cascade. ConfigError naming what to change."""
    entry = ends_with_judge(voter)
    settings = config.judge
    after = settings.after if settings is not None else "members"  # one of JUDGE_AFTER (validated at the door)
    source = getattr(voter, "source_", None) or "the voter's weights file"
    if entry is None:
        if after == "cascade":
            raise ConfigError(
                f"judge.after: cascade needs a cascade trained with the judge as its last step (eor train --voter "
                f"cascade --judge ...); {source} is not one"
            )
        return
    if judge is None or after != "cascade":
        raise ConfigError(
            f"{source} is a cascade whose last step is the judge {entry.get('weights')}: answer with it beside "
            "that judge (judge: {weights: ..., after: cascade}), never with its last step's selector"
        )
    if entry.get("sha256") != judge.sha256_:
        raise ConfigError(
            f"the cascade {source} was trained with the judge {entry.get('weights')} as its last step, not with "
            f"{judge.source_} (their digests differ): train the cascade again with this judge"
        )
    try:
        fit = judge.fit_scoring(scored_families(config)).label
    except InputError:
        fit = None
    if fit != entry.get("fit"):
        raise ConfigError(
            f"the cascade {source} was trained with the judge's fit {entry.get('fit')!r} as its last step; what "
            f"this config's judge: scores ({', '.join(sorted(scored_families(config))) or 'nothing'}) is answered "
            f"by {fit!r}: set judge.score and judge.passages as the cascade was trained"
        )


class JudgeStage:
    """The judge voter deciding each question after its members answered (`decide`): the question's candidates
    (`judge`), their features (voters.judge_features), the voter's fit for what the reader scored, its choice,
    P(right) and, at a risk, abstention by the fit's thresholds (eor.pipeline.abstention)."""

    def __init__(
        self,
        voter: JudgeVoter,
        config: EnsembleConfig,
        generation: GenerationStage,
        templates: PromptTemplates,
        early: RightModel | None = None,
        late: StepRisk | None = None,
    ) -> None:
        assert config.judge is not None  # `judge_stage` builds one only for a config with a judge
        self.voter = voter
        # after a cascade: the abstention thresholds of the answers its steps stop at, and of the judge's
        self.early, self.late = early, late
        self.settings = config.judge
        self.generation = generation
        self.templates = templates
        self.members = list(voter.members)  # the training records' order (`judge_stage` checks the names)
        self.source = voter.source_ or "the judge's weights file"
        self.after_cascade = self.settings.after == "cascade"  # the cascade's steps first (check_voter_with_judge)
        # why the thresholds do not hold for the pool answering (eor.pipeline.pool.outside_guarantee; the ensemble
        # sets them), said with every abstention decision: the judge's, and the cascade's before it
        self.outside: str | None = None
        self.outside_early: str | None = None

    def check_risk(self, risk: float | None) -> float | None:
        """`risk` checked against the fits' thresholds (InputError: none, or none at or below it)."""
        if risk is not None:
            for fit in self.voter.fits:
                abstention(fit, 1.0, risk, f"the judge voter {self.source} ({fit.label})")
            if self.after_cascade:
                abstention(None if self.early is None else self.early.fit(), 1.0, risk, "the cascade before the judge")
                abstention(self.late, 1.0, risk, "the cascade's judge")
        return risk

    def _thresholds(self, result: Result, fit: JudgeSelector) -> Any:
        """What declines a judged answer: after a cascade's steps (`result.cascade`), the thresholds chosen for
        the judge's share of the cascade's questions; else (every member asked) the fit's own."""
        return self.late if self.late is not None and result.cascade is not None else fit

    def stopped(self, result: Result, risk: float | None = None) -> Result:
        """`result` answered by a step of the cascade before the judge (its P(right) the cascade's, voters.right,
        by the fit `result.probability_fit`), declined at `risk` below that fit's threshold."""
        if risk is not None:
            probability = math.nan if result.probability is None else result.probability
            fit = None if self.early is None else self.early.fit(result.probability_fit)
            verdict = abstention(
                fit, probability, risk, "the cascade before the judge", result.unanswerable, self.outside_early
            )
            result.abstention = verdict.to_dict()
            if verdict.abstained:
                result.answer = None
        return result

    def decide(self, result: Result, risk: float | None = None) -> Result:
        """`result` answered by the judge: its answer the chosen candidate, `member` a member that wrote it (for
        a span, the first member whose passages hold it), `probability` the fit's P(right), `judged` the
        account (every candidate with its writers, the members whose passages hold it, its log-odds and its
        likelihood under each prompt), and at `risk` declined below the fit's threshold."""
        tick = time.perf_counter()
        outputs = {name: result.members[name] for name in self.members if name in result.members}
        judged = judge(self.generation, result.question, outputs, self.settings, self.templates)
        rows = [entry.to_dict() for entry in judged]
        relevance = relevance_of([result.question], [outputs])[0] if self.voter.reads_retrieval else None
        evidence = Evidence.from_outputs(result.question, outputs, relevance)
        scored = any(row["scores"] for row in rows)  # behind the prompts just scored: none is evaluated again
        null = null_scores(self.generation, outputs) if self.voter.reads_null and scored else None
        features = judge_features(rows, self.members, evidence, null)
        choice, fit = self.voter.choose(features)
        if choice is None:  # no candidate competes (no member wrote anything, no span): nothing to stand behind
            if risk is not None:
                verdict = abstention(self._thresholds(result, fit), math.nan, risk, self.source, None, self.outside)
                result.abstention = verdict.to_dict()
                result.answer = None
            return result
        scores = fit.decision(features)
        holders = _holders(features.texts, evidence)
        writers = rows[choice.index]["members"]
        result.member = writers[0] if writers else next(iter(holders[choice.index]), result.member)
        result.answer = choice.text
        result.probability, result.probability_fit = choice.probability, fit.label
        result.unanswerable = fit.unanswerable(choice.evidence)  # None: a fit of answerable questions alone
        result.judged = {
            "fit": fit.label,
            "scored": sorted(features.scored),
            "chosen": choice.index,
            "candidates": [
                {**row, "supported_by": holders[i], "score": float(scores[i]) if math.isfinite(scores[i]) else None}
                for i, row in enumerate(rows)
            ],
        }
        spent = time.perf_counter() - tick
        result.timings["judge"] = spent
        result.timings["total"] = result.timings.get("total", 0.0) + spent
        if risk is not None:
            verdict = abstention(
                self._thresholds(result, fit),
                choice.probability if choice.probability is not None else math.nan,
                risk,
                self.source,
                result.unanswerable,
                self.outside,
            )
            result.abstention = verdict.to_dict()
            if verdict.abstained:
                result.answer = None
        return result


def _holders(texts: list[str], evidence: Evidence) -> list[list[str]]:
    """Per candidate, the members one of whose passages holds it (a whole-word match, normalised, as
    voters.judge_features counts support), in pool order."""
    read = {name: [f" {normalize_answer(p)} " for p in passages] for name, passages in evidence.passages.items()}
    out = []
    for text in texts:
        needle = f" {normalize_answer(text)} "
        held = [name for name, passages in read.items() if needle.strip() and any(needle in p for p in passages)]
        out.append(held)
    return out


@dataclass(frozen=True)
class StepRisk:
    """Abstention thresholds (eor.pipeline.abstention) of the judge's answers in a cascade trained with the judge
    as its last step, chosen on its held-out answers on the questions the cascade runs to its end
    (`meta.last_step.risk.judged`, eor.commands.train_judge_cascade); the answers its steps stop at have the
    cascade's own P(right) and thresholds (`meta.probability`, voters.right)."""

    thresholds: list[dict[str, Any]]
    delta: float | None
    correctness: str = "em"

    @classmethod
    def of(cls, voter: Any) -> StepRisk | None:
        risk = (ends_with_judge(voter) or {}).get("risk")
        if not isinstance(risk, Mapping):
            return None
        return cls([dict(row) for row in risk.get("judged") or []], risk.get("delta"), risk.get("correctness", "em"))


def judge_stage(
    config: EnsembleConfig,
    generation: GenerationStage,
    templates: PromptTemplates,
    judge: JudgeVoter | None,
    voter: Any = None,
    early: RightModel | None = None,
) -> JudgeStage | None:
    """The judge stage of a config whose `judge:` names a judge voter's weights (None otherwise): `judge`, as
    `load_judge` read it, checked against the config (ConfigError naming each difference): the same members, the
    same span rule and K as its training records, and a fit for what the config scores. `voter`: the config's own
    voter, a cascade trained with the judge as its last step under `judge.after: cascade`; `early`: its P(right)
    (voters.right), that of the answers its steps stop at."""
    if config.judge is None or judge is None:
        return None
    path = judge.source_
    members = judged_members(config)
    if sorted(judge.members) != sorted(members):
        raise ConfigError(
            f"the judge voter {path} was trained for members {', '.join(judge.members)}; the judge weighs "
            f"{', '.join(members)}"
        )
    trained = judge.metadata_.get("candidates") or {}
    for key in ("rule", "k"):
        if key in trained and trained[key] != getattr(config.judge, key):
            raise ConfigError(
                f"the judge voter {path} was trained on candidates with {key} {trained[key]!r}; the config's "
                f"judge.{key} is {getattr(config.judge, key)!r}"
            )
    scored = scored_families(config)
    if not any(fit.needs <= scored for fit in judge.fits):
        fits = "; ".join(f"{fit.label} needs {', '.join(sorted(fit.needs))}" for fit in judge.fits)
        what = ", ".join(sorted(scored)) or "nothing"
        raise ConfigError(f"the judge voter {path} has no fit for what judge: scores ({what}): {fits}")
    return JudgeStage(judge, config, generation, templates, early, StepRisk.of(voter))
