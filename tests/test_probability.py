"""P(right) (voters.right), its figures (eor.evaluation.selective) and abstention at a risk (eor.pipeline.abstention) in
every interface: hand-worked evidence and figures, cross-fitting that never sees a question's own label, training on
the shipped records, and an abstention through the Python API, `eor ask --json`, `/v1/answer` and the OpenAI
endpoint with the official client."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import requests

from eor.core.errors import ConfigError, InputError
from tests.conftest import ROOT
from tests.test_cascade import QUESTION, cascade_config, hand_cascade_document
from tests.test_lazy_voting import Scripted
from voters.choice_evidence import (
    ALL,
    ANSWERABLE_FITS,
    EARLY,
    FEATURES,
    FITS,
    LAST,
    WITH_CONFIDENCE,
    WITHOUT_CONFIDENCE,
    Evidence,
    evidence,
)
from voters.right import RightFit, RightModel, fit_right


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


# -- evidence and the cross-fitted logistic -------------------------------------------------------------------


def test_evidence_of_a_choice_by_hand():
    scores = [[2.0, 1.0, 0.5], [0.3, 0.2, -np.inf]]
    answers = [["Paris", "Lyon", "paris"], ["a b", "A B", "c"]]
    passages = [[["Paris is the capital of France."], [], ["Lyon is a city."]], [["x"], ["y"], ["c"]]]
    sure = {"mean_logprob": -0.1, "min_logprob": -0.3, "first_margin": 2.0, "tokens": 2}
    confidence = [[sure, None, {"mean_logprob": -0.5}], [None, None, None]]
    found = evidence(scores, answers, passages, confidence)
    first = dict(zip(FEATURES, found.features[0], strict=True))
    assert found.pick.tolist() == [0, 0] and set(found.group) == {ALL}
    assert first["score"] == 2.0 and first["margin"] == 1.0 and first["alone"] == 0.0  # Lyon is the rival
    assert first["agreement"] == pytest.approx(2 / 3) and first["distinct"] == pytest.approx(2 / 3)
    assert first["log_length"] == pytest.approx(math.log(2)) and first["refusal"] == 0.0
    assert first["grounded"] == 1.0 and first["support"] == pytest.approx(1 / 3)
    assert (first["conf:mean"], first["conf:min"], first["conf:margin"]) == (-0.1, -0.3, 2.0)
    assert first["conf:agreeing_best"] == -0.1 and first["conf:agreeing_mean"] == pytest.approx(-0.3)
    second = dict(zip(FEATURES, found.features[1], strict=True))  # "c" is dropped (−inf): not in the vote
    assert second["alone"] == 1.0 and second["margin"] == 0.0 and second["agreement"] == 1.0
    assert second["distinct"] == 0.5 and second["grounded"] == 0.0 and math.isnan(second["conf:mean"])
    assert evidence(scores, answers, passages, None, LAST, pick=[2, 1]).pick.tolist() == [2, 1]


def rows(n: int, seed: int = 0) -> tuple[Evidence, np.ndarray]:
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, len(FEATURES)))
    right = rng.random(n) < 1 / (1 + np.exp(-2 * features[:, 0]))
    group = np.where(rng.random(n) < 0.5, EARLY, LAST)
    return Evidence(np.zeros(n, dtype=int), features, group), right


def test_a_questions_probability_never_depends_on_its_own_label():
    found, right = rows(200)
    parts = [np.arange(k, 200, 5) for k in range(5)]
    groups, probability = fit_right(found, right, parts)
    assert set(groups) == {ALL, EARLY, LAST} and groups[ALL].coef[0] > 0  # a higher score is more often right
    for question in (0, 7, 123):
        flipped = right.copy()
        flipped[question] = not flipped[question]
        again = fit_right(found, flipped, parts)[1]
        assert again[question] == probability[question]  # fitted on the other folds only
        assert not np.allclose(again, probability)  # its label does move the others' fits


def test_a_small_group_is_served_by_the_pooled_fit():
    found, right = rows(100)
    group = np.array([EARLY] * 90 + [LAST] * 10)
    found = Evidence(found.pick, found.features, group)
    groups, _ = fit_right(found, right, [np.arange(k, 100, 5) for k in range(5)])
    assert set(groups) == {ALL, EARLY}  # ten LAST rows: fewer than MIN_GROUP


def both_fits(found: Evidence, right: np.ndarray, thresholds: list[dict]) -> RightModel:
    """A RightModel with a fit per feature set of a P(right) fitted on answerable questions, each fitted on every
    row of `found` (4 folds)."""
    parts = [np.arange(k, len(found), 4) for k in range(4)]
    fits = {
        name: RightFit(name, fit_right(found, right, parts, FITS[name])[0], len(found), thresholds, "em", 0.1)
        for name in ANSWERABLE_FITS
    }
    return RightModel("em", fits, len(found), 4, 0)


def test_a_probability_section_round_trips_and_malformed_ones_are_refused():
    found, right = rows(120)
    model = both_fits(found, right, [{"alpha": 0.3, "threshold": 0.55, "coverage": 0.4}])
    again = RightModel.from_dict(json.loads(json.dumps(model.to_dict())), "here")
    assert np.allclose(again.probability(found), model.probability(found))
    broken = model.to_dict()
    del broken["fits"][WITH_CONFIDENCE]["groups"][ALL]
    with pytest.raises(ConfigError, match="must include 'all'"):
        RightModel.from_dict(broken, "here")
    with pytest.raises(ConfigError, match="malformed"):
        RightModel.from_dict({"groups": {}}, "here")
    bad_threshold = model.to_dict()
    bad_threshold["fits"][WITHOUT_CONFIDENCE]["risk"]["thresholds"] = [{"alpha": 1.5, "threshold": 0.5}]
    with pytest.raises(ConfigError, match="alpha in"):
        RightModel.from_dict(bad_threshold, "here")
    other = model.to_dict()
    other["fits"][WITHOUT_CONFIDENCE]["features"] = list(FEATURES)
    with pytest.raises(ConfigError, match="not this eor's"):
        RightModel.from_dict(other, "here")


def test_a_choice_without_confidence_is_scored_by_the_fit_without_it_never_by_a_filled_in_value():
    found, right = rows(200)
    unknown = np.isin(np.array(FEATURES), [f for f in FEATURES if f not in FITS[WITHOUT_CONFIDENCE]])
    features = found.features.copy()
    features[::2, unknown] = np.nan  # every other choice: the reader's confidence unknown
    mixed = Evidence(found.pick, features, found.group)
    model = both_fits(found, right, [{"alpha": 0.3, "threshold": 0.5, "coverage": 0.4}])
    names = model.fit_names(mixed)
    assert (names[::2] == WITHOUT_CONFIDENCE).all() and (names[1::2] == WITH_CONFIDENCE).all()
    p = model.probability(mixed)
    alone = RightModel("em", {WITHOUT_CONFIDENCE: model.fits[WITHOUT_CONFIDENCE]}, 200, 4, 0)
    assert np.allclose(p[::2], alone.probability(mixed)[::2])  # the fit without confidence, as if alone
    assert np.allclose(p[1::2], model.probability(found)[1::2])  # the others as they were
    assert not np.allclose(p[::2], model.probability(found)[::2])  # not the fit with confidence
    # a weights file from before fits per feature set holds the fit with confidence only: refused, by name
    fitted = {"questions": 200, "folds": 4, "seed": 0}
    old = model.fits[WITH_CONFIDENCE].to_dict() | {"correctness": "em", "fit": fitted}
    legacy = RightModel.from_dict(json.loads(json.dumps(old)), "old.json")
    assert list(legacy.fits) == [WITH_CONFIDENCE] and np.allclose(legacy.probability(found), model.probability(found))
    with pytest.raises(InputError, match=r"fitted only with the reader's confidence .* 100 of 200 choices lack it"):
        legacy.probability(mixed)


# -- figures of a probability ---------------------------------------------------------------------------------


def test_selective_figures_by_hand():
    from eor.evaluation import selective

    p = np.array([0.2, 0.9, 0.7, 0.8])
    y = np.array([0, 1, 0, 1], dtype=bool)
    # most probable first: 0.9 right, 0.8 right, 0.7 wrong, 0.2 wrong: risk 0, 0, 1/3, 2/4
    assert selective.aurc(p, y) == pytest.approx((0 + 0 + 1 / 3 + 2 / 4) / 4)
    assert selective.aurc(np.full(4, 0.5), y) == pytest.approx(0.5)  # a constant: the error rate at every coverage
    tied = selective.risk_coverage(np.array([0.9, 0.5, 0.5, 0.5]), np.array([1, 1, 0, 0], dtype=bool))[1]
    assert tied == pytest.approx([0, (2 / 3) / 2, (4 / 3) / 3, 2 / 4])  # the tied three: 2/3 wrong each
    assert selective.brier(p, y) == pytest.approx((0.04 + 0.01 + 0.49 + 0.04) / 4)
    assert selective.brier_skill(np.full(4, 0.5), y) == pytest.approx(0.0)  # the constant share right
    assert selective.selective_accuracy(p, y, 0.5) == 1.0
    assert selective.selective_accuracy(p, y, 0.75) == pytest.approx(2 / 3)
    # two equal-mass bins: {0.2, 0.7} mean 0.45, none right; {0.8, 0.9} mean 0.85, both right
    assert selective.ece(p, y, bins=2) == pytest.approx(0.5 * 0.45 + 0.5 * 0.15)
    at = selective.at_threshold(p, y, 0.75)
    assert at["answered"] == 2 and at["coverage"] == 0.5 and at["error"] == 0.0 and at["error_ci"][0] == 0.0
    assert selective.at_threshold(p, y, None)["answered"] == 0


def test_each_question_is_declined_by_its_own_fits_threshold_in_the_bench_section():
    """Four questions, two scored by the fit with confidence (threshold 0.75 at α 0.3) and two by the fit without
    (no threshold at α 0.3): only the first fit's questions at or above 0.75 are answered; the section says how
    many each fit scored and each fit's threshold."""
    from eor.evaluation.bench.probability import section

    found, right = rows(60)
    rich = [{"alpha": 0.3, "threshold": 0.75, "coverage": 0.4}]
    poor = [{"alpha": 0.3, "threshold": None, "coverage": 0.0}]
    model = both_fits(found, right, rich)
    model.fits[WITHOUT_CONFIDENCE] = RightFit(
        WITHOUT_CONFIDENCE, model.fits[WITHOUT_CONFIDENCE].groups, 60, poor, "em", 0.1
    )
    p = np.array([0.9, 0.8, 0.95, 0.7])
    y = np.array([1, 0, 1, 1], dtype=bool)
    names = np.array([WITH_CONFIDENCE, WITHOUT_CONFIDENCE, WITHOUT_CONFIDENCE, WITH_CONFIDENCE])
    found_section = section(p, y, "em", model, names)
    assert found_section["fits"] == {WITH_CONFIDENCE: 2, WITHOUT_CONFIDENCE: 2}
    (level,) = found_section["risk_levels"]
    assert level["answered"] == 1 and level["error"] == 0.0  # 0.9 (with); not 0.95 (without: no threshold)
    assert level["threshold"] == {WITH_CONFIDENCE: 0.75, WITHOUT_CONFIDENCE: None}
    assert level["train_coverage"] == {WITH_CONFIDENCE: 0.4, WITHOUT_CONFIDENCE: 0.0}
    single = section(p, y, "em", model)  # no fits given: the richest fit's threshold, one value
    assert single["risk_levels"][0]["threshold"] == 0.75 and single["risk_levels"][0]["answered"] == 3


