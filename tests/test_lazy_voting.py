"""Exact lazy voting (voters.lazy): hand-worked bounds, and the lazy choice equals the full vote's."""

from __future__ import annotations

import numpy as np
import pytest

from voters import VoteBatch, Voter
from voters.lazy import lazy_decision, needed_members, simulate, supports_lazy_voting


def voter(weights: list[float], metrics=("em",), pooling: str = "mean", grounding: float | None = None) -> Voter:
    built = Voter.uniform(
        len(weights), metrics=metrics, pooling=pooling, grounding=grounding is not None, grounding_weight=grounding
    )
    built.retriever_weights_ = np.array(weights, dtype=float)
    return built


def test_bounds_by_hand():
    # em only: ω^s = 0.6 (uniform, capped at max_weight), N = 3 others for each member.
    v = voter([0.6, 0.6, 0.6, 0.2])
    # m0: known similarities 0.6 + 0.6, pending one in [0, 0.6]: pool in [0.4, 0.6], score ≥ 0.24;
    # the pending member scores at most 0.2 · 0.6 = 0.12 < 0.24: stop with "a".
    state = lazy_decision(v, {0: "a", 1: "a", 2: "a"}, {}, [3])
    assert state.stop and state.answer == "a" and state.leader == 0
    # m2 answers "b": m0's pool ≥ 0.6 / 3, score ≥ 0.12, and the pending member may reach 0.12 too: go on.
    assert not lazy_decision(v, {0: "a", 1: "a", 2: "b"}, {}, [3]).stop
    # with every weight equal, a pending member can always still win
    assert not lazy_decision(voter([0.5] * 4), {0: "a", 1: "a", 2: "a"}, {}, [3]).stop
    # nothing pending: the full vote
    assert lazy_decision(v, {0: "a", 1: "b", 2: "b", 3: "c"}, {}, []).answer == "b"


def test_dropped_members_need_not_run_and_plurality_never_stops_early():
    v = voter([0.6, 0.05, 0.6, 0.6])
    assert needed_members(v) == [0, 2, 3]
    assert lazy_decision(v, {0: "a", 2: "a"}, {}, [1]).stop  # member 1 is dropped: nothing is pending
    assert not supports_lazy_voting(voter([0.6] * 3, pooling="plurality"))
    assert not lazy_decision(voter([0.6, 0.6, 0.2], pooling="plurality"), {0: "a", 1: "a"}, {}, [2]).stop


def test_grounding_counts_in_the_bounds():
    # ω^g = 0.5; m0 grounded. m0's pool over 2 others: [0.6/2, 1.2/2]; score ≥ 0.6 · (0.3 + 0.5) = 0.48.
    # The pending member: ≤ 0.3 · (0.6 + 0.5) = 0.33: stop.
    v = voter([0.6, 0.6, 0.3], grounding=0.5)
    state = lazy_decision(v, {0: "paris", 1: "paris"}, {0: ["paris is the capital"], 1: []}, [2])
    assert state.stop and state.answer == "paris"
    # ungrounded, m0 scores ≥ 0.6 · 0.3 = 0.18 < 0.33: go on
    assert not lazy_decision(v, {0: "paris", 1: "paris"}, {0: [], 1: []}, [2]).stop


@pytest.mark.parametrize("pooling", ["mean", "max", "majority"])
@pytest.mark.parametrize("use_grounding", [False, True])
def test_lazy_choice_equals_the_full_vote(pooling, use_grounding):
    rng = np.random.default_rng(7)
    vocabulary = ["paris", "london", "paris france", "rome", "the city of paris", ""]
    for _ in range(60):
        n = int(rng.integers(2, 7))
        weights = rng.choice([0.05, 0.2, 0.4, 0.6], size=n).tolist()
        v = voter(weights, metrics=("em", "f1"), pooling=pooling, grounding=0.3 if use_grounding else None)
        answers = [str(rng.choice(vocabulary)) for _ in range(n)]
        passages = [["paris and rome"] if rng.uniform() < 0.5 else [] for _ in range(n)]
        full = answers[int(v.predict(VoteBatch([answers], [passages]))[0])]
        order = rng.permutation(n).tolist()
        lazy, ran = simulate(v, answers, passages, order)
        assert lazy == full
        assert set(ran) <= set(needed_members(v))


# -- the ensemble's lazy path (Ensemble.answer), with a scripted reader over the demo corpus ------------------


