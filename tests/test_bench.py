"""`eor bench` / `eor compare`: a report on small records whose every number is worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from eor.commands.bench_command import bench
from eor.core.errors import ConfigError, InputError
from eor.evaluation.bench import build_report, compare_reports
from eor.evaluation.stats import Bootstrap, mcnemar_exact, paired_bootstrap, paired_test
from eor.evaluation.writing.writer import write_report
from voters.codecs import save_voter

# Four members over eight questions; answers are single words, so EM = F1 = containment everywhere.
# 1 = the answer equals the gold:
#            q0 q1 q2 q3 q4 q5 q6 q7
#   A         1  1  1  1  1  0  0  0    5/8   right {0,1,2,3,4}   wrong {5,6,7}
#   B         1  1  0  0  1  1  0  0    4/8   right {0,1,4,5}     wrong {2,3,6,7}
#   C         1  0  1  0  0  0  1  0    3/8   right {0,2,6}       wrong {1,3,4,5,7}
#   ReFree    0  0  0  0  0  0  1  0    1/8   right {6}           wrong {0,1,2,3,4,5,7}
# Top R = A (5/8). Oracle: every question but q7 has a right member -> 7/8.
GOLDS = ["paris", "london", "berlin", "madrid", "rome", "vienna", "oslo", "dublin"]
LONG = "i am not sure about this one"  # 7 words: q7 leaves the error breakdown (> 5 words)
ANSWERS = {
    "A": ["paris", "london", "berlin", "madrid", "rome", "salzburg", "bergen", "cork"],
    "B": ["paris", "london", "munich", "seville", "rome", "vienna", "stockholm", "galway"],
    "C": ["paris", "manchester", "berlin", "barcelona", "milan", "graz", "oslo", LONG],
    "ReFree": ["lyon", "leeds", "hamburg", "valencia", "naples", "linz", "oslo", "limerick"],
}
# Retrieved text per member and question (ReFree retrieves nothing). Over the kept q0..q6
# (E_r: no gold in the text; E_h: answer not in the text; E_e = (1-E_r)(1-E_h)(1-A); luck = E_r E_h A):
#   A: q5 "vienna salzburg" -> extraction error; q6 neither oslo nor bergen -> E_r, E_h.
#      E_r 1, E_h 1, E_e 1, luck 0, correct 5
#   B: q2 gold berlin retrieved, munich not -> E_h (hallucination with the gold retrieved); q3 neither -> E_r, E_h;
#      q5 right but vienna not retrieved -> E_r, E_h, lucky guess; q6 stockholm retrieved, oslo not -> E_r.
#      E_r 3 {3,5,6}, E_h 3 {2,3,5}, E_e 0, luck 1 {5}, correct 4
#   C: gold always retrieved; q1, q3, q5 wrong answer retrieved too -> extraction errors; q4 milan not -> E_h.
#      E_r 0, E_h 1 {4}, E_e 3 {1,3,5}, luck 0, correct 3
#   ReFree: E_r = E_h = 1 everywhere (7), correct on q6 -> luck 1, E_e 0, correct 1
PASSAGES = {
    "A": ["paris", "london", "berlin", "madrid", "rome", "vienna salzburg", "norway fjords", "ireland"],
    "B": ["paris", "london", "berlin", "spain", "rome", "austria", "stockholm", "galway"],
    "C": ["paris", "london manchester", "berlin", "madrid barcelona", "rome", "vienna graz", "oslo", "dublin"],
    "ReFree": [None] * 8,
}
NAMES = ["A", "B", "C", "ReFree"]

# The uniform em+f1 voter (mean pooling; ties to the lowest member index) picks the most agreed answer:
#   q0 paris x3 -> A; q1 london x2 -> A; q2 berlin x2 -> A; q3 all differ -> A; q4 rome x2 -> A;
#   q5 all differ -> A (salzburg, wrong); q6 oslo x2 (C, ReFree) -> C (right); q7 all differ -> A (wrong).
#   EoR right {0,1,2,3,4,6} = 6/8, wrong {5,7}; chosen A 7 times, C once.
# EoR against the members (eq. 1 with EoR as row / column):
#   RWR(EoR, A) = |{6}|/3, RWR(EoR, B) = |{2,3,6}|/4, RWR(EoR, C) = |{1,3,4}|/5, RWR(EoR, ReFree) = 5/7
#   RWR(A, EoR) = 0/2, RWR(B, EoR) = |{5}|/2, RWR(C, EoR) = 0, RWR(ReFree, EoR) = 0  -> MRLR(EoR) = 1/8
EOR_MRWR = (1 / 3 + 3 / 4 + 3 / 5 + 5 / 7) / 4
EOR_MRLR = (0 + 1 / 2 + 0 + 0) / 4

# RWR(i, j) = |right_i ∩ wrong_j| / |wrong_j|, rows and columns A, B, C, ReFree:
RWR = [
    [0, 2 / 4, 3 / 5, 5 / 7],  # A: {2,3}/4, {1,3,4}/5, {0..4}/7
    [1 / 3, 0, 3 / 5, 4 / 7],  # B: {5}/3, {1,4,5}/5, {0,1,4,5}/7
    [1 / 3, 2 / 4, 0, 2 / 7],  # C: {6}/3, {2,6}/4, {0,2}/7
    [1 / 3, 1 / 4, 0 / 5, 0],  # ReFree: {6}/3, {6}/4, {}/5
]
MRWR = [np.mean([x for j, x in enumerate(row) if j != i]) for i, row in enumerate(RWR)]
MRLR = [np.mean([RWR[j][i] for j in range(4) if j != i]) for i in range(4)]


def _record(q: int, answers: dict[str, list[str]], passages: dict[str, list[str | None]], golds: list[str]) -> dict:
    members = {}
    for name, column in answers.items():
        text = passages[name][q]
        members[name] = {
            "answer": column[q],
            "passages": [] if text is None else [{"id": f"{name}-{q}", "title": "", "text": text, "score": 1.0}],
            "prompt": "",
            "seconds": 0.01,
        }
    return {"id": f"q{q}", "question": f"question {q}?", "answers": [golds[q]], "members": members}


def write_records(folder: Path, answers=ANSWERS, passages=PASSAGES, golds=GOLDS, extra: list[dict] = ()) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(_record(q, answers, passages, golds)) for q in range(len(golds))]
    lines += [json.dumps(record) for record in extra]
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def write_weights(path: Path, names: list[str], retriever: list[float], grounding: float | None = None, **meta) -> Path:
    from voters import Voter

    voter = Voter.uniform(len(names), metrics=("em", "f1"), members=names)
    voter.retriever_weights_ = np.array(retriever, dtype=float)
    voter.grounding_weight_ = grounding
    save_voter(voter, path, **meta)
    return path


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> Path:
    # a record without gold answers is skipped, as in training
    skipped = _record(0, ANSWERS, PASSAGES, GOLDS) | {"id": "no-gold", "answers": []}
    return write_records(tmp_path_factory.mktemp("run"), extra=[skipped])


@pytest.fixture(scope="module")
def report(records) -> dict:
    return build_report(records, metrics=("em", "f1"), resamples=200)


def test_members_accuracy_mrwr_mrlr(report):
    assert report["questions"] == 8
    assert report["names"] == NAMES
    for i, name in enumerate(NAMES):
        member = report["members"][name]
        expected = [5 / 8, 4 / 8, 3 / 8, 1 / 8][i]
        assert member["em"] == member["f1"] == member["contains"] == pytest.approx(expected)
        assert member["mrwr"] == pytest.approx(MRWR[i])
        assert member["mrlr"] == pytest.approx(MRLR[i])
        low, high = member["ci"]["em"]
        assert 0 <= low <= expected <= high <= 1
    assert MRLR[0] == pytest.approx(1 / 3)  # A's failures {5,6,7}: B, C and ReFree each fix one of three


def test_rwr_matrix(report):
    assert report["rwr"]["names"] == NAMES
    assert np.allclose(np.array(report["rwr"]["matrix"], dtype=float), RWR)


def test_top_r_oracle_and_eor(report):
    assert report["top_r"]["member"] == "A"
    assert report["top_r"]["em"] == pytest.approx(5 / 8)
    assert report["top_r_train"] is None  # no weights file names one
    assert report["oracle"]["em"] == pytest.approx(7 / 8)
    eor = report["eor"]
    assert eor["voter"] == "uniform" and eor["metrics"] == ["em", "f1"]
    assert eor["em"] == pytest.approx(6 / 8)
    assert eor["chosen"] == {"A": 7, "B": 0, "C": 1, "ReFree": 0}
    assert eor["mrwr"] == pytest.approx(EOR_MRWR)
    assert eor["mrlr"] == pytest.approx(EOR_MRLR)
    assert report["oracle"]["gap"]["eor"] == pytest.approx(1 / 8)
    assert report["oracle"]["gap"]["top_r"] == pytest.approx(2 / 8)


def test_significance_is_exact_mcnemar_on_discordant_questions(report):
    test = report["significance"]["top_r"]
    # EoR right and A wrong: q6; A right and EoR wrong: none -> binomtest(1, 1) two-sided p = 1
    assert test["test"] == "mcnemar_exact" and test["against"] == "A"
    assert test["mcnemar"] == {"a_only": 1, "b_only": 0, "discordant": 1, "p_value": 1.0}
    assert test["difference"] == pytest.approx(1 / 8)
    assert test["significant"] is False
    assert report["significance"]["top_r_train"] is None


def test_error_breakdown(report):
    errors = report["errors"]
    assert (errors["questions"], errors["filtered"]) == (7, 1)  # q7: C's answer has 7 words
    expected = {  # retriever_error, hallucination, extraction_error, lucky_guess, correct (see PASSAGES)
        "A": (1, 1, 1, 0, 5),
        "B": (3, 3, 0, 1, 4),
        "C": (0, 1, 3, 0, 3),
        "ReFree": (7, 7, 0, 1, 1),
    }
    kinds = ("retriever_error", "hallucination", "extraction_error", "lucky_guess", "correct")
    for name, counts in expected.items():
        member = errors["members"][name]
        assert tuple(member["counts"][k] for k in kinds) == counts, name
        assert member["rates"]["retriever_error"] == pytest.approx(counts[0] / 7)
        assert sum(member["partition"].values()) == 7
    # B's partition: correct-not-lucky {0,1,4}, lucky {5}, hallucination with gold retrieved {2}, retriever {3,6}
    assert errors["members"]["B"]["partition"] == {
        "correct": 3,
        "lucky_guess": 1,
        "extraction_error": 0,
        "hallucination": 1,
        "retriever_error": 2,
    }
    # EoR answers with A's passages except q6 (C's): A's q5 extraction error, everything else right
    assert errors["eor"]["counts"] == {
        "retriever_error": 0,
        "hallucination": 0,
        "extraction_error": 1,
        "lucky_guess": 0,
        "correct": 6,
    }


def test_error_rwr_with_appendix_b_conditioning_and_nulls(report):
    rwr = report["errors"]["rwr"]
    a, b, c, r = range(4)
    e_r = rwr["retriever_error"]
    # E_r: A {6}, B {3,5,6}, C {}, ReFree {0..6}
    assert e_r[a][b] == pytest.approx(2 / 3)  # A avoids B's {3,5}
    assert e_r[b][a] == 0.0  # B also misses q6
    assert e_r[c][r] == 1.0
    assert all(e_r[i][c] is None for i in range(4))  # C never has a retriever error: undefined, not 0
    e_e = rwr["extraction_error"]
    # E_e: A {5}, C {1,3,5}; conditioned on both retrieving the gold
    assert e_e[a][c] == pytest.approx(2 / 3)  # c_AC = {0..5}: A avoids C's {1,3}
    assert e_e[c][a] == 0.0
    assert e_e[b][a] is None  # c_BA = {0,1,2,4} holds none of A's extraction errors
    luck = rwr["lucky_guess"]
    # luck: B {5}, ReFree {6}; conditioned on both members having E_r and E_h: B {3,5}, ReFree all
    assert luck[r][b] == 1.0
    assert luck[b][r] is None  # q6 is outside B's regime
    assert luck[a][b] is None  # A's regime {6} and B's {3,5} do not meet


def test_upper_bound_by_pool_size(report):
    bound = report["upper_bound"]
    by_size = {entry["size"]: entry for entry in bound["by_size"]}
    assert by_size[1]["accuracies"] == pytest.approx([5 / 8, 4 / 8, 3 / 8, 1 / 8])
    # pairs AB AC AR BC BR CR: unions of right sets {0..5}, {0..4,6}, {0..4,6}, {0,1,2,4,5,6}, {0,1,4,5,6}, {0,2,6}
    assert by_size[2]["accuracies"] == pytest.approx([6 / 8, 6 / 8, 6 / 8, 6 / 8, 5 / 8, 3 / 8])
    assert by_size[3]["accuracies"] == pytest.approx([7 / 8, 7 / 8, 6 / 8, 6 / 8])
    assert by_size[4]["accuracies"] == pytest.approx([7 / 8])
    assert by_size[3]["best_subset"] == ["A", "B", "C"]
    assert (bound["best_single"], bound["best_single_accuracy"]) == ("A", 5 / 8)
    assert bound["eor"] == pytest.approx(6 / 8)


def test_undefined_ratios_are_null(tmp_path):
    # X is always right, Y only on q0: RWR(Y, X) has a zero denominator.
    answers = {"X": ["a", "b", "c"], "Y": ["a", "z", "z"]}
    passages = {"X": ["a", "b", "c"], "Y": ["a", "b", "c"]}
    report = build_report(write_records(tmp_path, answers, passages, ["a", "b", "c"]), metrics=("em", "f1"))
    assert report["rwr"]["matrix"] == [[None, 1.0], [None, 0.0]]  # column X undefined; RWR(X, Y) = 2/2
    assert report["members"]["X"]["mrlr"] is None
    assert report["members"]["Y"]["mrwr"] is None
    assert report["members"]["X"]["mrwr"] == 1.0
    # EoR (X on every tie) is never wrong: no member can fix its failures
    assert report["eor"]["em"] == 1.0 and report["eor"]["mrlr"] is None
    test = report["significance"]["top_r"]
    assert test["mcnemar"]["discordant"] == 0 and test["p_value"] == 1.0
    write_report("bench", report, tmp_path / "out")
    text = (tmp_path / "out" / "report.json").read_text()
    json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in report.json"))  # no NaN


def test_weights_file_top_r_train_and_figures(records, tmp_path):
    # A dropped (0.05 <= t = 0.1); B, C, ReFree vote with equal weights:
    #   q0 paris (B) right, q1 all differ -> B right, q2 B munich wrong, q3 B wrong, q4 B right, q5 B right,
    #   q6 oslo (C, ReFree) -> C right, q7 B wrong: EoR right {0,1,4,5,6} = 5/8; B 7 times, C once.
    weights = write_weights(
        tmp_path / "w.json", NAMES, [0.05, 0.5, 0.5, 0.5], top_r_train={"member": "B", "train": 0.9}
    )
    summary = bench(records, tmp_path / "out", weights=weights, resamples=100, progress=False)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["eor"]["voter"] == "weights"
    assert report["eor"]["em"] == pytest.approx(5 / 8)
    assert report["eor"]["chosen"] == {"A": 0, "B": 7, "C": 1, "ReFree": 0}
    assert report["top_r_train"]["member"] == "B" and report["top_r_train"]["train"] == 0.9
    assert report["top_r_train"]["em"] == pytest.approx(4 / 8)
    # EoR vs B: EoR alone right on q6, B alone right on none
    assert report["significance"]["top_r_train"]["mcnemar"]["a_only"] == 1
    assert report["significance"]["top_r_train"]["mcnemar"]["b_only"] == 0
    assert report["weights"]["retriever_weights"] == {"A": 0.05, "B": 0.5, "C": 0.5, "ReFree": 0.5}
    assert report["weights"]["active"] == ["B", "C", "ReFree"]
    for name in ("rwr.png", "errors_rwr.png", "upper_bound.png", "weights.png", "error_rates.png"):
        data = (tmp_path / "out" / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000, name
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "| **Top R (train)** (B) | 50.0 [" in markdown
    assert "exact McNemar" in markdown and "weights.png" in markdown
    assert "EoR (weights): 62.5" in summary and "Top R (train) B: 50.0" in summary


def test_uniform_report_has_no_weights_figure(report, tmp_path):
    written = [path.name for path in write_report("bench", report, tmp_path)]
    assert "weights.png" not in written and not (tmp_path / "weights.png").exists()
    assert {"report.json", "report.md", "rwr.png", "errors_rwr.png", "upper_bound.png", "error_rates.png"} <= set(
        written
    )
    markdown = (tmp_path / "report.md").read_text()
    assert "| A | 62.5 [" in markdown and "| **EoR** (paper, uniform weights) | 75.0 [" in markdown
    assert "- reader: not recorded" in markdown  # records written by hand: no pool.json, no header


def test_weights_for_a_sub_pool_vote_among_those_members(records, tmp_path):
    # Only ReFree and B vote, in the file's order: they never agree, so every question is a tie that goes to
    # the voter's first member, ReFree (right on q6 only); A and C take no part.
    weights = write_weights(tmp_path / "w.json", ["ReFree", "B"], [0.5, 0.5])
    report = build_report(records, weights=weights, resamples=50)
    assert report["eor"]["members"] == ["ReFree", "B"]
    assert report["eor"]["chosen"] == {"A": 0, "B": 0, "C": 0, "ReFree": 8}
    assert report["eor"]["em"] == pytest.approx(1 / 8)
    assert report["weights"]["retriever_weights"] == {"ReFree": 0.5, "B": 0.5}


def test_grounding_weights_vote_with_passages_and_are_reported(tmp_path):
    # X and Y never agree, so the similarity pools tie. Without grounding the tie goes to X (right on q1
    # only); with ω^g = 0.6 the member whose answer is in its own passage wins: Y on q0, X on q1.
    answers = {"X": ["rome", "oslo"], "Y": ["paris", "bern"]}
    passages = {"X": ["no city here", "oslo is a capital"], "Y": ["paris is a capital", "no city here"]}
    records = write_records(tmp_path / "run", answers, passages, ["paris", "oslo"])
    assert build_report(records, metrics=("em", "f1"), resamples=20)["eor"]["em"] == 0.5
    weights = write_weights(tmp_path / "w.json", ["X", "Y"], [0.5, 0.5], grounding=0.6)
    bench(records, tmp_path / "out", weights=weights, resamples=20, progress=False)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["eor"]["em"] == 1.0 and report["eor"]["chosen"] == {"X": 1, "Y": 1}
    assert report["weights"]["grounding_weight"] == 0.6
    assert "grounding weight ω^g 0.600" in (tmp_path / "out" / "report.md").read_text()
    assert (tmp_path / "out" / "weights.png").read_bytes().startswith(b"\x89PNG")


def test_weights_naming_missing_members_fail(records, tmp_path):
    weights = write_weights(tmp_path / "w.json", ["A", "Z"], [0.5, 0.5])
    with pytest.raises(InputError, match="Z"):
        build_report(records, weights=weights)
    with pytest.raises(ConfigError):
        build_report(records, weights=weights, metrics=("em",))


def test_unknown_metric_is_an_input_error(records):
    with pytest.raises(InputError, match="unknown correctness metric"):
        build_report(records, metric="bleu", metrics=("em",))


def test_bootstrap_is_deterministic_with_a_seed(records):
    first = build_report(records, metrics=("em", "f1"), seed=3, resamples=300)
    again = build_report(records, metrics=("em", "f1"), seed=3, resamples=300)
    other = build_report(records, metrics=("em", "f1"), seed=4, resamples=300)
    assert first["members"] == again["members"] and first["significance"] == again["significance"]
    cis = lambda r: [r["members"][n]["ci"]["em"] for n in NAMES]  # noqa: E731
    assert cis(first) != cis(other)


def test_compare_mentions_changed_and_missing_members(records, tmp_path):
    answers = {**ANSWERS, "B": ["paris", "london", "berlin", "seville", "rome", "vienna", "stockholm", "galway"]}
    answers["D"] = ANSWERS["C"]
    passages = {**PASSAGES, "D": PASSAGES["C"]}
    changed = write_records(tmp_path / "changed", answers, passages)
    build_a = build_report(records, metrics=("em", "f1"), resamples=50)
    write_report("bench", build_a, tmp_path / "a")
    write_report("bench", build_report(changed, metrics=("em", "f1"), resamples=50), tmp_path / "b")
    text = compare_reports(tmp_path / "a", tmp_path / "b" / "report.json")
    assert "members only in A: none" in text
    assert "members only in B: D" in text
    rows = {line.lstrip("* ").split("  ")[0]: line for line in text.splitlines() if "→" in line}
    assert rows["B"].startswith("*") and "50.0 → 62.5 (+12.5)" in rows["B"]  # B now right on q2
    assert "37.5 → 37.5 (+0.0)" in rows["C"]
    with pytest.raises(InputError, match="no benchmark report"):
        compare_reports(tmp_path / "a", tmp_path / "nowhere")


def test_mcnemar_and_paired_bootstrap_by_hand():
    # 8 questions A alone right, 1 B alone right, 3 both: two-sided exact p = 2 (C(9,8) + C(9,9)) / 2^9 = 20/512
    a = np.array([1] * 8 + [0] + [1] * 3)
    b = np.array([0] * 8 + [1] + [1] * 3)
    assert mcnemar_exact(a, b) == {"a_only": 8, "b_only": 1, "discordant": 9, "p_value": pytest.approx(20 / 512)}
    resamples = Bootstrap.draw(len(a), 500, seed=0)
    same = paired_bootstrap(a, a, resamples)
    assert same["difference"] == 0 and same["ci"] == [0.0, 0.0] and same["p_value"] == 1.0
    assert resamples.interval(np.ones(12)) == [1.0, 1.0]
    graded = paired_test(np.linspace(0.2, 0.9, 12), np.full(12, 0.1), resamples)
    assert graded["test"] == "paired_bootstrap" and graded["mcnemar"] is None
    assert graded["p_value"] == 0.0 and graded["significant"] is True  # every resample has a positive difference
    assert np.array_equal(Bootstrap.draw(12, 500, seed=0).counts, resamples.counts)
    assert resamples.counts.sum(axis=1).tolist() == [12.0] * 500
    with pytest.raises(InputError):
        mcnemar_exact(np.array([0.5]), np.array([1.0]))


def test_semantic_metric_without_the_encoder():
    from eor.core.correctness import CORRECTNESS

    semantic = CORRECTNESS["semantic"]
    assert semantic("The Beatles", "beatles") == 1.0  # normalised exact match: no embedding needed
    assert semantic("1901", "1902") == 0.0  # numbers differ: never equivalent
    assert semantic("", "paris") == 0.0


@pytest.mark.slow
def test_semantic_metric_with_the_encoder():
    from eor.core.correctness.semantic import semantic_equivalence

    assert semantic_equivalence("USA", "United States") == 1.0
    assert semantic_equivalence("red", "blue") == 0.0
    assert math.isclose(semantic_equivalence.cosine("beatles", "beatles"), 1.0, abs_tol=1e-6)


def test_a_report_opens_with_the_provenance_of_packed_records(tmp_path):
    import gzip

    shipped = Path(__file__).resolve().parent.parent / "docs" / "records" / "nq-dev.jsonl.gz"
    with gzip.open(shipped, "rt", encoding="utf-8") as handle:
        header, *records = [next(handle) for _ in range(11)]
    assert '"eor_records"' in header
    packed = tmp_path / "dev.jsonl.gz"
    with gzip.open(packed, "wt", encoding="utf-8") as handle:
        handle.write(header + "".join(records))
    report = build_report(packed, metrics=("em", "f1"))
    write_report("bench", report, tmp_path / "report")
    origin = json.loads(header)["eor_records"]["pool"]
    assert report["provenance"] == {
        "members": origin["members"],
        "reader": origin["reader"],
        "corpus": f"{origin['corpus']['file']} ({origin['corpus']['bytes']:,} bytes), "
        f"sha256 {origin['corpus']['sha256'][:16]}",  # the corpus's version
        "config": "nq-dev-records",  # the records grew by the designed pool (docs/pool-design.md)
    }
    assert "sha256:" in origin["reader"] and report["questions"] == 10
    opening = (tmp_path / "report" / "report.md").read_text().split("## ")[0]
    assert f"- reader: {origin['reader']}" in opening and "- corpus: wiki-nq.jsonl (" in opening
    assert "- EoR's voter: paper, uniform weights" in opening
