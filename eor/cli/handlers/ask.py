"""What `eor ask` does: answer one question with the ensemble and print it, as a table or as JSON."""

from __future__ import annotations

import argparse
import json

from eor.cli.account import format_account
from eor.cli.options import cache_setting, config_path, member_names
from eor.core.data import check_question
from eor.core.formatting import fixed
from eor.core.json_ready import json_ready
from eor.pipeline.ensemble import Ensemble
from eor.pipeline.validation import load_valid_config


def cmd_ask(args: argparse.Namespace) -> int:
    question = check_question(args.question)
    members = member_names(args.members)
    config = load_valid_config(config_path(args.config))  # the door
    ensemble = Ensemble.from_config(config, weights=args.weights, cache=cache_setting(args), validated=True)
    risk = args.risk if args.risk is not None else ensemble.config.voter.risk
    result = ensemble.answer(question, members=members, lazy=not args.all_members, risk=risk)
    explanation = json_ready(ensemble.explain(result)) if args.explain else None
    if args.json:
        body = result.to_dict()
        if explanation is not None:
            body["explanation"] = explanation
        print(json.dumps(json_ready(body), ensure_ascii=False, indent=2, allow_nan=False))  # NaN as null: JSON
    else:
        print(format_result(result))
        if explanation is not None:
            print(format_account(result, explanation))
            if result.judged is not None:
                print(format_judged(result.judged))
            if args.explain == "full" and result.judged is None:
                print("\nthe vote's account of each member:")
                print(json.dumps(explanation["members"], ensure_ascii=False, indent=2))
    return 0


def _chosen(result) -> tuple[str, str]:
    """The chosen answer (also when declined) and to whom it is credited, in words."""
    if result.judged is None:
        return result.members[result.member].answer, f"given by {', '.join(result.given_by)}"
    candidate = result.judged["candidates"][result.judged["chosen"]]
    if candidate["members"]:
        return candidate["text"], f"given by {', '.join(candidate['members'])}; chosen by the judge"
    holders = ", ".join(candidate["supported_by"]) or "no member"
    return candidate["text"], f"a span of the passages of {holders}, no member wrote it; chosen by the judge"


#: the characters of an evidence sentence `eor ask` shows
SENTENCE_CHARS = 100


def _sources(result) -> str:
    """The answer's sources, one line each: the passages that hold it (file and page, or url, or title, and the
    passage id, then the sentence that holds it), then in one line those its members read that do not."""
    sources = result.sources
    if not sources:
        return "none: the reader's own knowledge (no passage)"

    def where(source: dict) -> str:
        place = source.get("file") or source.get("url") or source.get("title") or "passage"
        page = f" p. {source['page']}" if source.get("page") is not None else ""
        return f"{place}{page} [{source.get('id')}]"

    holding = [s for s in sources if s.get("holds")]
    lines = []
    for source in holding:
        sentence = source["sentence"]
        shown = sentence if len(sentence) <= SENTENCE_CHARS else sentence[: SENTENCE_CHARS - 1] + "…"
        lines.append(f'{where(source)}: "{shown}"')
    read = "; ".join(dict.fromkeys(where(s) for s in sources if not s.get("holds")))
    if not holding:
        lines.append(f"no passage read holds this answer; read: {read}")
    elif read:
        lines.append(f"read, not holding the answer: {read}")
    return "\n          ".join(lines)


def format_judged(judged: dict) -> str:
    """The judge's candidates: who wrote each, whose passages hold it, its log-odds (chosen first: `*`)."""
    rows = [
        (
            "*" if i == judged["chosen"] else " ",
            c["text"],
            ", ".join(c["members"]) or "(span)",
            ", ".join(c["supported_by"]) or "-",
            "-" if c["score"] is None else fixed(c["score"], 2),
        )
        for i, c in enumerate(judged["candidates"])
    ]
    widths = [
        min(max(len(header), *(len(row[k]) for row in rows)), 40)
        for k, header in ((1, "candidate"), (2, "written by"), (3, "in the passages of"))
    ]
    scored = ", ".join(judged["scored"]) or "none (text alone)"
    lines = [f"\nthe judge's candidates (fit {judged['fit']}; the reader's scores: {scored}):"]
    lines.append(
        f"  {'candidate':<{widths[0]}}  {'written by':<{widths[1]}}  {'in the passages of':<{widths[2]}}  log-odds"
    )
    for mark, *cells, score in rows:
        shown = [
            cell if len(cell) <= width else cell[: width - 1] + "…" for cell, width in zip(cells, widths, strict=True)
        ]
        lines.append(f"{mark} {shown[0]:<{widths[0]}}  {shown[1]:<{widths[1]}}  {shown[2]:<{widths[2]}}  {score}")
    return "\n".join(lines)


def format_result(result) -> str:
    """The chosen answer, then a table of every member's answer and vote score."""
    rows = [
        (name, out.answer, fixed(out.score, 3) if out.score is not None else "-")
        for name, out in result.members.items()
    ]
    width = max(len("member"), *(len(r[0]) for r in rows))
    answer_width = min(max(len("answer"), *(len(r[1]) for r in rows)), 60)
    chosen, credit = _chosen(result)
    if result.abstained:
        answer = f"I don't know: {result.abstention['reason']}   (declined the answer {chosen!r}, {credit})"
    else:
        answer = f"{result.answer}   ({credit})"
    lines = [f"Question: {result.question}", f"Answer:   {answer}"]
    if not result.abstained:
        lines.append(f"Sources:  {_sources(result)}")
    if result.probability is not None:
        fit = "" if result.probability_fit is None else f"   (its fit {result.probability_fit!r})"
        lines.append(f"P(right): {fixed(result.probability, 2)}{fit}")
    if result.abstention is not None and not result.abstained:
        lines.append(f"Risk:     {result.abstention['reason']}")
    lines += [
        "",
        f"  {'member':<{width}}  {'answer':<{answer_width}}  score",
        f"  {'-' * width}  {'-' * answer_width}  -----",
    ]
    for name, answer, score in rows:
        mark = "*" if name in result.given_by else " "
        shown = answer if len(answer) <= answer_width else answer[: answer_width - 1] + "…"
        lines.append(f"{mark} {name:<{width}}  {shown:<{answer_width}}  {score}")
    judged = f", judge {fixed(result.timings['judge'], 2)}" if "judge" in result.timings else ""
    lines.append(
        f"\n{fixed(result.timings['total'], 2)} s per question "
        f"(retrieval {fixed(result.timings['retrieval'], 2)}, generation "
        f"{fixed(result.timings['generation'], 2)}{judged})"
    )
    if result.cascade is not None:
        skipped = f"; not run: {', '.join(result.cascade['skipped'])}" if result.cascade["skipped"] else ""
        lines.append(f"cascade {result.cascade['reason']}{skipped}")
    elif result.skipped:
        lines.append(f"not needed (lazy vote): {', '.join(result.skipped)}")
    return "\n".join(lines)
