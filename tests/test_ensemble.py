"""The pipeline end to end with real models: retrieval, one shared reader, the vote."""

from __future__ import annotations

import json
import math

import pytest

from eor import Ensemble
from eor.core.config import load_config
from eor.core.data import make_question
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def default_ensemble(qwen, tmp_path_factory):
    """The shipped default config (Qwen2.5-0.5B over the demo corpus, seven members)."""
    import os

    os.environ["EOR_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    try:
        yield Ensemble.from_config(ROOT / "configs" / "default.yaml", reader=qwen)
    finally:
        os.environ.pop("EOR_CACHE")


def test_default_pool_answers_the_demo_question(default_ensemble) -> None:
    result = default_ensemble.answer("who was the first president of the united states")
    assert result.answer == "George Washington"
    assert list(result.members) == default_ensemble.members
    assert len(default_ensemble.members) >= 6
    assert result.members[result.member].answer == result.answer
    scores = [out.score for out in result.members.values() if out.score is not None]
    assert result.members[result.member].score == max(scores)
    bm25 = result.members["BM25@3"]
    assert len(bm25.passages) == 3 and "George Washington" in json.dumps(bm25.passages)
    assert bm25.prompt.startswith("Assuming the following paragraphs are true:")
    assert result.members["ReFree"].prompt.startswith("Please directly answer the following question")
    assert len(result.members["PK"].passages) == 1
    assert all(math.isfinite(value) and value >= 0 for value in result.timings.values())


def test_batches_keep_questions_apart(default_ensemble) -> None:
    questions = [
        make_question("what is the capital of france", answers=["Paris"]),
        make_question("who was the first president of the united states"),
    ]
    batch = default_ensemble.answer_batch(questions)
    assert [r.question for r in batch] == [q.question for q in questions]
    single = default_ensemble.answer(questions[1].question)
    assert batch[1].answer == single.answer
    assert {n: o.answer for n, o in batch[1].members.items()} == {n: o.answer for n, o in single.members.items()}
    record = batch[0].to_record().to_dict()
    assert record["answers"] == ["Paris"] and record["vote"]["member"] == batch[0].member


def test_a_voter_that_drops_members(qwen, isolated_cache) -> None:
    """Members whose weight is at or below the threshold are out of the vote and score None."""
    from voters import Voter

    config = load_config(ROOT / "configs" / "default.yaml")
    config.members = ["ReFree", "BM25@1", "Wiki@1"]
    voter = Voter.uniform(3, metrics=("em", "f1"), members=config.members)
    voter.retriever_weights_ = voter.retriever_weights_.copy()
    voter.retriever_weights_[0] = 0.05
    ensemble = Ensemble(config, reader=qwen, voter=voter)
    result = ensemble.answer("what is the capital of france", lazy=False)
    assert result.members["ReFree"].score is None
    assert result.member in {"BM25@1", "Wiki@1"}
    lazy = ensemble.answer("what is the capital of france")  # a dropped member never runs
    assert "ReFree" in lazy.skipped and "ReFree" not in lazy.members and lazy.answer == result.answer
