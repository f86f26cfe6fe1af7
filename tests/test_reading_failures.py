"""benchmarks/reading_failures.py on hand-made records: where members lose the answer they were given."""

from __future__ import annotations

import json

import pytest

from benchmarks import reading_failures


def _member(answer: str, passages: list[tuple[str, str]], seconds: float) -> dict:
    found = [{"id": pid, "title": "", "text": text, "score": 1.0} for pid, text in passages]
    return {"answer": answer, "passages": found, "prompt": "", "seconds": seconds}


def test_reading_failures_by_hand(tmp_path, capsys):
    rows = [
        # A right from its context; B answers from a passage without the gold answer
        (
            "Paris",
            ["p-paris"],
            _member("Paris", [("p-paris", "Paris is the capital")], 1.0),
            _member("Lyon", [("l", "Lyon")], 0.5),
        ),
        # A takes another span of its context; B has the answer and writes something in none of its passages
        (
            "Rome",
            [],
            _member("Milan", [("r", "Rome and Milan are cities")], 2.0),
            _member("Roma", [("r2", "Rome")], 0.5),
        ),
        # A: seven words holding the gold answer, not a span of its context; B retrieved nothing
        (
            "Bern",
            [],
            _member("The capital city of Switzerland is Bern", [("b", "Bern is in Switzerland")], 3.0),
            _member("", [], 0.5),
        ),
    ]
    lines = [
        json.dumps(
            {"id": f"q{q}", "question": "?", "answers": [gold], "gold_passages": gp, "members": {"A": a, "B": b}}
        )
        for q, (gold, gp, a, b) in enumerate(rows)
    ]
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "table.json"
    assert reading_failures.main([str(records), "--json", str(out)]) == 0
    a, b = json.loads(out.read_text())
    assert a["member"] == "A" and b["member"] == "B"
    assert a["em"] == pytest.approx(1 / 3) and a["gold_passage"] == pytest.approx(1 / 3)
    assert a["answer_in_context"] == 1.0 and a["em_in_context"] == pytest.approx(1 / 3) and a["cost"] == 2.0
    assert (a["wrong_in_context"], a["longer_than_5_words"], a["contains_gold"]) == (2, 1, 1)
    assert (a["other_span_of_context"], a["not_in_context"]) == (1, 1)
    assert b["em"] == 0.0 and b["gold_passage"] == 0.0 and b["answer_in_context"] == pytest.approx(1 / 3)
    assert b["em_in_context"] == 0.0 and b["cost"] == 0.5
    assert (b["wrong_in_context"], b["longer_than_5_words"], b["contains_gold"], b["not_in_context"]) == (1, 0, 0, 1)
    assert "2 members × 3 questions" in capsys.readouterr().out
