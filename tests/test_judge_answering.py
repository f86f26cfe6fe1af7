"""Answering with a judge voter (config `judge.weights`, eor.pipeline.stages.judged.JudgeStage): every member runs, the
reader scores the candidates, the voter's fit for what was scored chooses, and the answer shows its
candidates wherever it appears (`eor ask`, `--json`, `--explain`); a config that asks for scores its voter has
no fit for is refused at start, and without scores the text fit answers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from eor.cli import main
from eor.core.errors import ConfigError, InputError
from eor.core.json_ready import json_ready
from eor.pipeline.abstention import thresholds
from eor.pipeline.ensemble import Ensemble
from eor.pipeline.judging import null_scores
from eor.server.schemas import AnswerResponse
from tests.test_judge_records import MEMBERS, _config
from voters.codecs import save_voter
from voters.judge_features import Evidence, judge_features, relevance_of
from voters.judge_selector import JudgeSelector, JudgeVoter
from voters.loading import load_voter

QUESTION = "who painted the mona lisa"


def _training(rng: np.random.Generator, n: int = 60, relevance: bool = False) -> tuple[list, list]:
    """Questions of three candidates (two members' answers, a span); the right one is the likeliest under every
    member's prompt, by a margin drawn at random; `relevance`: the retrieved passages' relevance and the null
    candidate's scores drawn at random too."""
    questions, labels = [], []
    for i in range(n):
        right = i % 3
        candidates = []
        for c, (text, members) in enumerate((("a", [MEMBERS[0]]), ("b", MEMBERS[1:]), ("c", []))):
            total = -1.0 if c == right else -1.0 - float(rng.uniform(0.5, 3))
            summary = {"logprob": total, "mean_logprob": total, "min_logprob": total, "tokens": 1}
            scores = {m: summary for m in MEMBERS}
            candidates.append(
                {"text": text, "members": members, "rule": "members" if members else "entities", "scores": scores}
            )
        drawn = tuple(float(v) for v in rng.uniform(size=3)) if relevance else None
        answers = {MEMBERS[0]: "a", MEMBERS[1]: "b", MEMBERS[2]: "b"}
        evidence = Evidence("q", answers, {m: ["a b c"] for m in MEMBERS}, drawn)
        declining = {m: [{"logprob": float(rng.uniform(-6, -1)), "mean_logprob": -1.0}] for m in MEMBERS}
        null = {"texts": ["Unknown"], "scores": declining} if relevance else None
        questions.append(judge_features(candidates, MEMBERS, evidence, null))
        labels.append(np.arange(3) == right)
    return questions, labels


def _fit(families: tuple[str, ...], questions: list, labels: list, retrieval: bool = False) -> JudgeSelector:
    fit = JudgeSelector(families, 3, retrieval=retrieval, null=retrieval).fit(questions, labels)
    choices = [fit.choose(q) for q in questions]
    right = [bool(r[c.index]) for c, r in zip(choices, labels, strict=True)]
    fit.calibrate(choices, right)
    probability = [fit.choose(q).probability for q in questions]
    fit.thresholds_, fit.delta_ = [t.to_dict() for t in thresholds(probability, right)], 0.1
    return fit


@pytest.fixture(scope="module")
def weights(tmp_path_factory) -> Path:
    questions, labels = _training(np.random.default_rng(0))
    voter = JudgeVoter.of_fits(
        [_fit(("votes", "scores"), questions, labels), _fit(("votes",), questions, labels)], MEMBERS
    )
    return save_voter(voter, tmp_path_factory.mktemp("judge") / "judge.json", candidates={"rule": "entities", "k": 3})


def _judged(tmp_path: Path, weights: Path, extra: str = "", name: str = "judged") -> Path:
    return _config(tmp_path, judge=f"judge: {{rule: entities, k: 3, weights: {weights}{extra}}}", name=name)


def test_the_judge_answers_with_the_candidate_it_chooses_and_says_so(weights, tmp_path, capsys):
    ensemble = Ensemble.from_config(_judged(tmp_path, weights), cache=False)
    result = ensemble.answer(QUESTION)
    judged = result.judged
    assert (
        judged is not None and judged["fit"] == "votes+scores, 3 spans" and judged["scored"] == ["passages", "scores"]
    )
    candidates = judged["candidates"]
    chosen = candidates[judged["chosen"]]
    assert result.answer == chosen["text"] and 0 < result.probability < 1
    assert not result.skipped and set(result.members) == set(MEMBERS)  # the judge weighs every member
    for member in MEMBERS:  # each member's answer is a candidate, with its writers
        if result.members[member].answer.strip():
            assert any(member in c["members"] for c in candidates)
    for candidate in candidates:
        assert set(candidate["scores"]) >= set(MEMBERS) and candidate["score"] is not None
    # the chosen candidate has the highest log-odds, and the member credited is a writer or holds it in passages
    assert chosen["score"] == max(c["score"] for c in candidates)
    credited = chosen["members"] or chosen["supported_by"]  # a writer, else a member whose passages hold it
    assert not credited or result.member == credited[0]
    assert result.given_by == chosen["members"]
    assert result.timings["judge"] > 0 and result.timings["total"] >= result.timings["judge"]
    body = result.to_dict()
    assert body["judge"]["chosen"] == judged["chosen"] and json.dumps(body)
    # what /v1/answer and the OpenAI endpoint's `eor` object send (eor.server.app._result_body) fits the schema
    sent = AnswerResponse.model_validate({"degraded": [], "degraded_reasons": {}, **json_ready(body)})
    assert sent.judge is not None and sent.judge.candidates[judged["chosen"]].text == result.answer
    assert ensemble.explain(result)["judge"] == judged

    capsys.readouterr()
    assert main(["ask", QUESTION, "--config", str(_judged(tmp_path, weights)), "--no-cache", "--explain"]) == 0
    shown = capsys.readouterr().out
    assert "chosen by the judge" in shown and "the judge's candidates (fit votes+scores, 3 spans" in shown
    assert main(["ask", QUESTION, "--config", str(_judged(tmp_path, weights)), "--no-cache", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["judge"]["candidates"]


def test_a_judge_whose_p_right_reads_the_retrieval_and_null_families_computes_them_live(tmp_path):
    """The passages the members retrieved are weighed against the question (voters.judge_features relevance_of),
    and the null candidate scored under the members' prompts (eor.pipeline.judging.null_scores), live, when the
    voter's P(right) reads them: P(right) is what the fit gives on that evidence."""
    questions, labels = _training(np.random.default_rng(4), relevance=True)
    voter = JudgeVoter.of_fits([_fit(("votes", "scores"), questions, labels, retrieval=True)], MEMBERS)
    path = save_voter(voter, tmp_path / "reading.json", candidates={"rule": "entities", "k": 3})
    ensemble = Ensemble.from_config(_judged(tmp_path, path, name="reading"), cache=False)
    result = ensemble.answer(QUESTION)
    assert result.probability is not None and 0 < result.probability < 1
    outputs = {name: result.members[name] for name in MEMBERS}
    (relevance,) = relevance_of([QUESTION], [outputs])
    assert 0 < relevance[0] <= 1  # the members retrieved passages about the question
    null = null_scores(ensemble.generation, outputs)
    assert set(null["scores"]) == {name for name in MEMBERS if outputs[name].prompt}
    rows = [{key: c[key] for key in ("text", "members", "scores")} for c in result.judged["candidates"]]
    evidence = Evidence.from_outputs(QUESTION, outputs, relevance)
    choice, _ = voter.choose(judge_features(rows, MEMBERS, evidence, null))
    assert choice.text == result.answer and choice.probability == pytest.approx(result.probability, abs=1e-9)


def test_without_scores_the_text_fit_answers_and_a_missing_fit_is_refused(weights, tmp_path):
    plain = Ensemble.from_config(_judged(tmp_path, weights, ", score: false", "plain"), cache=False)
    result = plain.answer(QUESTION)
    assert result.judged["fit"] == "votes, 3 spans" and result.judged["scored"] == []
    assert all(not c["scores"] for c in result.judged["candidates"])
    assert plain.generation.score_stats.requests == 0  # no reader time after the members'
    alone = load_voter(weights, kind="judge")
    alone.fits_ = alone.fits_[:1]  # the scored fit alone
    only = save_voter(alone, tmp_path / "scored-only.json", candidates={"rule": "entities", "k": 3})
    with pytest.raises(ConfigError, match="has no fit for what judge: scores \\(nothing\\)"):
        Ensemble.from_config(_judged(tmp_path, only, ", score: false", "refused"), cache=False)
    with pytest.raises(ConfigError, match="trained on candidates with k 3; the config's judge.k is 5"):
        Ensemble.from_config(_config(tmp_path, judge=f"judge: {{k: 5, weights: {weights}}}", name="k5"), cache=False)


def test_at_a_risk_the_judge_abstains_by_its_fit_thresholds_and_refuses_a_subset(weights, tmp_path):
    voter = load_voter(weights, kind="judge")
    for fit in voter.fits_:  # at most 0.1 wrong: decline every question; at most 0.3: answer every question
        fit.thresholds_ = [
            {"alpha": 0.1, "threshold": None, "coverage": 0.0, "error": None, "p_value": None},
            {"alpha": 0.3, "threshold": 0.0, "coverage": 1.0, "error": 0.2, "p_value": 0.01},
        ]
    strict = save_voter(voter, tmp_path / "strict.json", candidates={"rule": "entities", "k": 3})
    ensemble = Ensemble.from_config(_judged(tmp_path, strict, name="risky"), cache=False)
    declined, answered = ensemble.answer(QUESTION, risk=0.1), ensemble.answer(QUESTION, risk=0.3)
    assert declined.abstained and declined.answer is None and declined.abstention["alpha"] == 0.1
    assert declined.judged is not None  # the candidates are still there to see
    assert (
        not answered.abstained and answered.answer == answered.judged["candidates"][answered.judged["chosen"]]["text"]
    )
    with pytest.raises(InputError, match="below the lowest error rate"):
        ensemble.answer(QUESTION, risk=0.05)
    with pytest.raises(InputError, match="judge voter, which weighs the answers of every member"):
        ensemble.answer(QUESTION, members=MEMBERS[:2])
