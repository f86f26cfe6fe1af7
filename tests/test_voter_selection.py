"""Beyond the paper's voter: candidate features, the answer selector, the smooth objective, cross-validation
and `eor train --voter/--cv`, all on hand-worked or constructed data."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchmarks import nested_cv
from eor.cli import main
from eor.core.errors import ConfigError, InputError
from eor.learning.crossval import (
    VoteSettings,
    choose_candidate,
    compare_with_top,
    out_of_fold,
    vote_arrays,
)
from eor.runs.records import read_records
from eor.runs.run_data import load_run
from voters import AnswerSelector, VoteBatch, Voter, load_voter, similarity_tensor
from voters.codecs import CODECS, save_voter
from voters.features import BASE_FEATURES, candidate_features, is_refusal
from voters.folds import cross_fit, fold_split, folds, in_row_order
from voters.nelder_mead import VoteData
from voters.similarity import parse_metric_spec
from voters.smooth import SmoothObjective, SmoothSettings, expected_correctness
from voters.weights_file import read_document

NAMES = ["Agree1", "Agree2", "Reader"]


def test_candidate_features_by_hand():
    answers = [["Paris", "paris", "London"]]
    passages = [[["Paris is the capital."], [], ["Rome and Paris.", "More"]]]
    tensor = similarity_tensor(answers, ["em"])
    features = candidate_features(tensor, answers, passages, ["what is the capital of france"], ["em"], NAMES)
    per_member = [f"{kind}:{name}" for kind in ("member", "vote", "found") for name in NAMES]
    assert features.names == ["sim:em", *BASE_FEATURES, *per_member]
    rows = {name: features.matrix[0, :, i].tolist() for i, name in enumerate(features.names)}
    assert rows["sim:em"] == [0.5, 0.5, 0.0]  # mean over the two others of em
    assert rows["agreement"] == [0.5, 0.5, 0.0]
    assert rows["grounded"] == [1.0, 0.0, 0.0]  # member 1 has no passages; London is nowhere
    assert rows["first_passage"] == [1.0, 0.0, 0.0]
    assert rows["support"] == [2 / 3, 2 / 3, 0.0]  # "paris" occurs in members 0 and 2's passages
    assert rows["no_passages"] == [0.0, 1.0, 0.0]
    assert rows["log_length"] == [math.log(2)] * 3
    assert rows["long"] == rows["refusal"] == rows["in_question"] == [0.0, 0.0, 0.0]
    assert rows["member:Reader"] == [0.0, 0.0, 1.0]
    assert rows["vote:Agree1"] == rows["vote:Agree2"] == [1.0, 1.0, 0.0] and rows["vote:Reader"] == [0.0, 0.0, 1.0]
    assert rows["found:Agree1"] == rows["found:Reader"] == [1.0, 1.0, 0.0] and rows["found:Agree2"] == [0.0] * 3
    # a subset of members keeps each one's own one-hot column
    subset = candidate_features(
        tensor[:, :2, :2], [["Paris", "London"]], [[["x"], ["y"]]], ["q"], ["em"], NAMES, [2, 0]
    )
    column = {name: subset.matrix[0, :, i].tolist() for i, name in enumerate(subset.names)}
    assert column["member:Reader"] == [1.0, 0.0] and column["member:Agree1"] == [0.0, 1.0]
    assert column["found:Reader"] == [0.0, 0.0] and column["vote:Agree2"] == [0.0, 0.0]


def test_refusals_and_question_copies():
    assert is_refusal("") and is_refusal("I'm sorry, but I can't assist with that.") and is_refusal("Unknown")
    assert not is_refusal("Sorrento") and not is_refusal("George Washington")
    tensor = similarity_tensor([["the capital city", "x y z a b c d"]], ["em"])
    features = candidate_features(
        tensor, [["the capital city", "x y z a b c d"]], [[[], []]], ["capital city?"], ["em"], ["A", "B"]
    )
    column = dict(zip(features.names, features.matrix[0].T, strict=False))
    assert column["in_question"].tolist() == [1.0, 0.0] and column["long"].tolist() == [0.0, 1.0]


def grounded_run(n_questions: int, seed: int):
    """Two members that often agree on a wrong answer, and a reader whose answer is right exactly when it
    occurs in its own passage: the agreement voter is misled, the grounding feature is not."""
    rng = np.random.default_rng(seed)
    answers, golds, passages, questions = [], [], [], []
    for q in range(n_questions):
        gold = f"gold{q}"
        reader_right = rng.uniform() < 0.7
        reader = gold if reader_right else f"wrong{q}"
        passage = f"the answer is {gold}" if reader_right else "nothing useful here"
        wrong = f"decoy{q}"
        agree = [wrong, wrong] if rng.uniform() < 0.8 else [gold, wrong]
        answers.append([*agree, reader])
        golds.append([gold])
        passages.append([["decoy text"], ["decoy text"], [passage]])
        questions.append(f"question {q}?")
    return answers, golds, passages, questions


def test_selector_learns_grounding_and_round_trips(tmp_path):
    answers, golds, passages, questions = grounded_run(120, seed=0)
    selector = AnswerSelector(metrics=("em", "f1"), members=NAMES).fit(VoteBatch(answers, passages, questions), golds)
    test_answers, test_golds, test_passages, test_questions = grounded_run(200, seed=1)
    picks = selector.predict(VoteBatch(test_answers, test_passages, test_questions))
    correct = [test_answers[q][m] == test_golds[q][0] for q, m in enumerate(picks)]
    reader_alone = [row[2] == gold[0] for row, gold in zip(test_answers, test_golds, strict=True)]
    assert np.mean(correct) >= np.mean(reader_alone) > 0.6
    coefficients = selector.describe()["coefficients"]
    assert coefficients["grounded"] > 0 and coefficients["grounded"] > coefficients["agreement"]
    # decision scores are the logistic regression's log-odds on standardised features
    features = selector.features(test_answers[:3], test_passages[:3], test_questions[:3]).matrix
    by_hand = ((features - selector.mean_) / selector.scale_) @ selector.coef_ + selector.intercept_
    np.testing.assert_allclose(
        selector.decision_scores(test_answers[:3], test_passages[:3], test_questions[:3]), by_hand
    )
    np.testing.assert_allclose(
        selector.decision_function(VoteBatch(test_answers, test_passages, test_questions))[:3], by_hand
    )
    # the weights file holds plain numbers; loading into a reordered pool permutes the member features
    path = save_voter(selector, tmp_path / "selector.json", dataset="constructed")
    document = json.loads(path.read_text())
    assert document["voter"] == "selector" and document["format"] == "eor-voter-weights"
    loaded = load_voter(path, members=["Reader", "Agree1", "Agree2"])
    reordered = [[row[2], row[0], row[1]] for row in test_answers]
    reordered_passages = [[row[2], row[0], row[1]] for row in test_passages]
    np.testing.assert_allclose(
        loaded.decision_scores(reordered, reordered_passages, test_questions),
        selector.decision_scores(test_answers, test_passages, test_questions)[:, [2, 0, 1]],
    )
    assert loaded.metadata_["dataset"] == "constructed"
    with pytest.raises(ConfigError, match="load it with voters.load_voter"):
        CODECS["paper"].read(read_document(path), str(path))
    with pytest.raises(InputError, match="passages and the question texts"):
        selector.decision_scores(test_answers)


def test_selector_with_one_class_only_and_bad_files(tmp_path):
    batch = VoteBatch([["a", "b"], ["c", "d"]], [[[], []], [[], []]], ["q1", "q2"])
    selector = AnswerSelector(metrics=("em",)).fit(batch, [["z"], ["z"]])
    assert not selector.coef_.any() and selector.predict(batch).tolist() == [0, 0]
    path = save_voter(selector, tmp_path / "s.json")
    document = json.loads(path.read_text())
    document["coefficients"] = document["coefficients"][:-1]
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError, match="inconsistent"):
        load_voter(path)
    document["voter"] = "oracle"
    path.write_text(json.dumps(document))
    with pytest.raises(ConfigError, match="unknown voter 'oracle'"):
        load_voter(path)
    with pytest.raises(ConfigError, match="'C' parameter of AnswerSelector must be a float in the range"):
        AnswerSelector(C=0).fit(batch, [["a"], ["c"]])


def test_expected_correctness_and_its_gradient_by_hand():
    scores = np.array([[0.0, math.log(3) * 0.1]])  # softmax at τ = 0.1: [1/4, 3/4]
    value, gradient = expected_correctness(scores, np.array([[1.0, 0.0]]), 0.1)
    assert value == pytest.approx(0.25)
    # d/ds_m Σ p c = p_m (c_m − E) / τ
    np.testing.assert_allclose(gradient, [[0.25 * 0.75 / 0.1, 0.75 * (0 - 0.25) / 0.1]])


@pytest.mark.parametrize("grounding", [False, True])
def test_smooth_objective_gradient_matches_finite_differences(grounding):
    from scipy.optimize import check_grad

    rng = np.random.default_rng(3)
    tensor = rng.uniform(size=(20, 4, 4, 3))
    data = VoteData(tensor, (rng.uniform(size=(20, 4)) > 0.5).astype(float), rng.integers(0, 2, (20, 4)).astype(float))
    size = 3 + 4 + int(grounding)
    objective = SmoothObjective(data, "mean", 0.5, grounding, SmoothSettings(0.2, 0.05), np.full(size, 0.3))
    for _ in range(3):
        x = rng.uniform(0.05, 0.6, size)
        error = check_grad(lambda v: objective(v)[0], lambda v: objective(v)[1], x)
        assert error < 1e-5 * max(1.0, np.linalg.norm(objective(x)[1]))


def test_smooth_fit_polishes_on_the_true_objective():
    answers, golds, passages, _ = grounded_run(80, seed=2)
    batch = VoteBatch(answers, passages, golds=golds)
    step = Voter(metrics=("em", "f1"), grounding=True, members=NAMES).fit(batch)
    smooth = Voter(metrics=("em", "f1"), grounding=True, members=NAMES, objective="smooth").fit(batch)
    again = Voter(metrics=("em", "f1"), grounding=True, members=NAMES, objective="smooth").fit(batch)
    assert smooth.best_start_ == "mean/smooth" and smooth.fit_history_[0]["surrogate"] > 0
    np.testing.assert_array_equal(smooth.retriever_weights_, again.retriever_weights_)  # deterministic
    assert np.all((smooth.retriever_weights_ >= 0) & (smooth.retriever_weights_ <= 0.6))
    assert smooth.train_score_ == pytest.approx(smooth.score(batch))
    assert smooth.train_score_ >= 0.7 and step.train_score_ >= 0.7
    with pytest.raises(ConfigError, match="'objective' parameter of Voter must be a str among"):
        Voter(objective="hinge").fit(batch)


def write_run(folder: Path, answers, golds, passages, questions, names=NAMES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for q, row in enumerate(answers):
        members = {
            name: {
                "answer": row[m],
                "passages": [
                    {"id": f"{name}{q}{i}", "title": "", "text": t, "score": 1.0} for i, t in enumerate(passages[q][m])
                ],
                "prompt": "",
                "seconds": 0.0,
            }
            for m, name in enumerate(names)
        }
        lines.append(json.dumps({"id": f"q{q}", "question": questions[q], "answers": golds[q], "members": members}))
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_folds_partition_the_questions():
    parts = folds(10, 3, seed=0)
    assert sorted(np.concatenate(parts).tolist()) == list(range(10)) and [len(p) for p in parts] == [4, 3, 3]
    assert [p.tolist() for p in parts] == [p.tolist() for p in folds(10, 3, seed=0)]
    with pytest.raises(InputError, match="at least 2 folds"):
        folds(10, 1, seed=0)
    with pytest.raises(InputError, match="cannot make 5 folds of 3 questions"):
        folds(3, 5, seed=0)
    # scikit-learn's splitter over the same folds: the held-out positions of each fold, the rest to train on
    splits = list(fold_split(10, 3, seed=0).split())
    assert [held.tolist() for _, held in splits] == [p.tolist() for p in parts]
    assert [train.tolist() for train, _ in splits] == [sorted(set(range(10)) - set(p.tolist())) for p in parts]


def test_cross_fit_is_scikit_learns_cross_val_predict_over_the_same_folds():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import cross_val_predict

    rng = np.random.default_rng(3)
    features = rng.normal(size=(40, 3))
    labels = (features[:, 0] + 0.5 * rng.normal(size=40) > 0).astype(int)
    parts = folds(40, 4, seed=1)
    pieces = cross_fit(
        parts,
        np.arange(40),
        lambda train: LogisticRegression().fit(features[train], labels[train]),
        lambda model, held: model.predict_proba(features[held])[:, 1],
    )
    ours = np.concatenate(pieces)[in_row_order(parts)]
    theirs = cross_val_predict(LogisticRegression(), features, labels, cv=fold_split(40, 4, 1), method="predict_proba")
    assert np.allclose(ours, theirs[:, 1], rtol=0, atol=1e-12)


def test_cross_fit_learns_only_from_the_rows_taught_and_applies_each_fold_before_the_next_fit():
    parts = [np.array([0, 3]), np.array([1, 4]), np.array([2, 5])]
    seen: list[tuple[str, list[int]]] = []

    def fit(train: np.ndarray) -> list[int]:
        seen.append(("fit", train.tolist()))
        return train.tolist()

    def apply(train: list[int], held: np.ndarray) -> int:
        seen.append(("apply", held.tolist()))
        return sum(train)

    told: list[int] = []
    assert cross_fit(parts, np.array([0, 1, 2, 4]), fit, apply, told.append) == [1 + 2 + 4, 0 + 2, 0 + 1 + 4]
    assert seen == [
        ("fit", [1, 2, 4]), ("apply", [0, 3]), ("fit", [0, 2]), ("apply", [1, 4]), ("fit", [0, 1, 4]), ("apply", [2, 5])
    ]  # fmt: skip
    assert told == [1, 2, 3]


def test_cross_validation_against_top_r_by_hand(tmp_path):
    # Member B is right on questions 0-5 of 8, A on 0-1 only: Top R is B in every training fold.
    answers = [["a", "g"] if q < 2 else (["a", "g"] if q < 6 else ["a", "b"]) for q in range(8)]
    golds = [["g"] if q < 6 else ["x"] for q in range(8)]
    answers[0] = ["g", "g"]
    answers[1] = ["g", "g"]
    run = load_run(write_run(tmp_path / "r", answers, golds, [[[], []]] * 8, ["q"] * 8, names=["A", "B"]))
    settings = VoteSettings(metrics=("em",))
    arrays = vote_arrays(run, settings)
    result = out_of_fold(arrays, ["top", "selector"], settings, 4, seed=0)
    assert result.scores["top"].tolist() == [1.0] * 6 + [0.0] * 2  # B everywhere
    assert result.picks["top"].tolist() == [1] * 8  # B's answer, by its index among the members
    assert all(result.scores["selector"] == arrays.correctness[np.arange(8), result.picks["selector"]])
    table = compare_with_top(result)
    assert table["top"]["minus_top"] == 0.0 and table["top"]["p_value"] == 1.0
    assert table["selector"]["mean"] == pytest.approx(result.scores["selector"].mean())
    # B is right whenever anyone is (the oracle is 0.75): a candidate can at best tie Top R, and ties go to it
    name, means = choose_candidate(arrays, ["selector", "paper", "top"], settings, 4, seed=0)
    assert means["top"] == 0.75 and max(means.values()) == 0.75 and name == "top"


def test_the_questions_a_voter_wins_and_loses_against_top_r_by_hand():
    """benchmarks/nested_cv.py's `against_top`: the questions where the voter is right and Top R wrong (and
    the other way), and which members gave the answers the voter picked there, SQuAD-normalised."""
    from eor.learning.crossval import CvResult
    from eor.runs.run_data import RunData

    answers = [["Paris", "paris", "Rome"], ["Lyon", "Paris", "Nice"], ["The Alps", "Jura", "alps."], ["a", "b", "c"]]
    data = RunData(["A", "B", "C"], ["q0", "q1", "q2", "q3"], answers, [["x"]] * 4, [], [], ["?"] * 4)
    scores = {"top": np.array([1.0, 1.0, 0.0, 0.0]), "vote": np.array([1.0, 0.0, 1.0, 0.0])}
    picks = {"top": np.array([1, 1, 1, 1]), "vote": np.array([0, 2, 2, 0])}
    found = nested_cv.against_top(data, CvResult(2, 0, scores, picks=picks), "vote")
    assert found["wins"] == ["q2"] and found["losses"] == ["q1"]
    assert found["wins_given_by"] == {"A": 1, "C": 1, "B": 0}  # "The Alps" and "alps." normalise alike
    assert found["losses_given_by"] == {"C": 1, "A": 0, "B": 0}
    assert found["picked"] == ["A", "C", "C", "A"] and found["correct"].tolist() == [1.0, 0.0, 1.0, 0.0]
    # the least a member-by-member voter spends to be right where "vote" is: q0 the cheaper of A and B right
    # there (1), q2 C alone right (4), q1 and q3 the cheapest member (0.5, 2): (1 + 0.5 + 4 + 2) / 4
    costs = np.array([[1.0, 3.0, 2.0], [0.5, 1.0, 3.0], [1.0, 1.0, 4.0], [2.0, 5.0, 6.0]])
    correct = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    assert nested_cv.least_cost(costs, correct, scores["vote"]) == pytest.approx(7.5 / 4)


def test_eor_train_auto_cv_and_named_voters(tmp_path, capsys):
    answers, golds, passages, questions = grounded_run(90, seed=4)
    train_dir = write_run(tmp_path / "train", answers, golds, passages, questions)
    dev = grounded_run(60, seed=5)
    dev_dir = write_run(tmp_path / "dev", *dev)
    compressed = tmp_path / "dev.jsonl.gz"
    with gzip.open(compressed, "wt", encoding="utf-8") as handle:
        handle.write((dev_dir / "records.jsonl").read_text())
    assert read_records(compressed) == read_records(dev_dir)

    weights = tmp_path / "auto.json"
    args = ["train", str(train_dir), "--out", str(weights), "--dev", str(compressed), "--metrics", "em,f1"]
    assert main([*args, "--cv", "3", "--inner-folds", "3"]) == 0
    output = capsys.readouterr().out
    assert "3-fold cross-validation over 90 training questions" in output
    for name in ("top", "paper", "grounding", "smooth", "smooth-grounding", "selector", "auto"):
        assert f"\n  {name} " in output
    document = json.loads(weights.read_text())
    chosen = document["meta"]["chosen_voter"]
    assert f"auto chose {chosen}" in output
    selection = document["meta"]["selection"]["means"]
    assert selection[chosen] >= selection["top"]  # never below Top R by the inner CV
    assert set(document["meta"]["cv"]["voters"]) >= {"top", "auto"}
    assert document["meta"]["top_r_train"]["member"] == "Reader"
    # the dev report, worked out again from the saved voter and checked against scipy's binomial test
    from scipy.stats import binomtest

    from voters import correctness_matrix

    held = load_run(compressed)
    correct = correctness_matrix(held.answers, held.golds, "em")
    picks = load_voter(weights).predict(VoteBatch(held.answers, held.passages, held.texts))
    mine, reader = correct[np.arange(60), picks], correct[:, 2]
    report = document["meta"]["dev"]
    assert report["questions"] == 60 and report["em"] == pytest.approx(mine.mean())
    assert report["vs"]["top_r_train"]["difference"] == pytest.approx(mine.mean() - reader.mean())
    wins, losses = int(np.sum((mine == 1) & (reader == 0))), int(np.sum((mine == 0) & (reader == 1)))
    expected_p = binomtest(wins, wins + losses, 0.5).pvalue if wins + losses else 1.0
    assert report["vs"]["top_r_train"]["p_value"] == pytest.approx(expected_p)
    assert report["oracle"] == pytest.approx(correct.max(axis=1).mean())
    assert "voter − Top R (train):" in output and "voter − Top R (dev):" in output

    paper = tmp_path / "paper.json"
    assert main(["train", str(train_dir), "--out", str(paper), "--voter", "paper", "--metrics", "em,f1"]) == 0
    capsys.readouterr()
    fitted = Voter(metrics=("em", "f1"), members=NAMES).fit(VoteBatch(answers), golds)  # the paper's voter, as before
    assert json.loads(paper.read_text())["retriever_weights"] == pytest.approx(fitted.retriever_weights_.tolist())

    top = tmp_path / "top.json"
    assert main(["train", str(train_dir), "--out", str(top), "--voter", "top", "--metrics", "em"]) == 0
    capsys.readouterr()
    top_voter = load_voter(top)
    assert top_voter.active_members_ == [2] and top_voter.predict(VoteBatch(dev[0])).tolist() == [2] * 60

    selector = tmp_path / "selector.json"
    assert (
        main(["train", str(train_dir), "--out", str(selector), "--voter", "selector", "--metrics", "{em: {}, f1: {}}"])
        == 0
    )
    assert "on dev" not in capsys.readouterr().out
    assert json.loads(selector.read_text())["voter"] == "selector"
    report = tmp_path / "report"
    assert main(["bench", str(compressed), "--out", str(report), "--weights", str(selector), "--resamples", "50"]) == 0
    markdown = (report / "report.md").read_text()
    assert "## Learned answer selector" in markdown and "| grounded |" in markdown
    assert not (report / "weights.png").exists()

    assert main(["train", str(train_dir), "--out", str(tmp_path / "x.json"), "--voter", "oracle"]) == 1
    assert "unknown voter 'oracle'" in capsys.readouterr().err


def test_one_uniform_baseline_with_the_same_pooling_on_training_and_dev(tmp_path, capsys):
    # `eor train` scores one uniform voter (the settings' metrics and pooling) on the training records and on
    # dev. Over em and f1, max pooling chooses the first answer of each row below, right every time; mean
    # pooling would choose "paris france" and "new york" (their pooled similarity to the others is higher),
    # right on half the questions.
    rows = [["red fox", "red", "fox", "red fox jumps"], ["a b c", "a", "b", "c"],
            ["paris", "paris france", "france", "lyon"], ["new york city", "york", "new york", "boston"]]  # fmt: skip
    names = ["A", "B", "C", "D"]
    assert Voter.uniform(4, metrics=("em", "f1"), pooling="mean").predict(VoteBatch(rows)).tolist() == [0, 0, 1, 2]

    def run(folder: Path, copies: int) -> Path:
        answers = rows * copies
        golds = [[row[0]] for row in answers]
        passages = [[["nothing"]] * 4 for _ in answers]
        return write_run(folder, answers, golds, passages, [f"q{i}?" for i in range(len(answers))], names=names)

    weights = tmp_path / "top.json"
    args = ["train", str(run(tmp_path / "train", 20)), "--out", str(weights), "--voter", "top", "--metrics", "em,f1"]
    assert main([*args, "--pooling", "max", "--dev", str(run(tmp_path / "dev", 10))]) == 0
    output = capsys.readouterr().out
    assert json.loads(weights.read_text())["meta"]["uniform"] == {"train": 1.0, "dev": 1.0}
    assert "em on dev (40 questions, %): voter 100.0, uniform 100.0," in output  # mean pooling: 50.0


def test_metric_spec_parsing():
    assert parse_metric_spec("em, f1,cosine") == (["em", "f1", "cosine"], {})
    assert parse_metric_spec("{em: {}, bertscore: {num_layers: 6}, nli: {model: /m, combine: max}}") == (
        ["em", "bertscore", "nli"],
        {"bertscore": {"num_layers": 6}, "nli": {"model": "/m", "combine": "max"}},
    )
    for bad in ("", "{em: 3}", "{]"):
        with pytest.raises(ConfigError):
            parse_metric_spec(bad)


def test_config_metric_params_reach_the_uniform_voter(tmp_path):
    from eor.core.config import load_config
    from eor.pipeline.ensemble import config_voter

    root = Path(__file__).resolve().parent.parent
    text = (
        (root / "configs" / "default.yaml")
        .read_text()
        .replace(
            "  metrics: [em, f1, cosine]", "  metrics: [em, bertscore]\n  metric_params: {bertscore: {num_layers: 3}}"
        )
    )
    shutil.copy(root / "eor" / "demo" / "corpus.jsonl", tmp_path / "corpus.jsonl")
    path = tmp_path / "c.yaml"
    path.write_text(text.replace("eor:demo/corpus.jsonl", "corpus.jsonl"))
    voter = config_voter(load_config(path))
    assert voter.metric_params == {"bertscore": {"model": "minilm-l6", "num_layers": 3}}
    path.write_text(text.replace("{bertscore: {num_layers: 3}}", "{nli: {model: x}}"))
    with pytest.raises(ConfigError, match="not in voter.metrics: nli"):
        config_voter(load_config(path))


def test_eors_voters_follow_the_voter_protocol(tmp_path):
    from voters.protocol import FittedVoter, check_voter_class

    answers, golds, passages, questions = grounded_run(40, seed=0)
    batch = VoteBatch(answers, passages, questions, golds=golds)
    selector = AnswerSelector(metrics=("em",), members=NAMES).fit(batch)
    paper = Voter(metrics=("em",), members=NAMES, restarts=1).fit(batch)
    for voter in (selector, paper, load_voter(save_voter(paper, tmp_path / "paper.json"))):
        check_voter_class(type(voter))
        assert isinstance(voter, FittedVoter), type(voter).__name__


def test_added_voters_are_checked_and_reordered(tmp_path):
    from eor.learning import crossval
    from voters import loading
    from voters.protocol import SimpleVoter

    class NoVoter(crossval.Candidate):
        name = "novoter"

    class Named(crossval.Candidate):
        name = "paper"
        voter_class = Voter

    for bad in (NoVoter, Named, Voter):
        with pytest.raises(ConfigError):
            crossval.register_candidate(bad)

    class Fixed(SimpleVoter):
        """Scores each member by a learned number (state keyed by member name)."""

        kind = "fixed"

        def decision_scores(self, answers, passages=None, questions=None, members=None):
            positions = range(self.n_members_) if members is None else members
            return np.asarray([[self.points_[self.members_[m]] for m in positions] for _ in answers], dtype=float)

        def state(self):
            return {"points": self.points_}

        def set_state(self, state):
            self.points_ = dict(state["points"])
            return self

    class FixedCandidate(crossval.Candidate):
        name = "fixed"
        voter_class = Fixed

    with crossval.CANDIDATES.scoped(), loading.VOTER_KINDS.scoped():
        crossval.register_candidate(FixedCandidate)
        assert crossval.candidate_names()[-1] == "fixed" and "fixed" in loading.voter_kinds()
        path = (
            Fixed(["A", "B", "C"])
            .set_state({"points": {"A": 1.0, "B": 3.0, "C": 2.0}})
            .save(tmp_path / "fixed.json", note="x")
        )
        loaded = load_voter(path, members=["C", "B", "A"])
        assert loaded.members_ == ["C", "B", "A"] and loaded.metadata_ == {"note": "x"}
        assert loaded.predict(VoteBatch([["c", "b", "a"]])).tolist() == [1]  # B, in the pool's order
        assert loaded.explain_row(["c", "a"], [[], []], "q", [0, 2]) == {
            "voter": "fixed",
            "members": [{"score": 2.0}, {"score": 1.0}],
        }
        with pytest.raises(ConfigError, match="missing"):
            load_voter(path, members=["A", "B"])
    with pytest.raises(ConfigError, match="unknown voter 'fixed'"):
        load_voter(path)


def test_nested_cv_cascade_at_several_tolerances_matches_one_fit_per_tolerance():
    """benchmarks/nested_cv.py's `cascade_at`: fitted once per outer fold at the first tolerance, it answers
    exactly as `out_of_fold`'s cascade fitted at that tolerance; at a looser one it runs no more members
    (the threshold `Cascade.at_loss` picks from the same held-out points is never higher)."""
    root = Path(__file__).parent.parent
    members = ["BM25@1", "Wiki@1", "BM25@3", "PK"]
    data = load_run(root / "docs/records/nq-train.jsonl.gz", members).subset(list(range(80)))
    settings = VoteSettings(
        metrics=("em",), confidence=False, cost_unit="tokens", rates={"prompt": 281.0, "generated": 60.0}
    )
    arrays = vote_arrays(data, settings)
    top = out_of_fold(arrays, ["top"], settings, 4, seed=1)
    found = nested_cv.cascade_at(arrays, settings, [0.5, 5.0], top)
    alone = out_of_fold(arrays, ["top", "cascade"], replace(settings, max_loss=0.005), 4, seed=1)
    assert found[0.5].picks["cascade"].tolist() == alone.picks["cascade"].tolist()
    assert np.allclose(found[0.5].costs["cascade"], alone.costs["cascade"])
    assert np.array_equal(found[0.5].scores["top"], alone.scores["top"])
    assert np.all(found[5.0].costs["cascade"] <= found[0.5].costs["cascade"] + 1e-9)