def test_the_exact_interval_is_scipys():
    from scipy.stats import binomtest

    from eor.evaluation.selective import clopper_pearson

    for errors, n in ((0, 10), (3, 40), (40, 40), (17, 123)):
        interval = binomtest(errors, n).proportion_ci(0.95, method="exact")
        assert clopper_pearson(errors, n) == pytest.approx((interval.low, interval.high), abs=1e-12)


def test_a_perfectly_calibrated_probability_shows_only_noise():
    from eor.evaluation.selective import calibration_noise, ece

    p = np.random.default_rng(1).uniform(0.1, 0.9, 414)
    noise = calibration_noise(p, draws=300)
    assert 0.02 < noise["mean"] < 0.08 and noise["p95"] > noise["mean"]
    assert ece(p, np.random.default_rng(2).random(414) < p) < noise["p95"] * 1.5


# -- the decision at answer time ----------------------------------------------------------------------------------


def model_with(thresholds: list[dict]) -> RightFit:
    found, right = rows(60)
    return RightFit(WITH_CONFIDENCE, fit_right(found, right, [np.arange(60)])[0], 60, thresholds, "em", None)


def test_the_largest_stored_error_rate_not_above_the_risk_decides():
    from eor.pipeline.abstention import abstention

    model = model_with([{"alpha": 0.2, "threshold": None}, {"alpha": 0.3, "threshold": 0.5}])
    assert abstention(model, 0.49, 0.3).abstained and not abstention(model, 0.5, 0.35).abstained
    assert abstention(model, 0.5, 0.35).alpha == 0.3
    declined = abstention(model, 0.99, 0.25)  # α 0.2 had no threshold: every question declined
    assert declined.abstained and declined.threshold is None and "every question is declined" in declined.reason()
    with pytest.raises(InputError, match="below the lowest error rate"):
        abstention(model, 0.5, 0.1)
    with pytest.raises(InputError, match="needs abstention thresholds"):
        abstention(None, 0.5, 0.3)
    with pytest.raises(InputError, match=r"in \(0, 1\)"):
        abstention(model, 0.5, 1.0)


