"""The Python API under the server: member selection, failure isolation (`degraded`), `explain`, the reader lock.

Real SmolLM2 over the demo corpus; the failing and hanging members are LangChain retrievers defined here and
joined through the `langchain` source type (tests/test_server.py uses them the same way over HTTP).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from eor import Ensemble
from eor.core.answers import exact_match, token_f1
from eor.core.config import load_config
from eor.core.errors import InputError, RetrieverError
from tests.conftest import DEMO
from voters.codecs import save_voter

MEMBERS = ["ReFree", "BM25@1", "BM25@3", "Boom", "Sloth", "Picky", "Verbose"]


class Exploding(BaseRetriever):
    """Fails on every query."""

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        raise ValueError("index offline")


class Sleepy(BaseRetriever):
    """Hangs (far past any member timeout of these tests) before answering."""

    seconds: float = 120.0

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        time.sleep(self.seconds)
        return [Document(page_content="too late")]


class Picky(BaseRetriever):
    """Fails on questions that mention 'explode', answers the others."""

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        if "explode" in query:
            raise RuntimeError("cannot parse the query")
        return [Document(page_content="Leonardo da Vinci painted the Mona Lisa.", metadata={"title": "Mona Lisa"})]


class Verbose(BaseRetriever):
    """One passage far longer than the reader's context: generation fails for this member only."""

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        return [Document(page_content=" ".join(f"word{i} of a very long passage." for i in range(2500)))]


def server_test_config(folder: Path, members: list[str], name: str = "server-test") -> Path:
    """SmolLM2 over the demo corpus, plus the test sources above (no model loads for them)."""
    module = __name__
    text = f"""
name: {name}
reader: {{model: smollm2-135m, max_tokens: 8, context_tokens: 2048}}
corpus: {{path: {DEMO / "corpus.jsonl"}}}
sources:
  Boom: {{type: langchain, params: {{class: "{module}:Exploding"}}}}
  Sloth: {{type: langchain, params: {{class: "{module}:Sleepy"}}}}
  Picky: {{type: langchain, params: {{class: "{module}:Picky"}}}}
  Verbose: {{type: langchain, params: {{class: "{module}:Verbose"}}}}
members: [{", ".join(members)}]
voter: {{metrics: [em, f1]}}
max_document_words: 100000
"""
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def ensemble(smollm2, tmp_path_factory):
    import os

    folder = tmp_path_factory.mktemp("server-api")
    previous = os.environ.get("EOR_CACHE")
    os.environ["EOR_CACHE"] = str(folder / "cache")
    try:
        built = Ensemble.from_config(server_test_config(folder, MEMBERS), reader=smollm2)
        built.retrievers["BM25@3"].batch(["warm up"])  # the BM25 index is built outside any timeout
        yield built
    finally:
        if previous is None:
            os.environ.pop("EOR_CACHE", None)
        else:
            os.environ["EOR_CACHE"] = previous


def test_a_hanging_and_a_failing_member_are_left_out_of_the_vote(ensemble) -> None:
    result = ensemble.answer(
        "who painted the mona lisa", members=["ReFree", "BM25@1", "Boom", "Sloth"], member_timeout=2.0, lazy=False
    )
    assert 2.0 <= result.timings["retrieval"] < 20  # the hang (120 s) was not waited for
    assert list(result.members) == ["ReFree", "BM25@1"]
    assert result.degraded == {
        "Boom": "retrieval failed: ValueError: index offline",
        "Sloth": "retrieval timed out after 2 s",
    }
    assert result.member in ("ReFree", "BM25@1") and result.answer == result.members[result.member].answer
    data = result.to_dict()
    assert data["degraded"] == ["Boom", "Sloth"] and data["degraded_reasons"] == result.degraded
    assert result.to_record().to_dict()["degraded"] == ["Boom", "Sloth"]
    # The vote over what is left is the vote over that subset (hand-worked: two members, uniform weights).
    a, b = (result.members[name].answer for name in ("ReFree", "BM25@1"))
    expected = 0.5 * (0.5 * exact_match(a, b) + 0.5 * token_f1(a, b))
    assert result.members["ReFree"].score == pytest.approx(expected)
    assert result.members["BM25@1"].score == pytest.approx(expected)
    assert result.member == "ReFree"  # a tie goes to the first member
    # While the hung retrieval still runs, the member is skipped at once instead of starting another thread.
    again = ensemble.answer("who painted the sistine chapel", members=["ReFree", "Sloth"], member_timeout=2.0)
    assert again.degraded == {"Sloth": "retrieval skipped: an earlier retrieval that timed out is still running"}


