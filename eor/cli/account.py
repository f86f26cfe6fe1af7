"""`eor ask --explain`: why the answer is what it is, in a few lines a person reads (`format_account`): how the
voter chose it, the sentence that holds it, who gave it, and what its P(right) rests on. The voter's raw account
(every pairwise similarity, every feature's contribution) is `--explain full` and the `explanation` of `--json`."""

from __future__ import annotations

from typing import Any

from eor.core.answers import normalize_answer
from eor.core.formatting import fixed, signed

#: the features of a chosen member's account `eor ask --explain` names: those that weighed most
NAMED_FEATURES = 3
#: the characters of the evidence sentence shown
SENTENCE_CHARS = 200
#: the answer selector's features (voters.features) in words; `<prefix>:<member>` ones by their prefix
FEATURE_WORDS = {
    "agreement": "other members agree",
    "grounded": "its passages hold it",
    "first_passage": "its first passage holds it",
    "support": "the passages holding it",
    "no_passages": "no passage read",
    "log_length": "its length",
    "long": "longer than 5 words",
    "refusal": "a refusal",
    "in_question": "words of the question",
    "member": "who answered",
    "vote": "who else gave it",
    "found": "whose passages hold it",
    "sim": "similar answers",
    "conf": "the reader's confidence",
}


def format_account(result: Any, explanation: dict[str, Any]) -> str:
    """The readable account of `result` (see the module), from `explanation` (eor.pipeline.explanation.explain_vote)."""
    lines = ["", "Why:"]
    lines.append(f"  chosen:    {_how(result, explanation)}")
    holding = [source for source in result.sources if source.get("holds")]
    if holding:
        first = holding[0]
        where = first.get("file") or first.get("url") or first.get("title") or "a passage"
        page = f" p. {first['page']}" if first.get("page") is not None else ""
        more = f" (and {len(holding) - 1} more passage{'s' if len(holding) > 2 else ''})" if len(holding) > 1 else ""
        sentence = first["sentence"]
        sentence = sentence if len(sentence) <= SENTENCE_CHARS else sentence[: SENTENCE_CHARS - 1] + "…"
        lines.append(f'  evidence:  "{sentence}" ({where}{page}){more}')
    elif result.sources:
        lines.append("  evidence:  no passage read holds this answer")
    elif result.abstained:  # a declined answer's sources are withheld with it (the decline above says why)
        lines.append("  evidence:  not shown: the answer was declined")
    else:
        lines.append("  evidence:  none: the reader's own knowledge (no passage was read)")
    answered = [name for name, output in result.members.items() if output.answer.strip()]
    lines.append(
        f"  agreement: {len(result.given_by)} of {len(answered)} members gave it ({', '.join(result.given_by)})"
    )
    if result.probability is not None:
        lines.append(f"  P(right):  {fixed(result.probability, 2)}, from {_rests_on(result)}")
    if result.unanswerable is not None:
        lines.append(f"  P(the documents do not hold the answer): {fixed(result.unanswerable, 2)}")
    return "\n".join(lines)


def _how(result: Any, explanation: dict[str, Any]) -> str:
    """How the voter chose: its kind, the chosen member's score and the best other answer's."""
    if result.judged is not None:
        return f"by the judge voter among {len(result.judged['candidates'])} candidates (below)"
    members = explanation.get("members") or {}
    kind = explanation.get("voter")
    chosen = members.get(result.member) or {}
    other = _best_other(result, members)
    if kind == "paper":
        pooled = chosen.get("pooled")
        how = (
            f"by the vote (EoR eq. 7): {result.member}'s score {_num(chosen.get('score'))} = its weight "
            f"{fixed(chosen.get('weight', 0.0), 2)} × its {explanation.get('pooling', '')} agreement "
            f"{_num(pooled)} with the others"
        )
    else:
        features = chosen.get("features") or {}
        weighed = sorted(features.items(), key=lambda item: -abs(item[1]["contribution"]))[:NAMED_FEATURES]
        named = ", ".join(f"{_feature(name)} {signed(item['contribution'], 2)}" for name, item in weighed)
        step = ""
        if kind == "cascade":
            ran = ", ".join(explanation.get("step_members", []))
            step = f"the cascade's step {explanation.get('step', 0) + 1} ({ran}): "
        how = f"{step}by the answer selector: {result.member}'s log-odds {_num(chosen.get('score'), sign=True)}"
        if named:
            how += f" (weighing most: {named})"
    if other is not None:
        name, score = other
        how += f"; the best other answer, {name}'s, {_num(score, sign=kind != 'paper')}"
    return how


def _best_other(result: Any, members: dict[str, Any]) -> tuple[str, float] | None:
    """The member with the highest score whose answer differs from the chosen one, and its score."""
    chosen = normalize_answer(result.members[result.member].answer)
    others = [
        (name, row["score"])
        for name, row in members.items()
        if row.get("score") is not None and normalize_answer(result.members[name].answer) != chosen
    ]
    return max(others, key=lambda item: item[1]) if others else None


def _rests_on(result: Any) -> str:
    """What the P(right) fit of `result` reads, in words."""
    fit = result.probability_fit or ""
    if result.judged is not None:
        return f"the judge's fit {fit!r}: the chosen candidate's log-odds and margin over the others"
    parts = ["the choice's log-odds and margin", "how many members agree"]
    if "confidence" in fit and "no confidence" not in fit:
        parts.append("the reader's confidence in it")
    if "retrieval" in fit:
        parts.append("how well the passages read match the question")
    named = f"its fit {fit!r}: " if fit else ""
    return named + ", ".join(parts)


def _feature(name: str) -> str:
    """A selector feature in words (`name` itself where there are none), its member named."""
    prefix, _, member = name.partition(":")
    words = FEATURE_WORDS.get(name) or FEATURE_WORDS.get(prefix)
    if words is None:
        return name
    return f"{words} ({member})" if member and prefix in ("member", "vote", "found") else words


def _num(value: Any, sign: bool = False) -> str:
    if value is None:
        return "-"
    return signed(value, 2) if sign else fixed(value, 3)
