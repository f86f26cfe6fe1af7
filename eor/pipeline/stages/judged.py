"""The vote stage of a pool that answers with a judge voter (voters.judge_selector, a config's `judge.weights`):
`JudgeStage` is a `VoteStage` (eor.pipeline.stages.voting) whose last word is the judge's, so that the ensemble has one
decision path: the answering strategies (eor.pipeline.answering) run the members as for any voter (every member,
or the steps of a cascade trained with the judge as its last step), then `conclude` lets the judge decide.

After the members answered, the question's candidates are scored by the reader under the members' prompts
(eor.pipeline.judging: the members' prompts were just evaluated, and the reader keeps their states), the voter's
fit for what was scored chooses among them, and its P(right) and abstention thresholds decide whether to answer.
With `judge.after: cascade` the config's voter is a cascade trained with this judge as its last step (`eor train
--voter cascade --judge`, eor.learning.judge_cascade): its steps answer the questions they stop, and the judge
answers those it runs to its end (`reached_end`).

`vote_stage` builds the stage of any pool from its voter (voters.loading.choose_voter): a plain `VoteStage` without a
judge; a `JudgeStage` for the judge voter, or for a cascade carrying the judge it was trained to end with.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eor.core.answers import normalize_answer
from eor.core.config import EnsembleConfig
from eor.core.errors import ConfigError, InputError
from eor.core.prompts import PromptTemplates
from eor.core.results import Result
from eor.pipeline.abstention import abstention
from eor.pipeline.judging import judge, judged_members, null_scores, scored_families
from eor.pipeline.stages.generation import GenerationStage
from eor.pipeline.stages.voting import VoteStage
from voters.judge_features import Evidence, judge_features, relevance_of
from voters.judge_selector import JudgeSelector, JudgeVoter
from voters.judge_step import StepRisk, ends_with_judge
from voters.loading import choose_voter
from voters.right import RightModel


def reached_end(result: Result) -> bool:
    """Whether every member the answering ran for `result` was asked: no cascade, or one run to its end."""
    return result.cascade is None or not result.cascade.get("skipped")


class JudgeStage(VoteStage):
    """The vote stage of a pool answering with the judge voter `judge`: the answering strategies see the config's
    voter (`voter`: the uniform vote over every member, or a cascade trained with the judge as its last step),
    and `conclude` hands each question the members' answers reached to the judge (`decide`), or, after a cascade
    step that stopped it, declines it by the cascade's own thresholds (`stopped`)."""

    def __init__(
        self,
        judge: JudgeVoter,
        config: EnsembleConfig,
        generation: GenerationStage,
        templates: PromptTemplates,
        voter: Any,
        members: Sequence[str],
        right: RightModel | None,
        outside: tuple[str | None, str | None] = (None, None),
    ) -> None:
        """`right`: the voter's P(right) (the answers a cascade's steps stop at); `outside`: why the voter's and
        the judge's thresholds do not hold for this pool (eor.pipeline.pool.outside_guarantee), said with every
        abstention decision of each."""
        assert config.judge is not None  # `vote_stage` builds one only for a config with a judge
        super().__init__(voter, members, right, outside[0])
        self.judge_voter = judge
        # after a cascade: the thresholds of the judge's answers chosen on the questions it runs to its end
        self.late = StepRisk.of(voter)
        self.settings = config.judge
        self.generation = generation
        self.templates = templates
        self.judged = list(judge.members_)  # the training records' order (`vote_stage` checks the names)
        self.source = judge.source_ or "the judge's weights file"
        self.outside_judge = outside[1]

    @property
    def lazy(self) -> bool:
        """Never bounded: the judge weighs the answers of every member it was trained on."""
        return False

    def check_members(self, names: Sequence[str], members: Sequence[str] | None, lazy: bool) -> None:
        super().check_members(names, members, lazy)
        if members is not None and set(names) != set(self.judged):
            raise InputError(
                "this pool answers with a judge voter, which weighs the answers of every member it was trained "
                "on: ask without `members`"
            )

    def check_risk(self, risk: float | None, every_member: bool = False) -> float | None:
        """`risk` checked against the judge's fits' thresholds, and after a cascade against the thresholds of
        its steps' answers and of the judge's (InputError: none, or none at or below it)."""
        if risk is not None:
            for fit in self.judge_voter.fits_:
                abstention(fit, 1.0, risk, f"the judge voter {self.source} ({fit.label})")
            if self.in_steps:
                abstention(None if self.right is None else self.right.fit(), 1.0, risk, "the cascade before the judge")
                abstention(self.late, 1.0, risk, "the cascade's judge")
        return risk

    def conclude(self, result: Result, risk: float | None) -> Result:
        """The judge's decision where every member the answering ran was asked, else the cascade step's."""
        return self.decide(result, risk) if reached_end(result) else self.stopped(result, risk)

    def _thresholds(self, result: Result, fit: JudgeSelector) -> Any:
        """What declines a judged answer: after a cascade's steps (`result.cascade`), the thresholds chosen for
        the judge's share of the cascade's questions; else (every member asked) the fit's own."""
        return self.late if self.late is not None and result.cascade is not None else fit

    def stopped(self, result: Result, risk: float | None = None) -> Result:
        """`result` answered by a step of the cascade before the judge (its P(right) the cascade's, voters.right,
        by the fit `result.probability_fit`), declined at `risk` below that fit's threshold."""
        if risk is not None:
            probability = math.nan if result.probability is None else result.probability
            fit = None if self.right is None else self.right.fit(result.probability_fit)
            verdict = abstention(
                fit, probability, risk, "the cascade before the judge", result.unanswerable, self.outside
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
        outputs = {name: result.members[name] for name in self.judged if name in result.members}
        judged = judge(self.generation, result.question, outputs, self.settings, self.templates)
        rows = [entry.to_dict() for entry in judged]
        relevance = relevance_of([result.question], [outputs])[0] if self.judge_voter.reads_retrieval else None
        evidence = Evidence.from_outputs(result.question, outputs, relevance)
        scored = any(row["scores"] for row in rows)  # behind the prompts just scored: none is evaluated again
        null = null_scores(self.generation, outputs) if self.judge_voter.reads_null and scored else None
        features = judge_features(rows, self.judged, evidence, null)
        choice, fit = self.judge_voter.choose(features)
        if choice is None:  # no candidate competes (no member wrote anything, no span): nothing to stand behind
            if risk is not None:
                verdict = abstention(
                    self._thresholds(result, fit), math.nan, risk, self.source, None, self.outside_judge
                )
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
                self.outside_judge,
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


def vote_stage(
    config: EnsembleConfig,
    voter: Any,
    judged: tuple[JudgeVoter, Any] | None,
    right: RightModel | None,
    outside: tuple[str | None, str | None],
    generation: GenerationStage,
    templates: PromptTemplates,
) -> VoteStage:
    """The vote stage of a pool answering with `voter` (voters.loading.choose_voter; `judged`: the judge with the
    last word and the voter its members run through, `judged_by`'s, checked before the reader loaded; `right`, the
    voter's P(right); `outside`: why the voter's and the judge's thresholds do not hold for this pool): a
    `JudgeStage` whose last word is the judge's where the voter has a judge, else a plain `VoteStage`."""
    if judged is None:
        return VoteStage(voter, config.members, right, outside[0])
    judge, steps = judged
    return JudgeStage(judge, config, generation, templates, steps, config.members, right, outside)


def judged_by(config: EnsembleConfig, voter: Any) -> tuple[JudgeVoter, Any] | None:
    """The judge voter with the last word for `voter` and the voter the members run through: the judge voter itself
    (it `chooses` the candidates) and the uniform vote (every member runs), or the judge a cascade carries
    (`judge_`, the judge it was trained to end with) and that cascade; None for a voter without a judge. ConfigError
    where the voter and the config's `judge:` disagree (`check_judge`)."""
    entry = ends_with_judge(voter)
    named = None if config.judge is None else config.judge.weights
    if voter.chooses == "candidates":
        found = voter, choose_voter(None, config.members, **config.voter.uniform())
    elif voter.judge_ is not None:
        found = voter.judge_, voter
    elif entry is not None:
        raise ConfigError(
            f"{voter.source_ or 'the voter'} is a cascade whose last step is the judge {entry.get('weights')}: answer "
            "with it beside that judge (judge: {weights: ..., after: cascade}), never with its last step's selector"
        )
    elif named is not None or (config.judge is not None and config.judge.after == "cascade"):
        raise ConfigError(
            f"the config's judge: answers after {config.judge.after if config.judge else 'members'} with the judge "
            f"voter {named}, and {voter.source_ or 'the voter given'} carries no judge: answer with the config's "
            "own voter (eor.pipeline.ensemble.config_voter), or a cascade trained with that judge and loaded with it "
            "(voters.load_voter(path, judge=...))"
        )
    else:
        return None
    check_judge(config, found[0], entry)
    return found


def check_judge(config: EnsembleConfig, judge: JudgeVoter, entry: dict[str, Any] | None) -> None:
    """The judge voter `judge` checked against the config's `judge:` section (ConfigError naming each difference):
    what it answers after (`entry`: what the cascade it ends says of it, None after every member), its file, the
    same members, the same span rule and K as its training records, a fit for what the config scores, and after a
    cascade the fit the cascade was trained with."""
    path, settings = judge.source_, config.judge
    if settings is None:
        raise ConfigError(
            f"the judge voter {path} chooses among candidate answers that the config's judge: section makes and "
            "scores: name it there (judge: {weights: ...})"
        )
    after = "cascade" if entry is not None else "members"
    if settings.after != after:
        raise ConfigError(
            f"judge.after is {settings.after}, but the judge voter {path} answers after "
            f"{'a cascade trained with it as its last step' if after == 'cascade' else 'every member'}: set "
            f"judge.after: {after}"
        )
    if settings.weights is not None and path is not None:
        if Path(path).resolve() != config.resolve_path(settings.weights).resolve():
            raise ConfigError(
                f"the voter answers with the judge {path}; the config's judge.weights is {settings.weights}"
            )
    members = judged_members(config)
    if sorted(judge.members_) != sorted(members):
        raise ConfigError(
            f"the judge voter {path} was trained for members {', '.join(judge.members_)}; the judge weighs "
            f"{', '.join(members)}"
        )
    trained = judge.metadata_.get("candidates") or {}
    for key in ("rule", "k"):
        if key in trained and trained[key] != getattr(settings, key):
            raise ConfigError(
                f"the judge voter {path} was trained on candidates with {key} {trained[key]!r}; the config's "
                f"judge.{key} is {getattr(settings, key)!r}"
            )
    scored = scored_families(config)
    if not any(fit.needs <= scored for fit in judge.fits_):
        fits = "; ".join(f"{fit.label} needs {', '.join(sorted(fit.needs))}" for fit in judge.fits_)
        what = ", ".join(sorted(scored)) or "nothing"
        raise ConfigError(f"the judge voter {path} has no fit for what judge: scores ({what}): {fits}")
    if entry is not None and judge.fit_scoring(scored).label != entry.get("fit"):
        raise ConfigError(
            f"the cascade ending with {path} was trained with the judge's fit {entry.get('fit')!r} as its last step; "
            f"what this config's judge: scores ({', '.join(sorted(scored)) or 'nothing'}) is answered by "
            f"{judge.fit_scoring(scored).label!r}: set judge.score and judge.passages as the cascade was trained"
        )
