"""The judge's per-candidate features (voters.judge_features) worked by hand, the selector and voter that choose
among candidates (voters.judge_selector), and their training (eor.learning.judge_training)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from eor.core.errors import ConfigError, InputError
from voters.codecs import document_of, judge_fit_document, judge_fit_from_document, voter_from_document
from voters.judge_features import Evidence, JudgeFeatures, answer_shapes, judge_features, question_type
from voters.judge_selector import JudgeSelector, JudgeVoter
from voters.loading import choose_voter, load_voter

ROOT = Path(__file__).resolve().parent.parent


def _score(total: float) -> dict:
    return {"logprob": total, "mean_logprob": total / 2, "min_logprob": total, "tokens": 2}


CANDIDATES = [
    {"text": "Paris", "members": ["A", "B"], "rule": "members",
     "scores": {"A": _score(-1.0), "B": _score(-2.0), "#p1": _score(-1.5)}},
    {"text": "Lyon", "members": [], "rule": "entities",
     "scores": {"A": _score(-3.0), "B": _score(-1.0), "#p1": _score(-0.5)}},
]  # fmt: skip
EVIDENCE = Evidence(
    "where is the capital of france",
    {"A": "Paris", "B": "Paris", "C": ""},  # C failed: no prompt, no answer
    {"A": ["Paris is the capital.", "Lyon is a city in France."], "B": ["Lyon and Paris."], "C": []},
)


def test_features_by_hand():
    features = judge_features(CANDIDATES, ["A", "B", "C"], EVIDENCE)
    row = dict(zip(features.names, features.matrix.T, strict=True))
    assert features.texts == ["Paris", "Lyon"] and features.scored == {"scores", "passages"}
    assert row["wrote:A"].tolist() == [1, 0] and row["wrote:C"].tolist() == [0, 0]
    assert row["agreement"].tolist() == pytest.approx([2 / 3, 0])
    assert row["span"].tolist() == [0, 1]
    assert row["log_length"].tolist() == pytest.approx([math.log(2)] * 2)
    # three distinct passages read: Paris is in the first and third, Lyon in the second and third
    assert row["support:passages"].tolist() == pytest.approx([2 / 3, 2 / 3])
    assert row["top:passage"].tolist() == [1, 1]  # A's first passage holds Paris, B's first holds Lyon
    assert row["inside:members"].tolist() == [0, 0]
    assert row["in_question"].tolist() == [0, 0]
    assert row["type:match"].tolist() == [1, 1] and row["type:clash"].tolist() == [0, 0]  # where: a name
    assert row["lp:A"].tolist() == [0, -2] and row["lp:B"].tolist() == [-1, 0] and row["lp:C"].tolist() == [0, 0]
    assert row["mean:A"].tolist() == [0, -1] and row["mean:B"].tolist() == [-0.5, 0]
    # log(e^-1 + e^-2) = -0.686738..., log(e^-3 + e^-1) = -0.873072...: Paris first by 0.186334
    gap = math.log(math.exp(-1) + math.exp(-2)) - math.log(math.exp(-3) + math.exp(-1))
    assert row["mix:members"].tolist() == pytest.approx([0, -gap])
    assert row["mix:passages"].tolist() == [-1, 0] and row["best:passages"].tolist() == [-1, 0]
    assert row["rank:members"].tolist() == [0, 1]
    assert row["margin:members"].tolist() == pytest.approx([gap, -gap])
    # absolute, for P(right): the best mean under a member's prompt, the mixture, the best mean under a passage
    assert row["abs:mean"].tolist() == [-0.5, -0.5]
    assert row["abs:mix"].tolist() == pytest.approx(
        [math.log(math.exp(-1) + math.exp(-2)), math.log(math.exp(-3) + math.exp(-1))]
    )
    assert row["abs:passages"].tolist() == [-0.75, -0.25]
    assert row["abs:distinct"].tolist() == pytest.approx([1 / 3, 1 / 3])  # one answer among three members


def test_the_retrieval_family_that_p_right_may_read():
    """The judge's P(right) reads the retrieved passages' relevance only where its fit was made to (a file from
    before it loads and reads what it read); relevance_of is voters.relevance over the passages found in a
    corpus, never a document the reader wrote."""
    from eor.core.results import MemberOutput
    from voters.judge_features import relevance_of
    from voters.relevance import Relevance

    unknown = judge_features(CANDIDATES, ["A", "B", "C"], EVIDENCE)
    row = dict(zip(unknown.names, unknown.matrix.T, strict=True))
    assert all(np.isnan(row[name]).all() for name in ("retr:cosine", "retr:margin", "retr:share"))  # not computed
    known = Evidence(EVIDENCE.question, EVIDENCE.answers, EVIDENCE.passages, (0.8, 0.25, 0.5))
    features = judge_features(CANDIDATES, ["A", "B", "C"], known)
    row = dict(zip(features.names, features.matrix.T, strict=True))
    assert row["retr:cosine"].tolist() == [0.8, 0.8] and row["retr:margin"].tolist() == [0.25, 0.25]
    assert row["retr:share"].tolist() == [0.5, 0.5]
    rng = np.random.default_rng(5)
    train = [_question(bool(i % 2), rng) for i in range(40)]
    plain = JudgeSelector(("votes", "scores"), 1).fit([f for f, _ in train], [r for _, r in train])
    reading = JudgeSelector(("votes", "scores"), 1, retrieval=True).fit([f for f, _ in train], [r for _, r in train])
    assert plain.absolute == ["abs:mean", "abs:mix", "abs:distinct"]
    assert reading.absolute == ["abs:mean", "abs:mix", "abs:distinct", "retr:cosine", "retr:margin", "retr:share"]
    assert np.array_equal(plain.coef_, reading.coef_)  # the choice is the same
    assert "retrieval" not in judge_fit_document(plain) and judge_fit_document(reading)["retrieval"] is True
    assert judge_fit_from_document(json.loads(json.dumps(judge_fit_document(reading)))).retrieval
    assert (
        JudgeVoter.of_fits([reading], ["A"]).reads_retrieval and not JudgeVoter.of_fits([plain], ["A"]).reads_retrieval
    )
    old = load_voter(ROOT / "docs" / "weights" / "nq-offline-judge-600.json", kind="judge")  # a file from before it
    assert not old.reads_retrieval and all(not any(a.startswith("retr:") for a in f.absolute) for f in old.fits_)
    question = "when was the eiffel tower built"
    outputs = {
        "A": MemberOutput("1889", [{"id": "1", "text": "The Eiffel Tower was built in 1889.", "score": 3.0},
                                   {"id": "2", "text": "Paris is the capital of France.", "score": 1.0}]),
        "PK": MemberOutput("1887", [{"id": "pk-0", "text": "The Eiffel tower built 1887 when", "generated": True}]),
    }  # fmt: skip
    (found,) = relevance_of([question], [outputs])
    (direct,) = Relevance.of([question], [[[p["text"] for p in outputs["A"].passages]]])
    assert found == direct.over([p["text"] for p in outputs["A"].passages])  # PK's document left out
    assert found[2] == 1.0 and found[0] > 0.5 and found[1] > 0  # eiffel, tower, built: all in #1


def test_the_null_candidates_family_by_hand():
    """null:mix is the mixture over the members' prompts of the likeliest phrasing of declining; null:margin each
    candidate's abs:mix minus it; NaN where the null candidate was not scored, and read only by a fit made to."""
    null = {"texts": ["Unknown", "I don't know"],
            "scores": {"A": [_score(-2.0), _score(-0.5)], "B": [_score(-3.0), _score(-4.0)]}}  # fmt: skip
    features = judge_features(CANDIDATES, ["A", "B", "C"], EVIDENCE, null)
    row = dict(zip(features.names, features.matrix.T, strict=True))
    declining = math.log(math.exp(-0.5) + math.exp(-3.0))  # A's best is -0.5, B's -3.0; C failed: no prompt
    assert row["null:mix"].tolist() == pytest.approx([declining, declining])
    assert row["null:margin"].tolist() == pytest.approx((row["abs:mix"] - declining).tolist())
    assert row["null:margin"][0] == pytest.approx(math.log(math.exp(-1) + math.exp(-2)) - declining)
    unscored = judge_features(CANDIDATES, ["A", "B", "C"], EVIDENCE)
    assert np.isnan(unscored.matrix[:, unscored.names.index("null:mix")]).all()
    reading = JudgeSelector(("votes", "scores"), 1, null=True)
    assert reading.absolute == ["abs:mean", "abs:mix", "abs:distinct", "null:mix", "null:margin"]
    assert JudgeSelector(("votes", "evidence"), 1, null=True).absolute == ["abs:distinct"]  # no scores, no null
    rng = np.random.default_rng(6)
    train = [_question(bool(i % 2), rng) for i in range(40)]
    reading.fit([f for f, _ in train], [r for _, r in train])
    document = json.loads(json.dumps(judge_fit_document(reading)))
    assert document["null"] is True and judge_fit_from_document(document).null
    assert JudgeVoter.of_fits([reading], ["A"]).reads_null