# -- training stores it; the bench measures it --------------------------------------------------------------------


def test_training_stores_p_right_and_thresholds_that_hold_on_training(tmp_path):
    from eor.commands.train_command import TrainOptions, train
    from eor.evaluation.bench.report import build_report
    from eor.pipeline.abstention import ALPHAS
    from voters import load_voter

    records = ROOT / "docs" / "records" / "nq-train.jsonl.gz"
    seven = ROOT / "configs" / "nq-offline.yaml"
    out = tmp_path / "selector.json"
    options = TrainOptions(voter="selector", metrics=("em", "f1"), pool_config=seven, confidence=False)
    printed = train(records, out, options)
    assert "P(right) (em) out of fold on 600 training questions" in printed and "abstention thresholds" in printed
    assert "confidence (fitted on 600, scores 600 above; alone ECE" in printed
    assert "no confidence (fitted on 600, scores 0 above; alone ECE" in printed
    voter = load_voter(out)
    model = RightModel.from_voter(voter)
    assert model.correctness == "em" and model.questions == 600 and list(model.fits) == list(ANSWERABLE_FITS)
    for fit in model.fits.values():
        assert fit.questions == 600 and [t["alpha"] for t in fit.thresholds] == list(ALPHAS)
        for row in fit.thresholds:  # on the training questions' out-of-fold P, each kept its rate
            assert row["threshold"] is None or row["error"] <= row["alpha"]
        coverage = [row["coverage"] for row in fit.thresholds]
        assert coverage == sorted(coverage) and coverage[-1] > 0.5  # a higher risk answers more
    report = build_report(records, out, metric="em", members=voter.members_, resamples=50, max_subsets=5)
    sel = report["selective"]
    assert sel["calibrated_on"] == "em" and len(sel["reliability"]) == 10 and sel["fits"] == {WITH_CONFIDENCE: 600}
    assert sel["aurc"] < sel["aurc_constant"] and sel["brier_skill"] > 0
    assert [row["alpha"] for row in sel["risk_levels"]] == list(ALPHAS)


