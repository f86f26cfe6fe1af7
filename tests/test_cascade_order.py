"""A cascade is charged as it runs (issue 60, item 1): each member right after the member before it in the
cascade's own order, keeping the prompt prefix the reader keeps (eor.runs.costs.PromptReplay through
voters.spend.StepCosts), checked against the reader evaluating the prompts in that order; and the order search
charging each member after the member chosen before it."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from eor.core.config import load_config
from eor.evaluation.bench.report import build_report
from eor.evaluation.bench.vote import vote
from eor.learning.judge_cascade import reader_tokens
from eor.readers import build_reader
from eor.runs.costs import member_costs, prompt_replay, reader_seconds, trained_rates
from eor.runs.run_data import RunData, load_run
from tests.conftest import ROOT
from tests.test_cascade import ORDER, POOL, hand_cascade_document
from voters import load_voter
from voters.cascade_fit import greedy_order
from voters.codecs import voter_from_document
from voters.spend import FixedCosts

RATES = {"prompt": 281.0, "generated": 60.0}
#: a long instruction that ReFree's and BM25@2's prompts open with, and BM25@1's does not
SHARED = " ".join(f"Rule {i}: answer with a short phrase taken from what you know or read." for i in range(30))
QUESTIONS = ["who painted the mona lisa", "what is the capital of france"]


def _prompts(question: str) -> dict[str, str]:
    return {
        "ReFree": f"{SHARED}\nQuestion: {question}\nAnswer:",
        "BM25@1": f"Passage: the painting hangs in the Louvre, in Paris.\nQuestion: {question}\nAnswer:",
        "BM25@2": f"{SHARED}\nPassage: Leonardo worked in Florence and Milan.\nQuestion: {question}\nAnswer:",
    }


def _evaluate(reader, question: str, order: list[str]) -> list[tuple[int, int, int]]:
    """Each member's (prompt tokens evaluated, kept, generated) when the reader answers in `order`, from an
    empty cache."""
    reader.forget()
    prompts = _prompts(question)
    done = []
    for name in order:
        (generated,) = reader.generate_timed([prompts[name]], max_tokens=4)
        done.append((generated.prompt_tokens, generated.reused_tokens, generated.generated_tokens))
    return done


def test_a_cascade_is_charged_in_its_own_order_as_the_reader_evaluates_it(smollm2) -> None:
    # `eor run` answered in the pool's order (ReFree, BM25@1, BM25@2): BM25@2 followed BM25@1 and kept nothing.
    # The cascade runs BM25@1, BM25@2, ReFree: ReFree follows BM25@2 and keeps their shared instruction.
    recorded = [_evaluate(smollm2, q, POOL) for q in QUESTIONS]
    data = RunData(
        list(POOL),
        [f"q{i}" for i in range(len(QUESTIONS))],
        [["a"] * 3] * len(QUESTIONS),
        [["a"]] * len(QUESTIONS),
        [[[]] * 3] * len(QUESTIONS),
        [[""] * 3] * len(QUESTIONS),
        QUESTIONS,
        [[1.0] * 3] * len(QUESTIONS),
        [[{"prompt": p, "reused": r, "generated": g} for p, r, g in row] for row in recorded],
        [],
        [[_prompts(q)[name] for name in POOL] for q in QUESTIONS],
    )
    replay = prompt_replay(data, smollm2.chat_tokens, RATES, smollm2.prefix_chunk)
    cascade = voter_from_document(hand_cascade_document(), "hand-made", POOL)
    assert cascade.order_ == ORDER != POOL
    everything = np.full(len(QUESTIONS), len(ORDER) - 1)  # every step run
    for q, question in enumerate(QUESTIONS):
        ran = dict(zip(ORDER, _evaluate(smollm2, question, ORDER), strict=True))
        before = None
        for name in ORDER:  # the tokens it evaluates: its prompt less what it keeps of the one before it
            m = POOL.index(name)
            assert replay.total[q, m] - replay.kept(before, m)[q] == ran[name][0], name
            before = m
        assert ran["ReFree"][1] > 0 and recorded[q][POOL.index("BM25@2")][1] == 0  # the orders differ in reuse
        paid = sum(reader_seconds(float(p), float(g), RATES) for p, _, g in ran.values())
        assert cascade.spent(replay, everything)[q] == pytest.approx(paid)
        as_recorded = sum(reader_seconds(float(p), float(g), RATES) for p, _, g in recorded[q])
        assert as_recorded > paid  # charged in the records' order, the cascade would seem dearer than it is


class _Scores:
    """Held-out accuracy of each member subset (a stand-in for voters.cascade_fit.StepScores)."""

    names = ["M0", "M1", "M2"]
    rows = np.arange(2)
    accuracy = {(0,): 0.4, (1,): 0.3, (2,): 0.3, (0, 1): 0.5, (0, 2): 0.5, (0, 1, 2): 0.55, (0, 2, 1): 0.55}

    def of(self, subset):
        class Held:
            accuracy = self.accuracy[tuple(subset)]

        return Held


class _AfterM0:
    """Every member costs 1 s, but M2 costs 0.2 s right after M0 (their prompts share a prefix)."""

    def after(self, previous, member):
        return np.full(2, 0.2 if (previous, member) == (0, 2) else 1.0)

    def in_order(self, order, members):
        raise AssertionError("the search charges members one by one")


def test_the_order_search_charges_each_member_after_the_one_chosen_before_it() -> None:
    # After M0 (gain 0.4 a second), M1 and M2 each gain 0.1: at a second each, the tie goes to the earlier (M1);
    # charged after M0, M2 gains 0.1 / 0.2 = 0.5 a second and comes first.
    assert greedy_order(_Scores(), FixedCosts(np.ones((2, 3)))) == [0, 1, 2]
    assert greedy_order(_Scores(), _AfterM0()) == [0, 2, 1]


def test_eor_bench_charges_the_shipped_cascade_in_its_own_order(tmp_path) -> None:
    """`eor bench --config` with the shipped cascade: its reader seconds are each member's run right after the
    member before it in the cascade's order (worked here member by member from the replay), not as recorded."""
    records = tmp_path / "dev40.jsonl.gz"
    with gzip.open(ROOT / "docs/records/nq-dev.jsonl.gz", "rt") as source, gzip.open(records, "wt") as out:
        out.writelines(line for _, line in zip(range(41), source, strict=False))  # the header and 40 questions
    config = load_config(ROOT / "configs/nq-offline.yaml")
    weights = ROOT / "docs/weights/nq-offline-cascade.json"
    tokens = reader_tokens(build_reader(config.reader), config)
    report = build_report(records, weights, members=config.members, resamples=10)
    replayed = build_report(records, weights, members=config.members, resamples=10, tokens=tokens)
    assert report["cost"]["charged"] == "records' order" and replayed["cost"]["charged"] == "cascade order"
    cascade = load_voter(weights)
    data = load_run(records, config.members)
    replay = prompt_replay(data, tokens.tokenize, member_costs(data, rates=trained_rates(cascade)).rates, tokens.chunk)
    voted = vote(data, weights, None)  # where the cascade stops on each question, as the bench replays it
    by_hand = []
    for q, stop in enumerate(voted.stops):
        before, seconds = None, 0.0
        for name in cascade.order_[: int(stop) + 1]:
            m = data.names.index(name)
            seconds += float(replay.after(before, m)[q])
            before = m
        by_hand.append(seconds)
    assert replayed["cost"]["eor_seconds"] == pytest.approx(float(np.mean(by_hand)))
    assert replayed["cost"]["eor_seconds"] != pytest.approx(report["cost"]["eor_seconds"])