def test_evidence_features_of_a_sentence_and_a_span_inside_it():
    evidence = Evidence(
        "when did the order come into effect",
        {"A": "On 1 October 2006", "B": "It came into effect on 1 October 2006"},
        {"A": ["The order came into effect on 1 October 2006 in England."], "B": []},
    )
    spans = [
        {"text": t, "members": m, "rule": "members" if m else "entities", "scores": {}}
        for t, m in (
            ("On 1 October 2006", ["A"]),
            ("It came into effect on 1 October 2006", ["B"]),
            ("1 October 2006", []),
            ("England", []),
        )
    ]
    features = judge_features(spans, ["A", "B"], evidence)
    row = dict(zip(features.names, features.matrix.T, strict=True))
    assert features.scored == frozenset()  # no scores: the likelihood features are zeros, and said to be missing
    # inside B's sentence (A wrote it as it is); the bare date inside both answers, equal to neither
    assert row["inside:members"].tolist() == [0.5, 0, 1, 0]
    assert row["support:passages"].tolist() == [1, 0, 1, 1]
    assert row["in_question"].tolist() == pytest.approx([0, 2 / 8, 0, 0])  # into, effect of its 8 words
    assert row["type:match"].tolist() == [1, 1, 1, 0] and row["type:clash"].tolist() == [0, 0, 0, 1]
    assert not row["lp:A"].any() and not row["mix:passages"].any()


