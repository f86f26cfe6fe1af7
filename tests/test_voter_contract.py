"""The voter contract (voters.protocol): what the pipeline reads of a voter is declared by its class and checked at
the door, never looked for; a pool answering with a judge voter goes through the ensemble's one decision path; and
a walk of `eor ask` with the judged cascade reads each weights file once and builds each model once."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import voters.loading
import voters.weights_file
from eor.cli import main
from eor.core.answers import normalize_answer
from eor.core.errors import ConfigError, InputError, NotFittedError
from eor.pipeline.explanation import explain_vote
from eor.pipeline.stages.judged import JudgeStage
from eor.pipeline.stages.voting import VoteStage
from tests.conftest import DEMO, ROOT
from voters.cascade import Cascade
from voters.codecs import CascadeCodec, JudgeCodec
from voters.judge_selector import JudgeVoter
from voters.loading import voter_kinds
from voters.protocol import DECLARED, SimpleVoter, check_voter, check_voter_class
from voters.right import RightModel


def test_every_voter_kind_declares_what_the_pipeline_reads() -> None:
    for kind, cls in voter_kinds().items():
        assert check_voter_class(cls) is cls, kind
        assert all(hasattr(cls, name) for name in DECLARED), kind
    assert Cascade.in_steps and not any(cls.in_steps for kind, cls in voter_kinds().items() if kind != "cascade")


class Bare:
    """Every method of a voter, nothing declared: what a foreign voter written before the contract looks like."""

    kind = "bare"

    def fit(self, X, y=None): ...
    def decision_scores(self, answers, passages=None, questions=None, members=None): ...
    def decision_function(self, X): ...
    def predict(self, X): ...
    def score(self, X, y=None): ...
    def explain_row(self, answers, passages, question, members): ...
    def describe(self): ...
    def save(self, path, **meta): ...
    @classmethod
    def from_document(cls, document, source, members=None): ...


def test_a_voter_that_declares_nothing_is_refused_at_the_door_naming_what_it_lacks() -> None:
    with pytest.raises(ConfigError, match="lacks in_steps, admits_bound, uses_confidence_.*SimpleVoter"):
        check_voter(Bare())
    with pytest.raises(ConfigError, match="lacks in_steps"):
        explain_vote(Bare(), ["A"], None)  # type: ignore[arg-type]

    class Majority(SimpleVoter):  # the documented base declares every one (docs/extending.md)
        kind = "majority"

    voter = Majority(["A", "B"])
    assert check_voter(voter) is voter and voter.metadata_ == {} and voter.source_ is None
    assert not voter.in_steps and not voter.admits_bound and voter.active_members_ is None
    with pytest.raises(TypeError):  # the default is read-only: a voter's metadata is its own, set whole
        voter.metadata_["pool"] = {}  # type: ignore[index]


def _walk_config(tmp_path: Path) -> Path:
    """configs/nq-judge-cascade.yaml as shipped (its members, voter, judge and their weights files), over the demo
    corpus so that a fresh machine builds its indexes in seconds."""
    text = (ROOT / "configs" / "nq-judge-cascade.yaml").read_text()
    text = text.replace("../../shared/data/corpus/wiki-nq.jsonl", str(DEMO / "corpus.jsonl"))
    text = text.replace("../docs/weights/", str(ROOT / "docs" / "weights") + "/")
    config = tmp_path / "nq-judge-cascade.yaml"
    config.write_text(text)
    return config


def test_a_walk_of_eor_ask_with_the_judged_cascade_reads_each_file_once_and_builds_each_model_once(
    tmp_path, isolated_cache, monkeypatch, capsys
) -> None:
    reads: Counter[str] = Counter()
    built: Counter[str] = Counter()
    read_signed = voters.weights_file.read_signed

    def counted(path):
        reads[Path(path).name] += 1
        return read_signed(path)

    monkeypatch.setattr(voters.weights_file, "read_signed", counted)
    monkeypatch.setattr(voters.loading, "read_signed", counted)
    for cls, name in ((RightModel, "from_dict"), (CascadeCodec, "read"), (JudgeCodec, "read")):
        held = vars(cls)[name]
        method = held.__func__ if isinstance(held, classmethod) else held

        def counting(owner, *args, _method=method, _name=f"{cls.__name__}.{name}", **kwargs):
            built[_name] += 1
            return _method(owner, *args, **kwargs)

        monkeypatch.setattr(cls, name, classmethod(counting) if isinstance(held, classmethod) else counting)
    stages: list[VoteStage] = []
    monkeypatch.setattr(JudgeStage, "check_risk", _recording(JudgeStage.check_risk, stages))

    assert main(["ask", "who painted the mona lisa", "--config", str(_walk_config(tmp_path)), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert reads == {"nq-offline-judge-cascade.json": 1, "nq-offline-judge.json": 1}
    assert built == {"CascadeCodec.read": 1, "JudgeCodec.read": 1, "RightModel.from_dict": 1}
    assert stages and all(isinstance(stage, JudgeStage) for stage in stages)  # the one decision path's stage
    assert answer["cascade"]["ran"]  # the cascade's steps ran, in their order


def _recording(method, stages):
    def check_risk(self, risk, every_member=False):
        stages.append(self)
        return method(self, risk, every_member)

    return check_risk


def test_each_voter_kind_is_one_class_and_holds_no_file_format(tmp_path) -> None:
    from voters.codecs import CODECS, save_voter
    from voters.estimator import VoterEstimator
    from voters.judge_selector import JudgeSelector
    from voters.loading import load_voter

    classes = voter_kinds()
    for kind in CODECS:
        cls = classes[kind]
        assert cls.__bases__ == (VoterEstimator,), f"{kind}: one class, no model base"
        held = [name for name in ("save", "load", "from_document", "to_document") if hasattr(cls, name)]
        assert not held, f"{kind} holds its weights file ({held}): its codec does (voters.codecs)"
    assert not any(hasattr(JudgeSelector, name) for name in ("from_document", "to_document"))
    # every shipped weights file loads through its kind's codec and saves again to the same bytes
    for path in sorted((ROOT / "docs" / "weights").glob("*.json")):
        if path.name.startswith("nq-offline16"):  # written before the files' fields took today's order; they load
            continue
        assert save_voter(load_voter(path), tmp_path / path.name).read_bytes() == path.read_bytes(), path.name


MEMBERS7 = ["ReFree", "PK", "BM25@1", "BM25@3", "Wiki@1", "Wiki@3", "BM25@2&Wiki@2"]


def _judged_batch(count: int):
    """The first `count` training questions scored by the judge (the `pointed` rule) as a VoteBatch holding the
    judge's candidates, and the same questions as eor.learning.judge_training makes them (features, which are
    right)."""
    from eor.learning.judge_training import judged_questions
    from eor.runs.records import read_records
    from voters.batch import VoteBatch

    records = read_records(ROOT / "docs" / "records" / "nq-train-pointed.jsonl.gz")[:count]
    judged = judged_questions(records, MEMBERS7, "pointed", 10)
    batch = VoteBatch(
        [[r.members[m].answer for m in MEMBERS7] for r in records],
        [[r.members[m].passage_texts for m in MEMBERS7] for r in records],
        [r.question for r in records],
        golds=[r.answers for r in records],
        candidates=[q.features for q in judged],
    )
    return batch, judged


def test_the_judge_voter_is_a_voter_kind_that_chooses_among_the_candidates() -> None:
    import numpy as np

    from voters.judge_selector import JudgeSelector

    batch, judged = _judged_batch(120)
    levels = [(("votes", "evidence", "scores"), 10), (("votes", "evidence"), 5)]
    voter = JudgeVoter([JudgeSelector(families, spans) for families, spans in levels], MEMBERS7)
    assert voter.chooses == "candidates" and voter_kinds()["judge"] is JudgeVoter and check_voter(voter) is voter
    assert voter.fit(batch) is voter
    alone = JudgeSelector(*levels[0]).fit([q.features for q in judged], [q.right for q in judged])
    assert np.array_equal(voter.fits_[0].coef_, alone.coef_)  # each level fitted as the selector is on its own
    chosen, scores = voter.predict(batch), voter.decision_function(batch)
    widest = max(len(q.features.texts) for q in judged)
    assert scores.shape == (120, widest)
    for q, question in enumerate(judged):  # the live path's choice, and nothing past a question's candidates
        assert chosen[q] == voter.choose(question.features)[0].index
        assert np.isneginf(scores[q, len(question.features.texts) :]).all()
    by_hand = np.mean([question.right[chosen[q]] for q, question in enumerate(judged)])
    assert voter.score(batch) == by_hand > 0.3  # the mean exact match of the chosen candidates
    rows = [5, 0, 77]
    assert list(voter.predict(batch.take(rows))) == list(chosen[rows])  # a view chooses as the whole batch
    members = voter.decision_scores(batch.answers[:3], batch.passages[:3], batch.questions[:3])
    for q in range(3):  # the text fit over the members' answers alone: equal answers score the same
        answers = batch.answers[q]
        for m, n in ((m, n) for m in range(7) for n in range(7) if answers[m] and answers[m] == answers[n]):
            assert members[q, m] == members[q, n]
        assert all(np.isneginf(members[q, m]) == (not normalize_answer(answers[m])) for m in range(7))
    pair = [[row[4], row[0]] for row in batch.answers[:3]], [[row[4], row[0]] for row in batch.passages[:3]]
    subset = voter.decision_scores(*pair, batch.questions[:3], [4, 0])
    assert subset.shape == (3, 2)  # the answering members' scores, in the order asked
    with pytest.raises(InputError, match="the answers of the 2 answering members"):
        voter.decision_scores(batch.answers[:3], batch.passages[:3], batch.questions[:3], [4, 0])
    unfitted = JudgeVoter([JudgeSelector(families, spans) for families, spans in levels], MEMBERS7)
    with pytest.raises(NotFittedError, match="not fitted"):
        unfitted.predict(batch)


def test_a_judge_file_is_chosen_as_the_voter_or_carried_by_its_cascade(tmp_path) -> None:
    from voters.loading import choose_voter

    judge = ROOT / "docs" / "weights" / "nq-offline-judge.json"
    cascade = ROOT / "docs" / "weights" / "nq-offline-judge-cascade.json"
    alone = choose_voter(None, MEMBERS7, judge=judge)  # after every member, the judge is the voter
    assert isinstance(alone, JudgeVoter) and alone.judge_ is None
    carried = choose_voter(cascade, MEMBERS7, judge=judge, after="cascade")
    assert isinstance(carried, Cascade) and isinstance(carried.judge_, JudgeVoter)
    with pytest.raises(ConfigError, match="whose last step is the judge"):
        choose_voter(cascade, MEMBERS7, judge=judge)  # after every member, its steps would never answer
    with pytest.raises(ConfigError, match="would decide nothing"):
        choose_voter(ROOT / "docs" / "weights" / "nq-offline-cascade.json", MEMBERS7, judge=judge)
    with pytest.raises(ConfigError, match="needs the cascade trained with the judge"):
        choose_voter(None, MEMBERS7, judge=judge, after="cascade")
    with pytest.raises(ConfigError, match="name it in the config's judge: section"):
        choose_voter(judge, MEMBERS7)


def test_a_voter_class_written_before_chooses_and_judge_were_declared_still_loads_with_a_warning() -> None:
    class Older(Bare):  # every name the contract declared before the judge joined it
        in_steps = False
        admits_bound = False
        uses_confidence_ = False
        active_members_ = None
        metadata_: dict = {}
        source_ = sha256_ = train_score_ = dev_score_ = right_ = None

    with pytest.warns(DeprecationWarning, match="declares no chooses, judge_: chooses = 'members', judge_ = None"):
        assert check_voter_class(Older) is Older
    assert Older.chooses == "members" and Older.judge_ is None  # what the pipeline reads, given once


def test_a_config_s_judge_and_its_voter_are_checked_together() -> None:
    from eor.core.config import load_config
    from eor.pipeline.stages.judged import judged_by
    from voters.loading import load_voter

    alone, after = (load_config(ROOT / "configs" / name) for name in ("nq-judge.yaml", "nq-judge-cascade.yaml"))
    judge = load_voter(alone.resolve_path(alone.judge.weights))
    assert judged_by(alone, judge)[0] is judge  # the judge voter, after every member
    plain = load_voter(ROOT / "docs" / "weights" / "nq-offline-cascade.json")
    with pytest.raises(ConfigError, match="carries no judge"):  # a voter handed over beside a config's judge
        judged_by(alone, plain)
    with pytest.raises(ConfigError, match="set judge.after: members"):
        judged_by(after, judge)
    other = load_voter(ROOT / "docs" / "weights" / "nq-offline-judge-600.json")
    with pytest.raises(ConfigError, match="the config's judge.weights is"):
        judged_by(alone, other)


def test_a_judge_that_does_not_suit_the_config_is_refused_before_the_reader_is_built(monkeypatch) -> None:
    """The door of item 1: what a voter's judge needs of the config (its file, members, span rule, what is scored)
    is checked with the voter, before any model loads."""
    from eor.core.config import load_config
    from eor.pipeline.ensemble import Ensemble
    from voters.loading import load_voter

    def no_reader(*args: object, **kwargs: object) -> None:
        raise AssertionError("the reader was built before the judge was checked")

    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", no_reader)
    config = load_config(ROOT / "configs" / "nq-judge.yaml")
    other = load_voter(ROOT / "docs" / "weights" / "nq-offline-judge-600.json")
    with pytest.raises(ConfigError, match="the config's judge.weights is"):
        Ensemble(config, voter=other, cache=False)
