"""Why a vote chose its answer (`explain_vote`): the account `eor ask --explain`, `/v1/answer`'s `explain` and the
explorer show, from the voter's own account of each voting member (voters.protocol's `explain_row`)."""

from __future__ import annotations

from typing import Any

from eor.core.errors import InputError
from eor.core.results import Result
from voters.protocol import check_voter, confidence_kwargs


def explain_vote(voter: Any, pool: list[str], result: Result) -> dict[str, Any]:
    """Why the vote chose its answer: the voter's own account per voting member (for the paper's voter:
    weight ω^r, whether it drops the member, similarities per metric and combined (eq. 6), pooled
    similarity and decision score (eq. 7); for the answer selector: each feature's contribution), and
    the members left out of the vote with the reason. `pool`: the voter's members, in its order."""
    check_voter(voter)
    names = list(result.members)
    if not names:
        raise InputError("this result holds no member outputs to explain")
    foreign = [name for name in names if name not in pool]
    if foreign:
        raise InputError(f"this result holds member(s) {', '.join(foreign)} that this ensemble lacks")
    account = voter.explain_row(
        [result.members[name].answer for name in names],
        [result.members[name].passage_texts for name in names],
        result.question,
        [pool.index(name) for name in names],
        **confidence_kwargs(voter, [result.members[name].confidence for name in names]),
    )
    members: dict[str, Any] = {}
    for name, row in zip(names, account.pop("members"), strict=True):
        if "similarity" in row:
            row["similarity"] = {names[n]: values for n, values in row["similarity"].items()}
        members[name] = {
            "answer": result.members[name].answer,
            **row,
            "score": result.members[name].score,
            "chosen": name == result.member,
        }
    return {
        "question": result.question,
        "answer": result.answer,
        "member": result.member,
        **account,
        "members": members,
        "degraded": dict(result.degraded),
    }