def test_question_types_and_answer_shapes():
    assert question_type("How many moons does Mars have") == "number"
    assert question_type("when was the eiffel tower built") == "date"
    assert question_type("what year did the war end") == "date"
    assert question_type("who wrote hamlet") == "name" and question_type("where is lyon") == "name"
    assert question_type("what is the capital of france") is None
    assert answer_shapes("May 18, 2018") == {"date", "number"}
    assert answer_shapes("the 1960s") == {"date", "number"}
    assert answer_shapes("two") == {"number"}
    assert answer_shapes("Gerald Ford") == {"name"} and answer_shapes("Bank of England") == {"name"}
    assert answer_shapes("capillary action") == set()


def test_a_record_without_candidates_has_no_rows():
    features = judge_features([], ["A"], Evidence("q", {"A": ""}, {"A": []}))
    assert features.matrix.shape == (0, len(features.names)) and np.isfinite(features.matrix).all()


def _question(right_first: bool, rng, scored: bool = True) -> tuple[JudgeFeatures, np.ndarray]:
    """Two candidates; the right one is the likelier under A's prompt, by a margin drawn at random."""
    gap = float(rng.uniform(0.5, 3.0))
    totals = [-1.0, -1.0 - gap] if right_first else [-1.0 - gap, -1.0]
    candidates = [
        {"text": "x", "members": ["A"], "rule": "members", "scores": {"A": _score(totals[0])} if scored else {}},
        {"text": "y", "members": [], "rule": "entities", "scores": {"A": _score(totals[1])} if scored else {}},
    ]
    evidence = Evidence("what", {"A": "x"}, {"A": ["x y"]})
    return judge_features(candidates, ["A"], evidence), np.array([right_first, not right_first])