# -- an abstention in every interface -------------------------------------------------------------------------------


def probability_section(thresholds: list[dict]) -> dict:
    """P(right) = σ(−2 + z − alone) (means 0, scales 1, other weights 0), by the fit without the reader's
    confidence (the scripted reader reports none): the hand cascade stops after BM25@1 (z = 2, alone) at
    σ(−1) = 0.269."""
    features = FITS[WITHOUT_CONFIDENCE]
    coef = dict.fromkeys(features, 0.0) | {"score": 1.0, "alone": -1.0}
    group = {
        "intercept": -2.0,
        "coef": coef,
        "mean": dict.fromkeys(features, 0.0),
        "scale": dict.fromkeys(features, 1.0),
    }
    fit = {
        "features": list(features),
        "questions": 600,
        "groups": {ALL: group},
        "risk": {"procedure": "learn-then-test", "delta": 0.1, "thresholds": thresholds},
    }
    return {
        "correctness": "em",
        "fit": {"questions": 600, "folds": 5, "seed": 0, "out_of_fold": True},
        "fits": {WITHOUT_CONFIDENCE: fit},
    }


THRESHOLDS = [
    {"alpha": 0.2, "threshold": None, "coverage": 0.0, "error": None, "p_value": None},
    {"alpha": 0.3, "threshold": 0.25, "coverage": 0.6, "error": 0.25, "p_value": 0.001},
    {"alpha": 0.4, "threshold": 0.5, "coverage": 0.8, "error": 0.35, "p_value": 0.001},
]


