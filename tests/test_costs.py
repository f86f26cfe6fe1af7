"""The one cost model (eor.runs.costs): the formula from tokens to seconds by hand, the same formula in the planner
and in records' costs, the rates a weights file carries from its training records into a benchmark, and a
live ensemble's expected cost before it has measured a member."""

from __future__ import annotations

import gzip
import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from eor.commands.plan_command import Pilot, estimate
from eor.evaluation.bench.cost_section import cost_section
from eor.runs.costs import (
    expected_seconds,
    member_costs,
    notation_prior,
    reader_seconds,
    token_counts,
    trained_rates,
    training_costs,
    unit_label,
)
from eor.runs.run_data import load_run
from voters.voter import Voter

RATES = {"prompt": 281.0, "generated": 60.0}


def _voter(names: list[str], meta: dict | None = None) -> Voter:
    """A uniform voter over `names`, with the weights-file metadata `meta` (none: a voter without a file)."""
    voter = Voter.uniform(len(names), members=list(names))
    if meta is not None:
        voter.metadata_ = meta
    return voter


def test_reader_seconds_by_hand() -> None:
    assert reader_seconds(281, 60, RATES) == 2.0
    assert reader_seconds(np.array([562.0, 0.0]), np.array([0.0, 120.0]), RATES).tolist() == [2.0, 2.0]
    assert unit_label("tokens", RATES) == "s (from tokens at 281 prompt / 60 generated tokens per second)"
    assert unit_label("seconds", None) == "s"


def test_the_planner_uses_the_same_formula() -> None:
    pilot = Pilot(questions=10, prompt_tokens=1234.5, generated_tokens=56.7, prompt_rate=281, generation_rate=60)
    figure = estimate(pilot, 400)
    assert figure["reader_seconds"] == reader_seconds(400 * 1234.5, 400 * 56.7, RATES)
    assert figure["reader_seconds"] == pytest.approx(400 * (1234.5 / 281 + 56.7 / 60))


def _first_records(tmp_path, n: int = 10):
    """The shipped 7-member dev records' header and first `n` questions, as a records file."""
    path = tmp_path / "records.jsonl"
    with gzip.open("docs/records/nq-dev.jsonl.gz", "rt", encoding="utf-8") as source:
        path.write_text("".join(itertools.islice(source, n + 1)), encoding="utf-8")
    return load_run(path)


def test_costs_of_recorded_tokens_at_given_rates(tmp_path) -> None:
    data = _first_records(tmp_path)
    tokens = token_counts(data)
    assert tokens is not None
    costs = member_costs(data, rates=RATES)
    assert costs.unit == "tokens" and costs.rates == RATES
    assert np.array_equal(costs.matrix, tokens[..., 0] / 281.0 + tokens[..., 1] / 60.0)


def test_a_weights_file_carries_its_training_costs(tmp_path) -> None:
    data = _first_records(tmp_path)
    stored = training_costs(member_costs(data, rates=RATES), data.names)
    assert stored["unit"] == "tokens" and stored["rates"] == RATES
    assert stored["members"][data.names[0]] == pytest.approx(member_costs(data, rates=RATES).matrix[:, 0].mean())
    voter = _voter(data.names, {"costs": stored})
    assert trained_rates(voter) == RATES
    assert expected_seconds(data.names[1], voter) == stored["members"][data.names[1]]
    assert expected_seconds("PK@CP", voter) == notation_prior("PK@CP") == 21.0  # a member it never trained on
    assert trained_rates(_voter(data.names)) is None  # a voter without a weights file


def test_a_benchmark_charges_at_the_rates_of_the_voters_training(tmp_path) -> None:
    data = _first_records(tmp_path)
    indicator = np.array([[1.0 if row[m] else 0.0 for row in data.answers] for m in range(len(data.names))])
    trained = SimpleNamespace(voter=_voter(data.names, {"costs": {"rates": RATES}}), members=data.names)
    section = cost_section(data, trained, indicator, "em")
    assert section is not None
    assert section["rates"] == RATES and section["rates_from"] == "the voter's training records"
    uniform = SimpleNamespace(voter=_voter(data.names), members=data.names)
    fitted = cost_section(data, uniform, indicator, "em")
    assert fitted is not None and fitted["rates_from"] == "these records" and fitted["rates"] != RATES


def test_a_members_cost_before_it_is_measured_counts_the_passages_it_reads() -> None:
    assert notation_prior("Wiki#2") == notation_prior("Wiki@1") == 2.0  # one passage each, and the question
    assert notation_prior("(BM25+Wiki)@1:fewshot") == 2.0 and notation_prior("Wiki@3") == 4.0
    assert notation_prior("PK") == 11.0 and notation_prior("Wiki@3@CP") == 14.0


def test_the_subset_frontier_is_computed_on_demand(tmp_path) -> None:
    from eor.evaluation.writing.bench_sections import cost_section as cost_markdown

    data = _first_records(tmp_path, 20)
    names = data.names[:3]
    data = load_run(tmp_path / "records.jsonl", names)
    indicator = np.array([[1.0 if row[m] else 0.0 for row in data.answers] for m in range(len(names))])
    voted = SimpleNamespace(voter=_voter(names), members=names)
    plain = cost_section(data, voted, indicator, "em")
    assert plain is not None and plain["frontier"] is None and "subsets" not in plain
    report = {"metric": "em", "cost": plain, "eor": {"em": 0.5}}
    assert "Frontier of member subsets: not computed (`eor bench --frontier`)." in cost_markdown(report)

    section = cost_section(data, voted, indicator, "em", frontier=True)
    assert section is not None and len(section["subsets"]) == 7  # every non-empty subset of 3 members
    matrix = member_costs(data).matrix
    for entry in section["subsets"]:
        columns = [names.index(name) for name in entry["members"]]
        assert entry["seconds"] == pytest.approx(matrix[:, columns].sum(axis=1).mean())
    frontier = section["frontier"]
    assert all(a["seconds"] <= b["seconds"] and a["accuracy"] < b["accuracy"] for a, b in itertools.pairwise(frontier))
    assert all(  # no evaluated subset is cheaper and at least as accurate as a point of the frontier
        not (e["seconds"] < f["seconds"] and e["accuracy"] >= f["accuracy"])
        for f in frontier
        for e in section["subsets"]
    )
    assert section["full_selector"]["members"] == names
    assert section["members"] == plain["members"]  # the rest of the section is the same either way