def test_the_selector_learns_which_likelihood_tells_and_serialises():
    rng = np.random.default_rng(0)
    train = [_question(bool(i % 2), rng) for i in range(40)]
    selector = JudgeSelector(families=("scores",), spans=1).fit([f for f, _ in train], [r for _, r in train])
    assert selector.coef_[selector.names_.index("lp:A")] > 0
    test = [_question(bool(i % 3), rng) for i in range(12)]
    assert [selector.choose(f).index for f, _ in test] == [int(np.argmax(r)) for _, r in test]
    copy = judge_fit_from_document(json.loads(json.dumps(judge_fit_document(selector))))
    assert [copy.choose(f).index for f, _ in test] == [selector.choose(f).index for f, _ in test]
    members_only = JudgeSelector(families=("scores",), spans=0).fit([f for f, _ in train], [r for _, r in train])
    assert all(members_only.decision(f)[1] == -np.inf for f, _ in test)  # the span never competes
    assert all(members_only.choose(f).index == 0 for f, _ in test)
    nobody = judge_features([CANDIDATES[1]], ["A"], Evidence("q", {"A": ""}, {"A": ["Lyon"]}))  # a span alone
    assert members_only.choose(nobody) is None and selector.choose(nobody).index == 0
    assert selector.choose(test[0][0]).probability is None  # not calibrated yet
    assert selector.choose(judge_features([], ["A"], Evidence("q", {"A": ""}, {"A": []}))) is None
    with pytest.raises(InputError, match="not fitted"):
        JudgeSelector().decision(test[0][0])
    with pytest.raises(InputError, match="unknown feature family nope"):
        JudgeSelector(families=("votes", "nope"))


def test_calibrated_probability_ranks_choices_by_their_evidence():
    rng = np.random.default_rng(1)
    train = [_question(bool(i % 2), rng) for i in range(60)]
    selector = JudgeSelector(families=("votes", "scores"), spans=1).fit([f for f, _ in train], [r for _, r in train])
    choices = [selector.choose(f) for f, _ in train]
    right = [bool(r[c.index]) for c, (_, r) in zip(choices, train, strict=True)]
    selector.calibrate(choices, right)
    probability = selector.choose(train[0][0]).probability
    assert probability is not None and 0 < probability < 1
    copy = judge_fit_from_document(json.loads(json.dumps(judge_fit_document(selector))))
    assert copy.choose(train[0][0]).probability == pytest.approx(probability, abs=1e-12)


def test_a_voter_answers_with_the_fit_its_scores_cover_and_refuses_otherwise():
    rng = np.random.default_rng(2)
    train = [_question(bool(i % 2), rng) for i in range(40)]
    scored = JudgeSelector(("votes", "scores"), 1).fit([f for f, _ in train], [r for _, r in train])
    text = JudgeSelector(("votes", "evidence"), 1).fit([f for f, _ in train], [r for _, r in train])
    voter = JudgeVoter.of_fits([scored, text], ["A"])
    plain, _ = _question(True, rng, scored=False)
    assert voter.choose(train[0][0])[1] is scored
    assert voter.choose(plain)[1] is text  # no scores: the text fit, never the scored fit reading zeros
    with pytest.raises(InputError, match="reads the reader's scores"):
        scored.choose(plain)
    alone = voter_from_document(json.loads(json.dumps(document_of(JudgeVoter.of_fits([scored], ["A"])))), "here")
    with pytest.raises(InputError, match=r"no fit of this judge voter .* nothing: votes\+scores, 1 span needs scores"):
        alone.choose(plain)
    with pytest.raises(InputError, match="cannot fit"):
        JudgeSelector(("scores",), 1).fit([plain], [np.array([True, False])])


