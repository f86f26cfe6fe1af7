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
from eor.core.errors import ConfigError
from eor.pipeline.ensemble import explain_vote
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

    classes = {**voter_kinds(), JudgeVoter.kind: JudgeVoter}
    for kind in CODECS:
        cls = classes[kind]
        assert kind == "judge" or cls.__bases__ == (VoterEstimator,), f"{kind}: one class, no model base"
        held = [name for name in ("save", "load", "from_document", "to_document") if hasattr(cls, name)]
        assert not held, f"{kind} holds its weights file ({held}): its codec does (voters.codecs)"
    assert not any(hasattr(JudgeSelector, name) for name in ("from_document", "to_document"))
    # every shipped weights file loads through its kind's codec and saves again to the same bytes
    for path in sorted((ROOT / "docs" / "weights").glob("*.json")):
        if path.name.startswith("nq-offline16"):  # written before the files' fields took today's order; they load
            continue
        assert save_voter(load_voter(path), tmp_path / path.name).read_bytes() == path.read_bytes(), path.name
