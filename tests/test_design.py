"""Pool design: prompt costs replayed in another order (prefix reuse in whole chunks, recomputed from the
recorded prompts), the forward and backward passes of `eor design` against values worked by hand, and the
command end to end on the shipped 7-member training records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eor.cli import main
from eor.core.config import load_config
from eor.core.errors import InputError
from eor.evaluation.stats import paired_difference
from eor.learning.design import design_pool, pool_cost
from eor.runs.costs import prompt_replay
from eor.runs.run_data import RunData
from tests.conftest import ROOT
from voters import load_voter


def _data(prompts: list[list[str]], tokens: list[list[tuple[int, int, int]]]) -> RunData:
    q, m = len(prompts), len(prompts[0])
    return RunData(
        [f"M{i}" for i in range(m)],
        [f"q{i}" for i in range(q)],
        [["a"] * m] * q,
        [["a"]] * q,
        [[[]] * m] * q,
        [[""] * m] * q,
        ["?"] * q,
        [[1.0] * m] * q,
        [[{"prompt": p, "reused": r, "generated": g} for p, r, g in row] for row in tokens],
        [],
        prompts,
    )


RATES = {"prompt": 100.0, "generated": 10.0}


def test_prefix_reuse_is_replayed_in_whole_chunks_from_the_recorded_prompts() -> None:
    # One character is one token; chunks of 4. A = "abcdefgh" (8), B = "abcdefXY" (8): they share "abcdef" (6),
    # so B after A keeps 4 (one chunk) and evaluates 4; A after B keeps 4 likewise. C = "abcdefghZ" after A keeps
    # 8 (two chunks, leaving "Z"). Recorded counts are what `eor run`'s own order gave: replays ignore them.
    data = _data([["abcdefgh", "abcdefXY", "abcdefghZ"]], [[(8, 0, 2), (4, 4, 3), (9, 0, 1)]])
    replay = prompt_replay(data, list, RATES, 4)
    assert replay.total.tolist() == [[8, 8, 9]]
    assert replay.kept(None, 1).tolist() == [0]
    assert replay.kept(0, 1).tolist() == [4] and replay.kept(1, 0).tolist() == [4]
    assert replay.kept(0, 2).tolist() == [8] and replay.kept(2, 0).tolist() == [4]
    assert replay.after(0, 2).tolist() == pytest.approx([(9 - 8) / 100 + 1 / 10])
    assert replay.after(None, 1).tolist() == pytest.approx([8 / 100 + 3 / 10])
    order = replay.in_order([2, 0], 3)  # C first (nothing kept), then A after C (keeps 4), B never follows
    assert order[0].tolist() == pytest.approx([(8 - 4) / 100 + 0.2, 8 / 100 + 0.3, 9 / 100 + 0.1])
    assert pool_cost(replay, [2, 0]) == pytest.approx(order[0, 2] + order[0, 0])


def test_a_questions_first_member_follows_the_last_prompt_of_the_question_before() -> None:
    # Two questions; the second's first member (A, "abcdQ2") shares "abcd" (one chunk of 4) with the first
    # question's last prompt run: after it, it keeps 4 of its 6 tokens; a cascade that stopped at A on the
    # first question leaves "abcdQ1" last, which shares "abcdQ" (still one chunk).
    data = _data(
        [["abcdQ1", "wxyzQ1"], ["abcdQ2", "wxyzQ2"]],
        [[(6, 0, 1), (6, 0, 1)], [(6, 0, 1), (6, 0, 1)]],
    )
    replay = prompt_replay(data, list, RATES, 4)
    every = replay.spent([0, 1])
    assert every.tolist() == pytest.approx([2 * (6 / 100 + 0.1), (6 / 100 + 0.1) * 2])  # after "wxyzQ1": nothing
    assert replay.spent([1, 0]).tolist() == pytest.approx([0.32, (6 - 0) / 100 + 0.1 + 6 / 100 + 0.1])
    stopped = replay.spent([0, 1], stops=[0, 1])  # the first question stops after A
    assert stopped.tolist() == pytest.approx([6 / 100 + 0.1, (6 - 4) / 100 + 0.1 + 6 / 100 + 0.1])


def test_a_member_whose_retrieval_generated_keeps_nothing() -> None:
    # PK: its recorded prompt tokens (30) exceed its answer prompt's (8): its document was generated just before.
    data = _data([["abcdefgh", "abcdefgh"]], [[(8, 0, 2), (26, 4, 40)]])
    replay = prompt_replay(data, list, RATES, 4)
    assert replay.kept(0, 1).tolist() == [0]
    assert replay.after(0, 1).tolist() == pytest.approx([30 / 100 + 40 / 10])


def test_replay_needs_prompts_and_token_counts() -> None:
    data = _data([["ab", "cd"]], [[(2, 0, 1), (2, 0, 1)]])
    data.prompts[0][1] = None
    with pytest.raises(InputError, match="every member's prompt and token counts"):
        prompt_replay(data, list, RATES, 4)


class Table:
    """SplitScores with fixed held-out correctness per subset (hand-worked design paths)."""

    def __init__(self, right: dict[tuple[int, ...], list[float]], labels: np.ndarray) -> None:
        self.table = right
        self.labels = labels

    def right(self, subset) -> np.ndarray:
        if not subset:
            return np.zeros(self.labels.shape[0])
        return np.asarray(self.table[tuple(sorted(subset))], dtype=float)

    def oracle(self, subset) -> float:
        return float(self.labels[:, list(subset)].any(axis=1).mean())


class FlatCosts:
    """Each member costs `seconds[m]`, whatever runs before it."""

    def __init__(self, seconds: list[float], questions: int) -> None:
        self.seconds, self.questions = seconds, questions

    def after(self, previous, member) -> np.ndarray:
        return np.full(self.questions, self.seconds[member])

    def spent(self, order, stops=None) -> np.ndarray:
        return np.full(self.questions, sum(self.seconds[m] for m in order))


def test_paired_gain_and_its_standard_error_by_hand() -> None:
    gain, se = paired_difference(np.array([1, 1, 0, 1.0]), np.array([0, 1, 0, 0.0]))
    # differences 1, 0, 0, 1: mean 0.5, sample sd sqrt(1/3), se sqrt(1/3)/2
    assert gain == 0.5 and se == pytest.approx(np.sqrt(1 / 3) / 2)


def test_the_forward_pass_adds_by_gain_per_second_while_the_gain_is_one_standard_error() -> None:
    labels = np.array([[1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1], [0, 0, 0], [1, 0, 0], [0, 1, 0]])
    right = {
        (0,): [1, 1, 0, 0, 0, 0, 1, 0],  # 3/8
        (1,): [0, 1, 1, 0, 0, 0, 0, 1],  # 3/8
        (2,): [0, 0, 0, 1, 1, 0, 0, 0],  # 2/8
        (0, 1): [1, 1, 1, 0, 0, 0, 1, 1],  # 5/8
        (0, 2): [1, 1, 0, 1, 0, 0, 1, 0],  # 4/8
        (1, 2): [0, 1, 1, 1, 1, 0, 0, 1],  # 5/8
        (0, 1, 2): [1, 1, 1, 1, 1, 0, 1, 1],  # 7/8
    }
    # Step 1: A gains 3/8 in 1 s, B 3/8 in 2 s, C 2/8 in 1 s: A. Step 2: B gains 2/8 in 2 s, C 1/8 in 1 s, the
    # same per second: the earlier, B. Its differences (0,0,1,0,0,0,0,1): mean 1/4, sample variance 3/14, so
    # se = sqrt(3/14 / 8). Step 3: C gains 2/8 with the same se. Backward: dropping A or C loses 2/8 ≥ se.
    design = design_pool(Table(right, labels), FlatCosts([1.0, 2.0, 1.0], 8), ["A", "B", "C"])
    assert [step.action for step in design.steps] == ["start", "add", "add", "add"]
    assert [step.member for step in design.steps[1:]] == ["A", "B", "C"]
    assert design.steps[2].gain == pytest.approx(0.25) and design.steps[2].se == pytest.approx(np.sqrt(3 / 112))
    assert design.steps[3].accuracy == pytest.approx(7 / 8) and design.chosen == ["A", "B", "C"]
    assert design.steps[3].cost == pytest.approx(4.0) and design.steps[3].oracle == pytest.approx(7 / 8)
    # Every pool the passes looked at, and the frontier: cheapest first, each more accurate than the one before.
    assert len(design.evaluated) == 7  # the 3 + 2 + 1 forward options, and (1, 2) of the backward pass
    assert [entry["members"] for entry in design.frontier()] == [["A"], ["A", "C"], ["A", "B"], ["A", "B", "C"]]
    assert [entry["cost"] for entry in design.frontier()] == [1.0, 2.0, 3.0, 4.0]


def test_a_gain_on_one_question_equals_its_standard_error_and_is_kept() -> None:
    gain, se = paired_difference(np.array([0, 0, 1, 0, 0.0]), np.zeros(5))
    assert gain == pytest.approx(se)  # 1/n and sqrt(1/n)/sqrt(n): the rule's boundary, kept
    labels = np.eye(2, dtype=bool)[[0, 0, 1, 0, 0]]
    right = {(0,): [1, 1, 0, 1, 1], (1,): [0, 0, 1, 0, 0], (0, 1): [1, 1, 1, 1, 1]}
    design = design_pool(Table(right, labels), FlatCosts([1.0, 1.0], 5), ["A", "B"])
    assert design.chosen == ["A", "B"]


def test_a_step_below_one_standard_error_is_refused() -> None:
    labels = np.eye(4, dtype=bool)[[0, 1, 2, 3, 0, 1]]
    right = {
        (0,): [1, 0, 0, 0, 1, 0],
        (1,): [0, 1, 0, 0, 0, 1],
        (2,): [0, 0, 0.5, 0, 0, 0],
        (3,): [0, 0, 0, 0, 0, 0],
        (0, 1): [1, 1, 0, 0, 1, 1],
        (0, 2): [1, 0, 0.5, 0, 1, 0],
        (0, 3): [1, 0, 0, 0, 1, 0],
        (1, 2): [0, 1, 0.5, 0, 0, 1],
        (1, 3): [0, 1, 0, 0, 0, 1],
        (0, 1, 2): [1, 0.75, 0.5, 0, 1, 1],  # +0.5 on one question, -0.25 on another: mean 1/24, se 0.100
        (0, 1, 3): [1, 1, 0, 0, 1, 1],  # D gains nothing: never a candidate
    }
    design = design_pool(Table(right, labels), FlatCosts([1.0, 1.0, 1.0, 1.0], 6), ["A", "B", "C", "D"])
    assert [step.action for step in design.steps] == ["start", "add", "add", "refused"]
    refused = design.steps[-1]
    assert (
        refused.member == "C"
        and refused.gain == pytest.approx(1 / 24)
        and refused.se == pytest.approx(0.10035, abs=1e-4)
    )
    assert design.chosen == ["A", "B"]


def test_a_cheap_noisy_candidate_refused_lets_the_next_one_in() -> None:
    labels = np.eye(3, dtype=bool)[[0, 0, 1, 2, 2, 1]]
    right = {
        (0,): [1, 1, 0, 0, 0, 0],
        (1,): [0, 0, 0.5, 0, 0, 0],
        (2,): [0, 0, 0, 1, 1, 0],
        (0, 1): [1, 0.75, 0.5, 0, 0, 0],  # B right after A: +1/24 (mean) in 0.1 s, se 0.100: refused
        (0, 2): [1, 1, 0, 1, 1, 0],  # C after A: +1/3 at 1 s, se 0.211: added
        (0, 1, 2): [1, 1, 0, 1, 1, 0],  # B after A and C: no gain, no candidate
    }
    costs = FlatCosts([1.0, 10.0, 1.0], 6)
    costs.after = lambda previous, member: np.full(6, 0.1 if (previous, member) == (0, 1) else costs.seconds[member])
    design = design_pool(Table(right, labels), costs, ["A", "B", "C"])
    assert [(step.action, step.member) for step in design.steps] == [
        ("start", None),
        ("add", "A"),
        ("refused", "B"),
        ("add", "C"),
    ]
    assert design.chosen == ["A", "C"]


def test_the_backward_pass_removes_a_member_that_no_longer_helps() -> None:
    labels = np.eye(3, dtype=bool)[[0, 1, 2, 0, 1, 2]]
    right = {
        (0,): [1, 0, 0, 1, 0, 0],
        (1,): [0, 1, 0, 0, 1, 0],
        (2,): [0, 0, 1, 0, 0, 1],
        (0, 1): [1, 1, 0, 1, 1, 0],
        (0, 2): [1, 0, 1, 1, 0, 1],
        (1, 2): [1, 1, 1, 1, 1, 1],  # B and C together are right where A is: A no longer helps
        (0, 1, 2): [1, 1, 1, 1, 1, 1],
    }
    design = design_pool(Table(right, labels), FlatCosts([1.0, 1.0, 1.0], 6), ["A", "B", "C"])
    assert [step.action for step in design.steps] == ["start", "add", "add", "add", "drop"]
    assert design.steps[-1].member == "A" and design.steps[-1].gain == 0 and design.chosen == ["B", "C"]


@pytest.mark.slow
def test_eor_design_on_the_shipped_seven_member_records(tmp_path, capsys) -> None:
    out = tmp_path / "design"
    args = ["design", str(ROOT / "docs/records/nq-train.jsonl.gz"), "--config", str(ROOT / "configs/nq-offline.yaml")]
    assert main([*args, "--out", str(out), "--repeats", "2", "--rates", "281,60"]) == 0
    printed = capsys.readouterr().out
    document = json.loads((out / "design.json").read_text())
    table = {row["member"]: row for row in document["candidates"]}
    assert table["Wiki@1"]["em"] == pytest.approx(0.458, abs=0.001)
    assert table["ReFree"]["gold_passage"] == 0.0 and table["Wiki@3"]["gold_passage"] > table["Wiki@1"]["gold_passage"]
    assert document["chosen"][0] == "Wiki@1" and "chosen: Wiki@1" in printed
    assert "\ncascade: " in printed and " s per question (every member: " in printed
    assert document["settings"]["cascade"] == {"max_loss": 0.5}
    assert all(step["gain"] >= step["se"] - 1e-12 for step in document["steps"] if step["action"] == "add")
    assert document["frontier"] and document["evaluated"]
    for name in ("pool.yaml", "selector.json", "cascade.json", "design.png"):
        assert (out / name).is_file()
    cascade = json.loads((out / "cascade.json").read_text())
    assert sorted(cascade["members"]) == sorted(document["chosen"])
    assert load_config(out / "pool.yaml").members == document["chosen"]
    report = tmp_path / "bench"
    assert main(["bench", *args[1:], "--out", str(report), "--design", str(out), "--metrics", "em"]) == 0
    markdown = (report / "report.md").read_text()
    assert "## Pool design" in markdown and f"Chosen: {', '.join(document['chosen'])}." in markdown
    assert (report / "design.png").is_file()
    assert load_voter(out / "selector.json", members=document["chosen"]).kind == "selector"


def test_the_seven_member_cascade_of_the_600_reproduces_from_the_grown_records(tmp_path, capsys) -> None:
    """The training records grew by the candidates (docs/pool-design.md); trained on the 7-member pool's
    members with the command that made the cascade shipped until it was trained on all 1,566 (kept as
    docs/weights/nq-offline-cascade-600.json), its members charged as recorded (as it was trained), they give its
    weights again, all but the identity of the records' pool."""
    out = tmp_path / "cascade.json"
    records = str(ROOT / "docs/records/nq-train.jsonl.gz")
    args = ["train", records, "--voter", "cascade", "--max-loss", "0.5", "--no-confidence", "--cost-order", "recorded"]
    assert main([*args, "--config", str(ROOT / "configs/nq-offline.yaml"), "--out", str(out)]) == 0
    shipped = json.loads((ROOT / "docs/weights/nq-offline-cascade-600.json").read_text())
    trained = json.loads(out.read_text())
    for weights in (shipped, trained):
        weights["meta"].pop("pool")
        weights["meta"]["records"] = "docs/records/nq-train.jsonl.gz"
    _assert_same(trained, shipped, "weights")


def _assert_same(got: object, expected: object, where: str) -> None:
    """Equal documents, floats to 1e-4 relative or 1e-6 absolute: the features' last bits move with how the
    answers were batched through the encoder, and a logistic fit (lbfgs, tolerance 1e-4) carries them further."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(expected), where
        for key in expected:
            _assert_same(got[key], expected[key], f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), where
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            _assert_same(a, b, f"{where}[{i}]")
    elif isinstance(expected, float) and isinstance(got, float):
        assert got == pytest.approx(expected, rel=1e-4, abs=1e-6), where
    else:
        assert got == expected, where
