"""What `eor ask` does: answer one question with the ensemble and print it, as a table or as JSON."""

from __future__ import annotations

import argparse
import json

from eor.cli.options import cache_setting, config_path, member_names
from eor.core.data import check_question
from eor.core.json_ready import json_ready
from eor.pipeline.ensemble import Ensemble


def cmd_ask(args: argparse.Namespace) -> int:
    question = check_question(args.question)
    members = member_names(args.members)
    ensemble = Ensemble.from_config(config_path(args.config), weights=args.weights, cache=cache_setting(args))
    risk = args.risk if args.risk is not None else ensemble.config.voter.risk
    result = ensemble.answer(question, members=members, lazy=not args.all_members, risk=risk)
    explanation = json_ready(ensemble.explain(result)) if args.explain else None
    if args.json:
        body = result.to_dict()
        if explanation is not None:
            body["explanation"] = explanation
        print(json.dumps(body, ensure_ascii=False, indent=2))
    else:
        print(format_result(result))
        if explanation is not None:
            print("\nwhy (the vote's account of each member):")
            print(json.dumps(explanation["members"], ensure_ascii=False, indent=2))
    return 0


def format_result(result) -> str:
    """The chosen answer, then a table of every member's answer and vote score."""
    rows = [
        (name, out.answer, f"{out.score:.3f}" if out.score is not None else "-") for name, out in result.members.items()
    ]
    width = max(len("member"), *(len(r[0]) for r in rows))
    answer_width = min(max(len("answer"), *(len(r[1]) for r in rows)), 60)
    if result.abstained:
        declined = result.members[result.member].answer
        givers = ", ".join(result.given_by)
        answer = f"I don't know: {result.abstention['reason']}   (declined the answer {declined!r} of {givers})"
    else:
        answer = f"{result.answer}   (given by {', '.join(result.given_by)})"
    lines = [f"Question: {result.question}", f"Answer:   {answer}"]
    if result.probability is not None:
        lines.append(f"P(right): {result.probability:.2f}")
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
    lines.append(
        f"\n{result.timings['total']:.2f} s per question "
        f"(retrieval {result.timings['retrieval']:.2f}, generation {result.timings['generation']:.2f})"
    )
    if result.cascade is not None:
        skipped = f"; not run: {', '.join(result.cascade['skipped'])}" if result.cascade["skipped"] else ""
        lines.append(f"cascade {result.cascade['reason']}{skipped}")
    elif result.skipped:
        lines.append(f"not needed (lazy vote): {', '.join(result.skipped)}")
    return "\n".join(lines)