def weights_with_probability(tmp_path, **changes) -> str:
    document = hand_cascade_document(**changes)
    document["meta"]["probability"] = probability_section(THRESHOLDS)
    path = tmp_path / "cascade-p.json"
    path.write_text(json.dumps(document))
    return str(path)


def test_an_abstention_through_the_python_api(tmp_path, isolated_cache):
    from eor.core.config import load_config
    from eor.pipeline.ensemble import Ensemble
    from voters import load_voter

    config = load_config(cascade_config(tmp_path))
    voter = load_voter(weights_with_probability(tmp_path), members=config.members)
    ensemble = Ensemble(config, reader=Scripted("Leonardo da Vinci"), voter=voter, cache=False)
    answered = ensemble.answer(QUESTION)
    assert answered.probability == pytest.approx(sigmoid(-1), abs=1e-4) and not answered.abstained
    assert answered.probability_fit == WITHOUT_CONFIDENCE == answered.to_dict()["probability_fit"]
    assert answered.answer == "Leonardo da Vinci" and "abstention" not in answered.to_dict()
    at_three = ensemble.answer(QUESTION, risk=0.35)  # α 0.3: threshold 0.25 ≤ 0.269: answered
    assert not at_three.abstained and at_three.abstention["alpha"] == 0.3
    declined = ensemble.answer(QUESTION, risk=0.45)  # α 0.4: threshold 0.5 > 0.269
    assert declined.abstained and declined.answer is None and declined.member == "BM25@1"
    body = declined.to_dict()
    assert body["answer"] is None and body["abstained"] and body["members"]["BM25@1"]["answer"] == "Leonardo da Vinci"
    assert body["abstention"]["reason"].startswith("not sure enough: P(right) 0.27 < 0.50")
    assert body["abstention"]["kind"] == "not_sure"
    with pytest.raises(InputError, match="below the lowest"):
        ensemble.answer(QUESTION, risk=0.1)
    every = ensemble.answer(QUESTION, lazy=False)  # a vote over every member: the cascade's P does not apply
    assert every.probability is None and len(every.members) == 3
    with pytest.raises(InputError, match="without --all-members"):
        ensemble.answer(QUESTION, lazy=False, risk=0.35)
    plain = Ensemble(config, reader=Scripted("x"), voter=load_voter(_plain(tmp_path)), cache=False)
    assert plain.answer(QUESTION).probability is None
    with pytest.raises(InputError, match="needs abstention thresholds"):
        plain.answer(QUESTION, risk=0.3)


def _plain(tmp_path) -> str:
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(hand_cascade_document()))
    return str(path)