class Scripted:
    """A BatchedReader whose answer is worked out from the prompt (same answer for every prompt unless a
    word in `by_word` occurs in it), reporting token counts as a backend would."""

    def __new__(cls, *args, **kwargs):
        from eor.readers.base import BatchedReader, Generated

        class _Scripted(BatchedReader):
            name = "scripted"

            def __init__(self, answer: str, by_word: dict[str, str] | None = None) -> None:
                super().__init__()
                self.answer, self.by_word, self.prompts = answer, by_word or {}, []

            def _generate_batch(self, prompts, max_tokens):
                self.prompts += prompts
                out = []
                for prompt in prompts:
                    text = next((a for w, a in self.by_word.items() if w in prompt), self.answer)
                    out.append(Generated(text, 0.01, len(prompt.split()), 2, 0.008, 0.002))
                return out

        return _Scripted(*args, **kwargs)


def lazy_ensemble(tmp_path, reader, weights, pooling="mean"):
    from eor.core.config import load_config
    from eor.pipeline.ensemble import Ensemble
    from tests.conftest import DEMO

    path = tmp_path / "lazy.yaml"
    path.write_text(
        f"name: lazy\ncorpus: {{path: {DEMO / 'corpus.jsonl'}}}\n"
        "members: [BM25@3, BM25@2, BM25@1, ReFree]\nvoter: {metrics: [em]}\n"
    )
    return Ensemble(load_config(path), reader=reader, voter=voter(weights, pooling=pooling), cache=False)


def test_the_ensemble_stops_once_the_rest_cannot_change_the_answer(tmp_path, isolated_cache):
    # Cheapest first by the notation's prior: ReFree, BM25@1, BM25@2, then BM25@3 (weight 0.2). Once the
    # first three agree, BM25@3 scores at most 0.2 · 0.6 < their lower bound (test_bounds_by_hand): it is skipped.
    reader = Scripted("Paris")
    ensemble = lazy_ensemble(tmp_path, reader, [0.2, 0.6, 0.6, 0.6])
    question = "what is the capital of france"
    lazy = ensemble.answer(question)
    assert lazy.skipped == ["BM25@3"] and list(lazy.members) == ["BM25@2", "BM25@1", "ReFree"]
    assert len(reader.prompts) == 3
    full = ensemble.answer(question, lazy=False)
    assert full.answer == lazy.answer == "Paris" and not full.skipped and len(full.members) == 4
    # what each stage did, per question: the reader's prompts, tokens and seconds as the backend reported them
    assert lazy.stages["voting"]["members_run"] == 3 and lazy.stages["voting"]["members_skipped"] == 1
    reader_work = lazy.stages["generation"]["reader"]
    assert reader_work["generated"] == 3 and reader_work["generated_tokens"] == 6
    assert reader_work["prompt_seconds"] == pytest.approx(0.024) and reader_work["cache_hits"] == 0
    assert full.stages["generation"]["reader"]["generated"] == 4  # no cache here: every member's prompt again
    assert lazy.to_dict()["skipped"] == ["BM25@3"] and "skipped" not in lazy.to_record().to_dict()
    # measured costs replace the prior: the member order follows what this ensemble measured
    assert set(ensemble.runner.costs.measured) == {"ReFree", "BM25@1", "BM25@2", "BM25@3"}


def test_the_vote_stage_is_built_once_per_ensemble(tmp_path, isolated_cache, monkeypatch):
    # the vote stage reads the voter's P(right) model (voters.right) when it is built: once per ensemble, not
    # once per member or question, whichever way the questions are answered
    from eor.pipeline.stages import voting

    built = []
    original = voting.VoteStage.__init__

    def counted(self, *args, **kwargs):
        built.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(voting.VoteStage, "__init__", counted)
    ensemble = lazy_ensemble(tmp_path, Scripted("Paris"), [0.2, 0.6, 0.6, 0.6])
    for lazy in (True, False):
        ensemble.answer("what is the capital of france", lazy=lazy)
    ensemble.answer_batch(["what is the capital of france", "who painted the mona lisa"])
    assert built == [ensemble.voting]


def test_a_dissenting_member_keeps_the_vote_going_and_unbounded_voters_run_everyone(tmp_path, isolated_cache):
    # ReFree (no passages) dissents: nothing can be settled before every needed member has answered.
    reader = Scripted("Lyon", by_word={"Assuming the following": "Paris"})
    ensemble = lazy_ensemble(tmp_path, reader, [0.6, 0.6, 0.6, 0.6])
    result = ensemble.answer("what is the capital of france")
    full = ensemble.answer("what is the capital of france", lazy=False)
    assert not result.skipped and result.answer == full.answer and result.member == full.member
    plurality = lazy_ensemble(tmp_path, Scripted("Paris"), [0.2, 0.6, 0.6, 0.6], pooling="plurality")
    assert not plurality.answer("what is the capital of france").skipped  # plurality cannot be bounded
