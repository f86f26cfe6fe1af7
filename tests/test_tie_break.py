"""benchmarks/tie_break.py, the study behind docs/voter.md's "Ties between different answers": which members tie
(the vote's own tolerance), what each tie-break chooses on a hand-worked question, that every rule leaves the
untied questions alone, and the documented figures of the shipped training records."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks import tie_break
from eor.runs.run_data import RunData

ROOT = Path(__file__).resolve().parent.parent


def _run(answers: list[list[str]], confidence: list[list[float | None]] | None = None) -> RunData:
    q = len(answers)
    return RunData(
        names=[f"M{m}" for m in range(len(answers[0]))],
        ids=[str(i) for i in range(q)],
        answers=answers,
        golds=[["paris"]] * q,
        passages=[[[] for _ in row] for row in answers],
        joined=[["" for _ in row] for row in answers],
        texts=["q"] * q,
        confidence=[[None if c is None else {"mean_logprob": c} for c in row] for row in confidence]
        if confidence
        else [],
    )


def test_ties_within_the_votes_tolerance_in_pool_order() -> None:
    scores = np.array([[1.0, 1.0 + 1e-12, 0.5], [0.2, 0.9, 0.9], [0.3, 0.1, 0.0]])
    assert tie_break.tied_members(scores) == [[0, 1], [1, 2], [0]]


def test_each_rule_on_a_hand_worked_question() -> None:
    # question 0: M0 says "Lyon", M1 and M2 say "Paris"/"paris" (support 2), M3 says "Nice"; M0, M1 and M3 tie
    data = _run([["Lyon", "Paris", "paris", "Nice"]], confidence=[[-2.0, -1.5, -0.1, -0.2]])
    correct = np.array([[0.0, 1.0, 1.0, 0.0]])
    found = tie_break.rules(data, correct)
    train = np.array([0])
    weights = np.array([0.2, 0.1, 0.6, 0.5])
    tied = [0, 1, 3]
    assert found["first"](0, tied, train, weights) == 0
    assert found["accuracy"](0, tied, train, weights) == 1  # right on the training row
    assert found["weight"](0, tied, train, weights) == 3  # the highest ω^r among the tied
    assert found["weight"](0, tied, train, None) == 0  # a uniform voter: the pool's order
    assert found["confidence"](0, tied, train, weights) == 3  # −0.2 beats −1.5 and −2.0
    assert found["support"](0, tied, train, weights) == 1  # "Paris" is given twice


def test_untied_questions_keep_the_votes_choice() -> None:
    data = _run([["a", "b"], ["a", "a"], ["a", "b"]] * 5)
    correct = np.array([[0.0, 1.0], [1.0, 1.0], [1.0, 1.0]] * 5)
    scores = np.array([[0.5, 0.5], [0.7, 0.7], [0.9, 0.1]] * 5)

    def fold_voter(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, None]:
        return scores[test], None

    result = tie_break.study(data, fold_voter, correct)
    assert result["differing"] == [q for q in range(15) if q % 3 == 0]  # question 1's tie is one answer
    first, best = result["right"]["first"], result["right"]["accuracy"]
    assert first.tolist() == [0.0, 1.0, 1.0] * 5
    assert best.tolist() == [1.0, 1.0, 1.0] * 5  # M1 is right more often on every training fold


@pytest.mark.parametrize(
    ("metrics", "ties", "first", "accuracy"),
    [(["em"], "91 questions (15.2%)", "42.0", "+3.0"), (["em", "f1"], "30 questions (5.0%)", "41.2", "+1.5")],
)
def test_the_documented_figures(metrics: list[str], ties: str, first: str, accuracy: str, capsys) -> None:
    records = str(ROOT / "docs" / "records" / "nq-train.jsonl.gz")
    tie_break.main([records, "--config", str(ROOT / "configs" / "nq-offline.yaml"), "--metrics", *metrics])
    printed = capsys.readouterr().out
    assert f"tied between different answers: {ties}" in printed
    assert re.search(rf"^first\s+{re.escape(first)}\s", printed, re.M)
    assert re.search(rf"^accuracy\s+\S+\s+\S+\s+{re.escape(accuracy)}\s", printed, re.M)
    documented = (ROOT / "docs" / "voter.md").read_text(encoding="utf-8")
    assert f"{ties.split()[0]} ({ties.split('(')[1]}" in documented
