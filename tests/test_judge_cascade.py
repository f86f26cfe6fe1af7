"""A cascade whose last step is the reader as judge (eor.learning.judge_cascade, `judge.after: cascade`): held-out
figures count the judge's choice and cost where no step stops (hand-checked against the plain cascade's), live
answering runs the steps and asks the judge only where they run to the end, abstention reads the thresholds
chosen for that cascade, a mismatched pair (another judge, a plain cascade, a judge-ended cascade without its
judge) is refused, and `eor train --voter cascade --judge` / `eor bench --config` run on shipped records."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from eor.cli import main
from eor.core.errors import ConfigError, InputError
from eor.core.models import sha256_of
from eor.evaluation.bench.vote import vote
from eor.pipeline.ensemble import Ensemble
from eor.runs.run_data import load_run
from tests.conftest import ROOT
from tests.test_cascade import hand_cascade_document, selector_document
from tests.test_judge_answering import QUESTION, weights  # noqa: F401 - the judge voter's fixture
from tests.test_judge_records import MEMBERS, _config
from voters.batch import VoteBatch
from voters.cascade_fit import THRESHOLDS, SelectorSettings, StepScores, held_out_points
from voters.cascade_points import LastStep
from voters.choice_evidence import ANSWERABLE_FITS, FITS, WITHOUT_CONFIDENCE
from voters.spend import FixedCosts

ORDER = [MEMBERS[1], MEMBERS[2], MEMBERS[0]]  # BM25@1 > Wiki@2 > ReFree


def _batch(n: int = 60, seed: int = 0) -> tuple[VoteBatch, np.ndarray]:
    """Three members answering from {a, b, c}, gold a; costs 1, 2, 3 per question, whatever ran before."""
    rng = np.random.default_rng(seed)
    answers = [[str(rng.choice(["a", "b", "c"], p=[0.5, 0.3, 0.2])) for _ in range(3)] for _ in range(n)]
    batch = VoteBatch(answers, [[["x"]] * 3] * n, ["q"] * n, golds=[["a"]] * n)
    return batch, FixedCosts(np.tile([1.0, 2.0, 3.0], (n, 1)))


def _scores(batch: VoteBatch) -> StepScores:
    blocks, rows = batch.blocks(("em",), None, confidence=False)
    labels = batch.correctness("em") >= 0.5
    return StepScores(blocks, labels, ["m0", "m1", "m2"], rows, SelectorSettings(("em",)), 5, 0)


def test_held_out_points_take_the_last_steps_choice_and_cost_where_no_step_stops():
    batch, costs = _batch()
    scores = _scores(batch)
    plain = held_out_points(scores, costs, "right", repeats=2)
    rng = np.random.default_rng(1)
    right = rng.random((2, len(batch))) < 0.7
    given = rng.random((2, len(batch)))
    last = LastStep(right, np.full(len(batch), 0.5), given)
    ended = held_out_points(scores, costs, "right", repeats=2, last=last)
    never = len(THRESHOLDS) - 1  # +inf: every question runs every step, the last step answers all
    assert THRESHOLDS[never] == math.inf
    assert np.array_equal(ended.right[never], right) and np.allclose(ended.probability[never], given)
    assert ended.points[never].cost == pytest.approx(6.5) and ended.full_cost == pytest.approx(6.5)
    assert ended.full_accuracy == pytest.approx(right.mean()) and plain.full_cost == pytest.approx(6.0)
    # where a step stops, the answer, its P(right) and its cost are the plain cascade's
    assert np.array_equal(ended.steps, plain.steps)  # the same steps stop (the last step changes no stop)
    for t in range(never):
        early = plain.steps[t] < 3  # no step stopped the others: the last step answers them, with its own P
        assert np.array_equal(ended.right[t][early], plain.right[t][early])
        assert np.allclose(ended.probability[t][early], plain.probability[t][early])
        assert np.array_equal(ended.right[t][~early], right[~early])
        assert np.array_equal(ended.probability[t][~early], given[~early])
    assert ended.points[never].members_run == 3.0
    with pytest.raises(InputError, match="choices for 2 repeats"):
        held_out_points(scores, costs, "right", repeats=2, last=LastStep(right[:1], last.cost))


def _stopped_probability(thresholds: list[dict]) -> dict:
    """The cascade's P(right) of its steps' answers (voters.right, the fit without the reader's confidence):
    σ(z) of the chosen answer's score z (means 0, scales 1, other weights 0), with `thresholds`."""
    features = FITS[WITHOUT_CONFIDENCE]
    group = {
        "intercept": 0.0,
        "coef": dict.fromkeys(features, 0.0) | {"score": 1.0},
        "mean": dict.fromkeys(features, 0.0),
        "scale": dict.fromkeys(features, 1.0),
    }
    risk = {"procedure": "learn-then-test", "delta": 0.05, "thresholds": thresholds}
    fit = {"features": list(features), "questions": 600, "groups": {"all": group}, "risk": risk}
    return {"correctness": "em", "fit": {"questions": 600, "folds": 5, "seed": 0}, "fits": {WITHOUT_CONFIDENCE: fit}}


def _cascade_document(judge: Path, threshold: float | None, stopped: list[dict], judged: list[dict]) -> dict:
    """test_cascade's hand cascade over this pool: order BM25@1 > Wiki@2 > ReFree, P = σ(z) of the leader, z = 1
    at every step (P = 0.731); stopping on P(right) and ending with `judge` (its digest and its fit for scores
    under the members' prompts and the passages alone), with the cascade's P(right) σ(z) and thresholds `stopped`
    for its steps' answers, and the risk thresholds `judged` for the judge's."""
    document = hand_cascade_document(threshold)
    document.update(members=MEMBERS, order=ORDER, stop_on="right")
    for j, step in enumerate(document["steps"]):
        step["members"] = ORDER[: j + 1]
        step["selector"] = selector_document(ORDER[: j + 1], {}, 1.0)
    risk = {
        "procedure": "learn-then-test",
        "delta": 0.1,
        "correctness": "em",
        "judged": judged,
    }
    document["meta"] = {
        "probability": _stopped_probability(stopped),
        "last_step": {
            "voter": "judge",
            "weights": str(judge),
            "sha256": sha256_of(judge),
            "fit": "votes+scores, 3 spans",
            "risk": risk,
        },
    }
    return document


RISKS = [  # the steps' answers: at most 0.1 wrong, decline every one; at most 0.3, answer from P ≥ 0.7 (0.731 passes)
    {"alpha": 0.1, "threshold": None, "coverage": 0.0, "error": None, "p_value": None},
    {"alpha": 0.3, "threshold": 0.7, "coverage": 0.5, "error": 0.2, "p_value": 0.01},
]
JUDGED = [  # the judge's answers after the steps: the other way round, so that the two cannot be swapped unseen
    {"alpha": 0.1, "threshold": 0.0, "coverage": 1.0, "error": 0.05, "p_value": 0.01},
    {"alpha": 0.3, "threshold": None, "coverage": 0.0, "error": None, "p_value": None},
]


def _pair(tmp_path: Path, judge: Path, threshold: float | None, after: str = "cascade", name: str = "pair") -> Path:
    cascade = tmp_path / f"{name}-cascade.json"
    cascade.write_text(json.dumps(_cascade_document(judge, threshold, RISKS, JUDGED)))
    config = _config(tmp_path, judge=f"judge: {{rule: entities, k: 3, weights: {judge}, after: {after}}}", name=name)
    config.write_text(config.read_text().replace("voter: {metrics: [em, f1]}", f"voter: {{weights: {cascade}}}"))
    return config


def test_the_steps_answer_what_they_stop_and_the_judge_what_runs_to_the_end(weights, tmp_path):  # noqa: F811
    early = Ensemble.from_config(_pair(tmp_path, weights, 0.5, name="early"), cache=False)
    stopped = early.answer(QUESTION)  # P = 0.731 ≥ 0.5 after BM25@1
    assert stopped.cascade["ran"] == ["BM25@1"] and stopped.judged is None
    assert stopped.probability == pytest.approx(1 / (1 + math.exp(-1)))  # the cascade's P(right) of its answer
    assert stopped.probability_fit == WITHOUT_CONFIDENCE
    assert early.answer(QUESTION, risk=0.3).answer is not None
    declined = early.answer(QUESTION, risk=0.1)  # the cascade's own thresholds: none at 0.1
    assert declined.abstained and declined.abstention["alpha"] == 0.1
    to_end = Ensemble.from_config(_pair(tmp_path, weights, None, name="end"), cache=False)
    judged = to_end.answer(QUESTION)  # never early: every member, then the judge
    assert judged.cascade["skipped"] == [] and judged.judged is not None
    assert judged.answer == judged.judged["candidates"][judged.judged["chosen"]]["text"]
    sure, unsure = to_end.answer(QUESTION, risk=0.1), to_end.answer(QUESTION, risk=0.3)  # the judged thresholds
    assert sure.answer == judged.answer and sure.abstention["threshold"] == 0.0
    assert unsure.abstained and unsure.abstention["threshold"] is None
    every = early.answer(QUESTION, lazy=False)  # every member asked (--all-members): the judge answers
    assert every.cascade is None and every.judged is not None and set(every.members) == set(MEMBERS)
    own = {row["alpha"]: row["threshold"] for row in early.voting.judge_voter.fits_[0].thresholds}
    at_risk = early.answer(QUESTION, lazy=False, risk=0.3)  # not after the steps: the judge's fit's own thresholds
    assert at_risk.abstention["threshold"] == own[0.3]


def test_a_judge_ended_cascade_answers_only_beside_its_judge(weights, tmp_path):  # noqa: F811
    with pytest.raises(ConfigError, match="whose last step is the judge"):  # its last step's selector never answers
        Ensemble.from_config(_pair(tmp_path, weights, 0.5, after="members", name="members"), cache=False)
    other = tmp_path / "other-judge.json"
    other.write_text(Path(weights).read_text().replace('"members"', '"members" ', 1))  # the same voter, other bytes
    config = _pair(tmp_path, weights, 0.5, name="other")
    config.write_text(config.read_text().replace(f"weights: {weights},", f"weights: {other},"))
    with pytest.raises(ConfigError, match="their digests differ"):
        Ensemble.from_config(config, cache=False)
    unscored = _pair(tmp_path, weights, 0.5, name="unscored")  # another fit would answer: refused
    unscored.write_text(unscored.read_text().replace("after: cascade", "after: cascade, score: false"))
    with pytest.raises(ConfigError, match="trained with the judge's fit 'votes\\+scores, 3 spans'"):
        Ensemble.from_config(unscored, cache=False)
    plain = json.loads((tmp_path / "other-cascade.json").read_text())
    plain["meta"] = {}
    (tmp_path / "other-cascade.json").write_text(json.dumps(plain))
    config.write_text(config.read_text().replace(f"weights: {other},", f"weights: {weights},"))
    with pytest.raises(ConfigError, match="needs a cascade trained with the judge as its last step"):
        Ensemble.from_config(config, cache=False)


def _subset(source: Path, out: Path, start: int, stop: int) -> Path:
    """Records `start`-`stop` of a shipped records file, with the config and pool it names."""
    assert main(["records", "unpack", str(source), "--out", str(out)]) == 0
    lines = (out / "records.jsonl").read_text().splitlines()[start:stop]
    (out / "records.jsonl").write_text("\n".join(lines) + "\n")
    return out


def test_train_and_bench_a_judge_ended_cascade_on_shipped_records(tmp_path, capsys):
    records = ROOT / "docs" / "records" / "nq-train.jsonl.gz"
    train = [
        str(_subset(records, tmp_path / name, start, stop)) for name, start, stop in (("a", 0, 100), ("b", 100, 150))
    ]
    held = _subset(records, tmp_path / "held", 450, 520)  # training questions the cascade below never saw
    out, config = tmp_path / "jc.json", ROOT / "configs" / "nq-judge.yaml"
    judge = ROOT / "docs" / "weights" / "nq-offline-judge-600.json"
    flags = ["--config", str(config), "--budget", "2.5", "--rates", "281,60", "--no-confidence", "--metrics", "em,f1"]
    assert (
        main(["train", *train, "--voter", "cascade", "--judge", str(judge), "--out", str(out), *flags]) == 0
    )  # two runs
    shown = capsys.readouterr().out
    assert (
        "cascade ending with the judge" in shown
        and "150 training questions" in shown
        and "P(right) of the judge's answers, held out on" in shown
    )
    document = json.loads(out.read_text())
    assert document["meta"]["records"] == train
    entry = document["meta"]["last_step"]
    assert entry["sha256"] == sha256_of(judge) and entry["fit"].startswith("votes+evidence+scores")
    assert entry["cost"] > 0 and {row["alpha"] for row in entry["risk"]["judged"]} >= {0.1, 0.3}
    assert "stopped" not in entry["risk"] and "P(right) of the steps' answers (confidence)" in shown
    assert shown.count("(learn then test, δ 0.1)") == 1  # the thresholds said once: one for every answer
    assert "thresholds, one for every answer, the steps' and the judge's (learn then test, δ 0.1): 0.1:" in shown
    stopped = document["meta"]["probability"]  # the steps' answers' P(right): a fit per feature set
    assert set(stopped["fits"]) == set(ANSWERABLE_FITS) and stopped["fits"][WITHOUT_CONFIDENCE]["risk"]["delta"] == 0.1
    for fit in stopped["fits"].values():  # one threshold for every answer, the steps' and the judge's, at δ
        assert fit["risk"]["thresholds"] == entry["risk"]["judged"] and entry["risk"]["delta"] == 0.1
    assert document["stop_on"] == "right" and document["chosen"]["cost"] <= 2.5
    with pytest.raises(ConfigError, match="whose last step is the judge"):  # never replayed without its judge
        vote(load_run(held, document["members"]), out)
    paired = ROOT / "docs" / "weights" / "nq-offline-cascade.json"
    runs = ["bench", str(held), "--weights", str(out), "--out", str(tmp_path / "report"), "--against", str(paired)]
    with_config = ["--config", str(tmp_path / "pair.yaml")]
    pair = config.read_text().replace("passages: false", "passages: false\n  after: cascade")
    pair = pair.replace("../docs/weights/nq-offline-judge.json", str(judge)).replace(
        "../../shared", str(ROOT.parent / "shared")
    )
    (tmp_path / "pair.yaml").write_text(pair.replace("pooling: mean", f"pooling: mean\n  weights: {out}"))
    assert main([*runs, *with_config]) == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    cascade = report["cascade"]
    assert report["kind"] == "judge-cascade" and report["questions"] == 70 and 0 < cascade["judged"] < 1
    assert 1 <= cascade["members_run"] <= 7 and cascade["cost"] > 0 and report["fits_used"]
    used = report["selective"]["fits"]  # the records hold confidence: the steps' answers by the fit with it
    assert set(used) == {"confidence", "the judge"} and sum(used.values()) == 70
    assert report["selective"]["risk_levels"] and "vs_against" in report


def test_the_shipped_judge_ended_cascade_pairs_with_the_shipped_judge():
    from eor.core.config import load_config
    from eor.core.models import sha256_of
    from eor.pipeline.stages.judged import judged_by
    from voters.loading import load_voter

    config = load_config(ROOT / "configs" / "nq-judge-cascade.yaml")
    path = config.resolve_path(config.judge.weights)
    cascade = load_voter(config.resolve_path(config.voter.weights), config.members, judge=path)  # the same, by digest
    judge = cascade.judge_  # read once: the digest is of the bytes its fits were parsed from
    assert judge is not None and judge.sha256_ == sha256_of(path)
    assert judged_by(config, cascade) == (judge, cascade)  # checked against the config: it answers the end
    entry = cascade.metadata_["last_step"]
    assert cascade.stop_on_ == "right" and cascade.chosen_point_.cost <= 2.5 and entry["fit"].endswith("10 spans")
    assert config.judge.passages is False and "scores" in entry["scored"] and "passages" not in entry["scored"]


def test_a_judge_ended_cascade_beyond_the_corpus(tmp_path, capsys):
    """`eor train --voter cascade --judge J --nocorpus N`: the judge trained beyond the corpus ends a cascade whose
    steps' P(right) reads the retrieval family and holds P(unanswerable), one threshold over the steps' and the
    judge's answers bounding the mix at δ; a judge trained on answerable questions alone is refused."""
    from eor.commands.train_judge import train_judge

    records = ROOT / "docs" / "records"
    train = _subset(records / "nq-train.jsonl.gz", tmp_path / "train", 0, 120)
    nocorpus = _subset(records / "nq-nocorpus-learn200.jsonl.gz", tmp_path / "nocorpus", 0, 60)
    config = ROOT / "configs" / "nq-judge.yaml"
    judge = tmp_path / "judge.json"
    train_judge(train, judge, pool_config=config, nocorpus=nocorpus, share=0.25)
    out = tmp_path / "jc.json"
    flags = ["--config", str(config), "--budget", "2.5", "--rates", "281,60", "--no-confidence", "--metrics", "em,f1"]
    beyond = ["--nocorpus", str(nocorpus), "--unanswerable-share", "0.25"]
    assert (
        main(["train", str(train), "--voter", "cascade", "--judge", str(judge), "--out", str(out), *flags, *beyond])
        == 0
    )
    shown = capsys.readouterr().out
    assert "one threshold over the steps' and the judge's answers, for a mix with a share 0.25" in shown
    assert "α 0.3: answers" in shown and "% of the no corpus" in shown
    line = next(line for line in shown.splitlines() if line.strip().startswith("α 0.4: answers"))
    found = re.search(
        r"answers ([\d.]+)% of the answerable.*\(the judge gives (\d+) of the (\d+) answerable answered\)", line
    )
    assert found and int(found[2]) <= int(found[3]) and abs(100 * int(found[3]) / 120 - float(found[1])) < 0.06
    document = json.loads(out.read_text())
    meta = document["meta"]
    assert meta["nocorpus_records"] == str(nocorpus) and meta["ablated_records"] is None
    stopped = meta["probability"]
    assert stopped["unanswerable"] is not None and any("retrieval" in name for name in stopped["fits"])
    judged = meta["last_step"]["risk"]
    assert judged["delta"] == 0.1 and all(row["share"] == 0.25 for row in judged["judged"])
    assert all(row["threshold"] is None or "bound" in row for row in judged["judged"])
    for fit in stopped["fits"].values():  # one threshold for every answer, whichever P(right) it carries
        assert fit["risk"]["delta"] == 0.1 and fit["risk"]["thresholds"] == judged["judged"]
    plain = ROOT / "docs" / "weights" / "nq-offline-judge-600.json"
    refused = ["train", str(train), "--voter", "cascade", "--judge", str(plain), "--out", str(tmp_path / "x"), *flags]
    assert main([*refused, *beyond]) != 0 and not (tmp_path / "x").exists()
    assert "trained on answerable questions alone" in capsys.readouterr().err
