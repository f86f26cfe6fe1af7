"""Loading any voter from its weights file (`load_voter`): the paper's `Voter`, the learned `AnswerSelector`, the
`Cascade`, the judge voter, or a voter another package adds (`register_voter_kind`, or entry point group
`eor.voters`: see eor.learning.crossval); and `choose_voter`, the one place that decides which voter answers: a
weights file's, uniform weights for the members' answers, or the judge voter a config's `judge.weights` names
(alone, or carried by the cascade trained with it as its last step).

Every weights file is a JSON document of one family (`voters.weights_file`); its `voter` field names the
kind (absent in files written before there was more than one kind: those hold the paper's voter), whose codec
(voters.codecs) reads it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eor.core.errors import ConfigError
from eor.core.registry import Registry
from voters.cascade import Cascade
from voters.codecs import CODECS, voter_from_document
from voters.judge_selector import JudgeVoter
from voters.judge_step import ends_with_judge
from voters.protocol import check_voter_class
from voters.right import RightModel
from voters.selector import AnswerSelector
from voters.voter import Voter
from voters.weights_file import read_document, read_signed


def _declares_voter(candidate: object) -> bool:
    try:
        check_voter_class(getattr(candidate, "voter_class", None), persists=True)
    except ConfigError:
        return False
    return True


def _its_voter_class(name: str, candidate: Any) -> tuple[str, type]:
    return candidate.voter_class.kind, candidate.voter_class


#: voter classes by `kind`: eor's, those registered in Python, then the `voter_class` of each candidate that
#: installed packages declare (entry point group `eor.voters`, eor.learning.crossval)
VOTER_KINDS: Registry[type] = Registry(
    "voter kind",
    group="eor.voters",
    accept=_declares_voter,
    expected="a candidate with a voter_class",
    adapt=_its_voter_class,
)
for _cls in (Voter, AnswerSelector, Cascade, JudgeVoter):
    VOTER_KINDS.register(_cls.kind, _cls)


def register_voter_kind(cls: type, *, replace: bool = False) -> type:
    """Make weights files whose `voter` field is `cls.kind` load as `cls` (a voters.protocol.FittedVoter that writes
    and reads its own weights file: `save`, `from_document`)."""
    voter_class = check_voter_class(cls, persists=True)
    return VOTER_KINDS.register(voter_class.kind, voter_class, replace=replace)


def voter_kinds() -> dict[str, Any]:
    """Every voter class by kind: eor's, those registered in Python, then those of installed packages."""
    return dict(VOTER_KINDS.items())


def weights_kind(path: str | Path) -> str:
    """The voter kind a weights file holds (`paper` for files written before there was more than one)."""
    kind = read_document(path).get("voter", "paper")
    return kind if isinstance(kind, str) else repr(kind)


def load_voter(
    path: str | Path, members: Sequence[str] | None = None, *, kind: str | None = None, judge: str | Path | None = None
) -> Any:
    """The fitted voter of a weights file, read once (its path in `source_`, the digest of the bytes read in
    `sha256_`, its P(right) built once in `right_`); `members` (the pool's names, any order) must be the file's;
    `kind`: the kind the file must hold (e.g. `judge`), a ConfigError naming what it holds otherwise; `judge`: the
    judge voter's weights file of a cascade trained with the judge as its last step, loaded into its `judge_`
    (ConfigError unless the cascade was trained with that very file, by digest)."""
    document, digest = read_signed(path)
    kinds = voter_kinds()
    found = document.get("voter", "paper")
    if not isinstance(found, str) or (found not in CODECS and found not in kinds):
        known = ", ".join(dict.fromkeys([*kinds, *CODECS]))
        raise ConfigError(f"weights file {str(path)!r} holds an unknown voter {found!r}; known: {known}")
    if kind is not None and found != kind:
        raise ConfigError(f"weights file {str(path)!r} holds a {found!r} voter, not a {kind} voter")
    try:
        voter = voter_from_document(document, str(path), members, kinds.get(found))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # a field missing or mistyped
        raise ConfigError(f"weights file {str(path)!r} is malformed: {type(exc).__name__}: {exc}") from None
    voter.source_, voter.sha256_ = str(path), digest
    voter.right_ = RightModel.from_voter(voter)  # built once; a malformed P(right) (voters.right) fails here
    if judge is not None:
        voter.judge_ = carried_judge(voter, judge)
    return voter


def carried_judge(voter: Any, path: str | Path) -> JudgeVoter:
    """The judge voter of `path`, read once, which the cascade `voter` was trained to end with (what its `judge_`
    holds): ConfigError naming what to change when `voter` is no such cascade, or was trained with another judge
    (their digests differ)."""
    entry = ends_with_judge(voter)
    if entry is None:
        raise ConfigError(
            f"judge.after: cascade needs a cascade trained with the judge as its last step (eor train --voter "
            f"cascade --judge ...); {voter.source_} is not one"
        )
    judge = load_voter(path, kind=JudgeVoter.kind)
    if entry.get("sha256") != judge.sha256_:
        raise ConfigError(
            f"the cascade {voter.source_} was trained with the judge {entry.get('weights')} as its last step, not "
            f"with {judge.source_} (their digests differ): train the cascade again with this judge"
        )
    return judge


def choose_voter(
    weights: str | Path | None,
    members: Sequence[str],
    *,
    judge: str | Path | None = None,
    after: str = "members",
    sub_pool: bool = False,
    **uniform: Any,
) -> Any:
    """The one answer to "which voter": the weights file's voter when there is a file, else uniform weights
    over `members` (`Voter.uniform` with the hyper-parameters `uniform`, e.g. a config's `voter:` section).
    The file must be trained for exactly `members`; with `sub_pool`, for any pool (records holding more
    members than the file's pool, as `eor bench` reads them: the caller votes among the file's members).

    `judge`: a judge voter's weights file (a config's `judge.weights`), which chooses among candidate answers
    after every member (`after` "members": it is the voter, and there is no other file), or after the cascade of
    `weights` trained with it as its last step (`after` "cascade": that cascade, carrying it in `judge_`)."""
    if judge is not None and after == "members":
        if weights is not None:
            voter = load_voter(weights)
            entry = ends_with_judge(voter)
            if entry is not None:
                raise ConfigError(
                    f"{voter.source_} is a cascade whose last step is the judge {entry.get('weights')}: "
                    "answer with it beside that judge (judge: {weights: ..., after: cascade}), never with its last "
                    "step's selector"
                )
            raise ConfigError(
                f"judge.after: members answers with the judge voter {judge} after every member: the voter's weights "
                f"file {weights} would decide nothing; remove it, or name a cascade trained with this judge and set "
                "judge.after: cascade"
            )
        return load_voter(judge, kind=JudgeVoter.kind)  # its members are the config's judge's (eor.pipeline)
    if weights is None:
        if judge is not None:
            raise ConfigError(
                "judge.after: cascade needs the cascade trained with the judge as its last step: name its weights "
                "file (voter.weights)"
            )
        return Voter.uniform(len(members), members=list(members), **uniform)
    voter = load_voter(weights, members=None if sub_pool else members, judge=judge)
    if voter.chooses != "members" and judge is None:  # the judge's candidates: the config's `judge:` scores them
        raise ConfigError(
            f"weights file {str(weights)!r} holds a judge voter, which chooses among candidate answers rather than "
            "the members' answers: name it in the config's judge: section (judge: {weights: ...})"
        )
    return voter