def test_training_chooses_a_setting_by_cross_validation_and_calibrates_it():
    from eor.learning.judge_training import JudgedQuestion, settings_grid, train_fit, train_judge_voter

    rng = np.random.default_rng(3)
    # The span is right on two questions in three, and only its likelihood tells: a fit that lets spans
    # compete and reads the scores wins; the text fit cannot tell.
    questions = [JudgedQuestion(str(i), *_question(i % 3 == 0, rng)) for i in range(90)]
    assert [s.spans for s in settings_grid("text")] == [0, 5, 10, 0, 5, 10]
    fit, report = train_fit(questions, "scores", k=3, seed=0)
    assert report.chosen == fit.label and fit.spans > 0 and fit.needs == {"scores"}
    assert report.table[fit.label] == max(report.table.values()) > 0.9
    assert len(fit.thresholds_) > 0 and fit.calibration_ is not None
    voter, reports = train_judge_voter(questions, ["A"], k=3, seed=0)
    assert [r.level for r in reports] == ["scores", "text"]  # no passages scored: that level is left out
    assert voter.fits_[0].needs == {"scores"} and voter.fits_[1].needs == frozenset()
    # records scored in part: the scored fit learns from the scored questions, the text fit from them all
    unscored = [JudgedQuestion(f"u{i}", *_question(i % 3 == 0, rng, scored=False)) for i in range(40)]
    mixed, reports = train_judge_voter(questions + unscored, ["A"], k=3, seed=0)
    assert [len(r.right) for r in reports] == [90, 130]
    few, reports = train_judge_voter(questions[:30] + unscored, ["A"], k=3, seed=0)
    assert [r.level for r in reports] == ["text"]  # 30 scored questions are too few for a fit of their own