def test_nothing_failing_keeps_the_result_object_unchanged(ensemble) -> None:
    result = ensemble.answer("what is the capital of france", members=["ReFree", "BM25@1"])
    assert result.degraded == {}
    assert set(result.to_dict()) == {
        "id",
        "question",
        "answer",
        "abstained",
        "probability",
        "member",
        "given_by",
        "sources",
        "members",
        "timings",
        "stages",
    }
    assert "degraded" not in result.to_record().to_dict()


def test_one_bad_question_does_not_cost_the_others_a_member(ensemble) -> None:
    good, bad = "who painted the mona lisa", "why did the star explode"
    results = ensemble.answer_batch([good, bad], members=["ReFree", "Picky"])
    assert list(results[0].members) == ["ReFree", "Picky"] and results[0].degraded == {}
    assert list(results[1].members) == ["ReFree"]
    assert results[1].degraded == {"Picky": "retrieval failed: RuntimeError: cannot parse the query"}
    assert [r.question for r in results] == [good, bad]


def test_a_prompt_over_the_context_is_cut_to_fit_with_a_warning(ensemble, caplog) -> None:
    """Verbose's one passage (15,000 words) is far over SmolLM2's 2,048-token context: its document is
    halved until the prompt fits, the member answers, the cut is recorded and logged."""
    result = ensemble.answer("who painted the mona lisa", members=["ReFree", "Verbose"], lazy=False)
    assert set(result.members) == {"ReFree", "Verbose"} and not result.degraded
    cut = result.members["Verbose"].document_cut
    words = len(" ".join(f"word{i} of a very long passage." for i in range(2500)).split(" "))
    assert cut["words"] == words and cut["kept_words"] < 2048
    assert len(result.members["Verbose"].prompt.split()) < cut["kept_words"] + 40
    assert result.to_record().to_dict()["members"]["Verbose"]["document_cut"] == cut
    assert "document_cut" not in result.to_record().to_dict()["members"]["ReFree"]
    assert any("over the reader's context" in message for message in caplog.messages)


def test_every_member_failing_is_an_error(ensemble) -> None:
    with pytest.raises(RetrieverError, match="every member failed on question .*Boom: retrieval failed"):
        ensemble.answer("who painted the mona lisa", members=["Boom"])
    with pytest.raises(ValueError, match="index offline"):  # strict: the member's own error, as before
        ensemble.answer("who painted the mona lisa", members=["ReFree", "Boom"], strict=True)


@pytest.mark.parametrize(
    ("members", "message"),
    [
        (["BM25@1", "Nope"], "unknown member(s) 'Nope'; available: ReFree, BM25@1, BM25@3"),
        ([], "name at least one member"),
        (["BM25@1", "BM25@1"], "'BM25@1' named more than once"),
        ("BM25@1", "must be a list of member names"),
    ],
)
def test_member_selection_is_checked(ensemble, members, message: str) -> None:
    with pytest.raises(InputError) as error:
        ensemble.answer("who painted the mona lisa", members=members)
    assert message in str(error.value)


def test_members_and_timeout_arguments(ensemble) -> None:
    assert ensemble.members == MEMBERS
    assert ensemble.select(["BM25@3", "ReFree"]) == ["ReFree", "BM25@3"]  # the ensemble's order
    with pytest.raises(InputError, match="member_timeout must be a positive number"):
        ensemble.answer("who painted the mona lisa", members=["ReFree"], member_timeout=0)


def test_explain_shows_the_arithmetic_of_the_vote(smollm2, tmp_path, isolated_cache) -> None:
    from voters import Voter

    config = load_config(server_test_config(tmp_path, ["ReFree", "BM25@1", "BM25@3", "Boom"]))
    voter = Voter.uniform(4, metrics=("em", "f1"), members=config.members)
    voter.retriever_weights_ = voter.retriever_weights_.copy()
    voter.retriever_weights_[1] = 0.05  # BM25@1 is dropped by its weight
    ensemble = Ensemble(config, reader=smollm2, voter=voter)
    result = ensemble.answer("who was the first president of the united states", lazy=False)  # BM25@1 runs too
    explained = ensemble.explain(result)
    assert explained["degraded"] == {"Boom": "retrieval failed: ValueError: index offline"}
    assert explained["metric_weights"] == {"em": 0.5, "f1": 0.5} and explained["pooling"] == "mean"
    members = explained["members"]
    assert list(members) == ["ReFree", "BM25@1", "BM25@3"]
    assert members["BM25@1"]["dropped"] and members["BM25@1"]["score"] is None
    assert members["BM25@1"]["pooled"] is None and members["BM25@1"]["weight"] == 0.05
    answers = {name: out.answer for name, out in result.members.items()}
    for name, other in (("ReFree", "BM25@3"), ("BM25@3", "ReFree")):
        a, b = answers[name], answers[other]
        pair = members[name]["similarity"][other]
        assert pair["em"] == exact_match(a, b) and pair["f1"] == pytest.approx(token_f1(a, b))
        assert pair["combined"] == pytest.approx(0.5 * pair["em"] + 0.5 * pair["f1"])
        # The dropped member is not one of the others in the pool: the mean runs over the one active other.
        assert members[name]["pooled"] == pytest.approx(pair["combined"])
        assert members[name]["score"] == pytest.approx(0.5 * pair["combined"])
        assert set(members[name]["similarity"]) == {"BM25@1", other}
    assert [name for name, entry in members.items() if entry["chosen"]] == [result.member]