def test_an_abstention_through_the_api_and_the_official_openai_client(tmp_path, isolated_cache):
    from openai import OpenAI

    from eor.core.config import load_config
    from eor.pipeline.ensemble import Ensemble
    from eor.server import ServerSettings, create_app
    from tests.test_server import LiveServer
    from voters import load_voter

    config = load_config(cascade_config(tmp_path))
    weights = weights_with_probability(tmp_path)

    def loader() -> Ensemble:
        voter = load_voter(weights, members=config.members)
        return Ensemble(config, reader=Scripted("Leonardo da Vinci"), voter=voter, cache=False)

    with LiveServer(create_app(config, ServerSettings(), loader=loader)) as server:
        server.wait_ready()
        url = f"{server.url}/v1/answer"
        body = requests.post(url, json={"question": QUESTION}, timeout=60).json()
        assert body["answer"] == "Leonardo da Vinci" and not body["abstained"] and body["probability"] == 0.2689
        body = requests.post(url, json={"question": QUESTION, "risk": 0.4}, timeout=60).json()
        assert body["answer"] is None and body["abstained"] and body["abstention"]["threshold"] == 0.5
        assert body["abstention"]["kind"] == "not_sure" and body["member"] == "BM25@1"
        assert body["abstention"]["reason"].startswith("not sure enough")
        for risk, status in ((1.5, 422), (0.0, 422), (0.1, 422), ("0.4", 422)):  # a number, as in Python
            reply = requests.post(url, json={"question": QUESTION, "risk": risk}, timeout=60)
            assert reply.status_code == status
        client = OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=60)
        messages = [{"role": "user", "content": QUESTION}]
        completion = client.chat.completions.create(model="eor", messages=messages, extra_body={"risk": 0.4})
        assert completion.choices[0].message.content == "I don't know."
        details = completion.model_extra["eor"]
        assert details["abstained"] and details["answer"] is None and details["probability"] == 0.2689
        completion = client.chat.completions.create(model="eor", messages=messages)
        assert completion.choices[0].message.content == "Leonardo da Vinci"
        assert completion.model_extra["eor"]["probability"] == 0.2689