@pytest.fixture(scope="module")
def scored_records(tmp_path_factory) -> tuple[Path, Path]:
    """The first 150 shipped training records the reader scored, and the next 40 (as held-out records)."""
    from eor.runs.records import read_records

    folder = tmp_path_factory.mktemp("scored")
    records = [r for r in read_records(ROOT / "docs/records/nq-train.jsonl.gz") if r.judge is not None][:190]
    paths = folder / "train.jsonl", folder / "held.jsonl"
    for path, part in zip(paths, (records[:150], records[150:]), strict=True):
        path.write_text("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in part))
    return paths


def test_eor_train_judge_writes_a_voter_with_a_fit_per_level(scored_records, tmp_path, capsys):
    from eor.cli import main

    train, held = scored_records
    out = tmp_path / "judge.json"
    pool = str(ROOT / "configs/nq-offline.yaml")  # the pool's config: its members, though it has no judge section
    command = ["train", str(train), "--voter", "judge", "--out", str(out), "--dev", str(held), "--inner-folds", "3"]
    command += ["--config", pool]
    assert main(command) == 0
    report = capsys.readouterr().out
    voter = load_voter(out, kind="judge")
    assert [sorted(fit.needs) for fit in voter.fits_] == [["passages", "scores"], ["scores"], []]
    assert voter.members == ["ReFree", "PK", "BM25@1", "BM25@3", "Wiki@1", "Wiki@3", "BM25@2&Wiki@2"]
    for level in ("scores+passages", "scores", "text"):
        assert level in report and voter.metadata_["training"]["levels"][level]["chosen"] in report
    assert voter.metadata_["judge"]["rule"] == "entities" and voter.metadata_["judge"]["k"] == 10
    assert "dev: EM" in report and voter.metadata_["dev"]["questions"] == 40
    assert all(fit.calibration_ is not None and fit.thresholds_ for fit in voter.fits_)
    with pytest.raises(ConfigError, match="holds a judge voter.*judge: section"):
        choose_voter(out, voter.members)
    assert main(["train", str(train), "--voter", "judge", "--out", str(out), "--max-loss", "0.5"]) != 0
    assert "--voter judge does not use --max-loss" in capsys.readouterr().err
    # eor bench: the judge's report, paired with the shipped cascade on the same held-out records
    cascade = ROOT / "docs/weights/nq-offline-cascade.json"
    report = tmp_path / "report"
    assert main(["bench", str(held), "--weights", str(out), "--against", str(cascade), "--out", str(report)]) == 0
    summary = capsys.readouterr().out
    bench = json.loads((report / "report.json").read_text())
    assert bench["questions"] == 40 and bench["fits_used"] == {voter.fits_[0].label: 40}
    assert bench["judge"]["em"] == pytest.approx(voter.metadata_["dev"]["em"])  # the same answers as --dev gave
    assert bench["oracle"]["candidates"] >= bench["judge"]["em"] and "vs_against" in bench
    assert bench["top_r_train"]["member"] == voter.metadata_["top_r_train"]["member"]
    assert "judge − it" in summary and (report / "report.md").is_file()
    assert main(["bench", str(held), "--weights", str(out), "--frontier", "--out", str(report)]) != 0
    assert "not --frontier" in capsys.readouterr().err


def test_eor_train_judge_reads_several_runs_as_one(tmp_path, capsys):
    """Runs scored with and without each passage alone are one judge's: each level's fit trains on the questions
    holding its scores; a question in two runs, or runs of two judges, are refused."""
    from eor.cli import main
    from eor.runs.records import read_records

    scored = [r for r in read_records(ROOT / "docs/records/nq-train.jsonl.gz") if r.judge is not None][:100]
    copies = [r for r in read_records(ROOT / "docs/records/nq-train-ablated.jsonl.gz") if r.judge is not None][:60]
    assert {r.judge["identity"]["passages"] for r in scored} == {True}
    assert {r.judge["identity"]["passages"] for r in copies} == {False}
    first, second, again, other = (tmp_path / f"{name}.jsonl" for name in ("first", "second", "again", "other"))
    for path, part in ((first, scored), (second, copies), (again, scored[:1])):
        path.write_text("".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in part))
    relabelled = [r.to_dict() for r in copies]
    for record in relabelled:
        record["judge"]["identity"]["k"] = 5
    other.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in relabelled))
    out = tmp_path / "judge.json"
    command = ["train", str(first), str(second), "--voter", "judge", "--out", str(out), "--inner-folds", "3"]
    assert main(command) == 0
    report = capsys.readouterr().out
    voter = load_voter(out, kind="judge")
    levels = voter.metadata_["training"]["levels"]
    assert [sorted(fit.needs) for fit in voter.fits_] == [["passages", "scores"], ["scores"], []]
    assert voter.metadata_["training"]["questions"] == 160 and "160 training questions" in report
    assert voter.metadata_["records"] == [str(first), str(second)]
    assert voter.metadata_["judge"]["passages"] is True  # the richer level some of them hold
    assert set(levels) == {"scores+passages", "scores", "text"}
    for runs, message in (((first, again), "repeat across"), ((first, other), "different judges")):
        assert main(["train", *map(str, runs), "--voter", "judge", "--out", str(out)]) != 0
        assert message in capsys.readouterr().err


def test_scoring_seconds_by_hand():
    from eor.runs.costs import scoring_seconds

    candidates = [{"scores": {"A": {"tokens": 2}, "#p": {"tokens": 3}}}, {"scores": {"A": {"tokens": 1}}}]
    prompts = {"A": "x y z", "#p": "x y w v"}  # scored in text order: #p first
    rates = {"prompt": 3.0, "generated": 1.0}
    # #p: its 4 tokens and 3 behind it; A, whose state the reader holds: the 3 tokens behind it alone
    assert scoring_seconds(candidates, prompts, ["A"], str.split, rates, 2) == pytest.approx(10 / 3)
    # A evaluated too: it keeps the 2-token chunk it shares with #p and evaluates its last token
    assert scoring_seconds(candidates, prompts, [], str.split, rates, 2) == pytest.approx(11 / 3)