def test_a_learned_selector_votes_and_explains(smollm2, tmp_path, isolated_cache) -> None:
    """A weights file of the answer selector drives the ensemble like the paper's voter: the chosen member is
    the argmax of its log-odds, a failed member is left out, and explain() gives each feature's share."""
    from voters import AnswerSelector, VoteBatch, load_voter

    config = load_config(server_test_config(tmp_path, ["ReFree", "BM25@1", "BM25@3", "Boom"]))
    answers = [["x", f"g{q}", "y", "z"] for q in range(6)] + [["g", "a", "b", "c"] for q in range(6)]
    golds = [[f"g{q}"] for q in range(6)] + [["g"]] * 6
    passages = [[[], [f"g{q} passage"], ["y"], []] for q in range(6)] + [[[], ["a"], ["b"], []]] * 6
    selector = AnswerSelector(metrics=("em", "f1"), members=config.members)
    selector.fit(VoteBatch(answers, passages, [f"q{q}" for q in range(12)]), golds)
    ensemble = Ensemble(
        config, reader=smollm2, voter=load_voter(save_voter(selector, tmp_path / "s.json"), config.members)
    )
    result = ensemble.answer("who was the first president of the united states")
    assert result.degraded == {"Boom": "retrieval failed: ValueError: index offline"}
    names = list(result.members)
    scores = selector.decision_scores(
        [[result.members[n].answer for n in names]],
        [[[p["text"] for p in result.members[n].passages] for n in names]],
        [result.question],
        [config.members.index(n) for n in names],
    )[0]
    assert result.member == names[int(np.argmax(scores))]
    assert [result.members[n].score for n in names] == pytest.approx(scores.tolist())
    explained = ensemble.explain(result)
    assert explained["voter"] == "selector" and explained["member"] == result.member
    for name, score in zip(names, scores, strict=True):
        entry = explained["members"][name]
        contributions = sum(f["contribution"] for f in entry["features"].values())
        assert contributions + selector.intercept_ == pytest.approx(score)
        assert entry["features"][f"member:{name}"]["value"] == 1.0 and entry["features"]["member:Boom"]["value"] == 0.0


def test_the_reader_is_used_by_one_thread_at_a_time() -> None:
    """A foreign reader gets a lock per reader object, shared by every generation stage over it; a backend
    that is not thread-safe owns its lock (BatchedReader); a thread-safe one is not serialised."""
    from eor.pipeline.stages.generation import GenerationStage, reader_lock
    from eor.readers.base import BatchedReader

    class Counting:
        def __init__(self) -> None:
            self.inside = 0
            self.most = 0
            self.guard = threading.Lock()

        def step(self, prompts: list[str]) -> list[str]:
            with self.guard:
                self.inside += 1
                self.most = max(self.most, self.inside)
            time.sleep(0.02)
            with self.guard:
                self.inside -= 1
            return [f"x{prompt}" for prompt in prompts]

    class Foreign(Counting):
        name = "counting"

        def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
            return self.step(prompts)

    class Backend(Counting, BatchedReader):
        name = "backend"

        def __init__(self, thread_safe: bool) -> None:
            Counting.__init__(self)
            BatchedReader.__init__(self)
            self.thread_safe = thread_safe

        def _generate_batch(self, prompts: list[str], max_tokens: int) -> list[str]:
            return self.step(prompts)

    def hammer(reader) -> list[GenerationStage]:
        stages = [GenerationStage(reader) for _ in range(2)]  # two ensembles over one reader
        threads = [
            threading.Thread(target=lambda s=s, n=n: [s.generate([f"{n}-{i}"]) for i in range(5)])
            for n, s in enumerate(stages * 2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return stages

    foreign = Foreign()
    assert reader_lock(foreign) is reader_lock(foreign)
    stages = hammer(foreign)
    assert foreign.most == 1 and stages[0].name == "counting" and stages[0].stats.generated == 10
    serial = Backend(thread_safe=False)
    hammer(serial)
    assert serial.most == 1
    parallel = Backend(thread_safe=True)
    hammer(parallel)
    assert parallel.most > 1