def test_an_abstention_through_ask_json_and_risk_refused_by_the_parser(tmp_path, isolated_cache, capsys):
    """The real reader (SmolLM2): at α 0.2 no threshold kept the rate, so every question is declined."""
    from eor.cli import main
    from tests.test_cascade import selector_document
    from tests.test_cli import small_config

    config = small_config(tmp_path)  # ReFree, BM25@1, Wiki@1, BM25@1&Wiki@1
    members = ["ReFree", "BM25@1", "Wiki@1", "BM25@1&Wiki@1"]
    order = ["BM25@1", "Wiki@1", "ReFree", "BM25@1&Wiki@1"]
    document = hand_cascade_document(threshold=0.0)
    document.update(members=members, order=order)
    document["steps"] = [
        {
            "members": order[: j + 1],
            "calibration": {"intercept": 0.0, "top": 1.0, "margin": 0.0},
            "selector": selector_document(order[: j + 1], {"agreement": 1.0}, 0.0),
        }
        for j in range(len(order))
    ]
    document["meta"]["probability"] = probability_section(THRESHOLDS)
    weights = tmp_path / "cascade.json"
    weights.write_text(json.dumps(document))
    ask = ["ask", QUESTION, "--config", str(config), "--weights", str(weights)]
    assert main([*ask, "--json", "--risk", "0.25"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["answer"] is None and result["abstained"] and 0 < result["probability"] < 1
    assert "every question is declined" in result["abstention"]["reason"]
    assert main([*ask, "--risk", "0.25"]) == 0
    shown = capsys.readouterr().out
    assert "Answer:   I don't know: no threshold kept" in shown and "P(right): " in shown
    for bad in ("1.5", "0", "abc"):
        with pytest.raises(SystemExit) as exit_:
            main([*ask, "--risk", bad])
        assert exit_.value.code == 2
    assert "strictly between 0 and 1" in capsys.readouterr().err
    plain = tmp_path / "plain.json"
    del document["meta"]["probability"]
    plain.write_text(json.dumps(document))
    assert main(["ask", QUESTION, "--config", str(config), "--weights", str(plain), "--risk", "0.3"]) != 0
    assert "needs abstention thresholds" in capsys.readouterr().err


def test_a_config_risk_is_checked_at_start(tmp_path, isolated_cache):
    from eor.core.config import load_config
    from eor.pipeline.ensemble import Ensemble
    from voters import load_voter

    path = cascade_config(tmp_path)
    path.write_text(path.read_text().replace("voter: {metrics: [em]", "voter: {metrics: [em], risk: 0.3"))
    config = load_config(path)
    with pytest.raises(ConfigError, match="voter.risk: a risk needs abstention thresholds"):
        Ensemble(config, reader=Scripted("x"), voter=load_voter(_plain(tmp_path)), cache=False)
    voter = load_voter(weights_with_probability(tmp_path), members=config.members)
    ensemble = Ensemble(config, reader=Scripted("Leonardo da Vinci"), voter=voter, cache=False)
    assert ensemble.answer(QUESTION).abstention is None  # the Python API applies only the risk it is given
    path.write_text(path.read_text().replace("risk: 0.3", "risk: 1.5"))
    with pytest.raises(ConfigError, match="'voter.risk' must lie in"):
        load_config(path)


def test_the_cascade_of_the_600_on_records_without_confidence_says_which_fit_scored_them(tmp_path):
    """The issue's case: the same answers, with and without the reader's confidence in the records. With it,
    the fit with confidence scores every question; without it, the fit without confidence does (as its own
    cross-fitted training rows were scored), never the fit with confidence on filled-in values; a weights file
    from before fits per feature set refuses the records without it, naming what is missing."""
    import dataclasses

    from eor.evaluation.bench.vote import vote
    from eor.runs.run_data import load_run
    from voters.choice_evidence import choice_evidence

    shipped = ROOT / "docs" / "weights" / "nq-offline-cascade-600.json"  # fits with and without confidence
    data = load_run(ROOT / "docs" / "records" / "nq-train.jsonl.gz").subset(list(range(120)))
    blind = dataclasses.replace(data, confidence=[[None] * len(row) for row in data.confidence])
    seen, unseen = vote(data, shipped), vote(blind, shipped)
    assert (seen.chosen == unseen.chosen).all()  # the same answers: the shipped cascade reads no confidence
    assert set(seen.fits) == {WITH_CONFIDENCE} and set(unseen.fits) == {WITHOUT_CONFIDENCE}
    model = RightModel.from_voter(unseen.voter)
    alone = RightModel(model.correctness, {WITHOUT_CONFIDENCE: model.fits[WITHOUT_CONFIDENCE]}, 600, 5, 0)
    assert alone.fit_names(choice_evidence(seen.voter, _batch(data, seen))).tolist() == [WITHOUT_CONFIDENCE] * 120
    assert np.allclose(unseen.probability, alone.probability(choice_evidence(seen.voter, _batch(data, seen))))
    document = json.loads(shipped.read_text(encoding="utf-8"))
    probability = document["meta"]["probability"]
    old = probability["fits"][WITH_CONFIDENCE] | {"correctness": "em", "fit": probability["fit"]}
    document["meta"]["probability"] = old  # as weights files were written before fits per feature set
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps(document), encoding="utf-8")
    assert np.allclose(vote(data, legacy).probability, seen.probability)
    with pytest.raises(InputError, match="fitted only with the reader's confidence"):
        vote(blind, legacy)


def _batch(data, voted):
    from voters.batch import VoteBatch

    columns = [data.names.index(name) for name in voted.members]
    return VoteBatch(
        [[row[c] for c in columns] for row in data.answers],
        [[row[c] for c in columns] for row in data.passages],
        data.texts,
        confidence=[[row[c] for c in columns] for row in data.confidence],
    )
