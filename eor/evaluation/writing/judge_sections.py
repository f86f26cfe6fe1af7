"""The sections of a judge voter's `report.md` and of a cascade ending with the judge (eor.evaluation.bench.judge,
eor.evaluation.bench.judge_cascade_report): a title and the report in a few lines, which `eor bench` also prints."""

from __future__ import annotations

from typing import Any

from eor.core.formatting import fixed, pct, significant


def judge_lines(report: dict[str, Any], voter: str = "judge") -> list[str]:
    """The report in a few lines (EM with intervals, the paired differences of `voter`'s answers, P(right),
    abstention)."""
    judge = report["judge"]
    used = ", ".join(f"{label}: {count}" for label, count in report["fits_used"].items())
    lines = [
        f"{report['questions']} questions ({report['scored']} scored by the reader); fits used: {used}",
        f"judge: EM {pct(judge['em'])} [{pct(judge['ci'][0])}, {pct(judge['ci'][1])}]; oracle of the members' "
        f"answers {pct(report['oracle']['members'])}, of the candidates {pct(report['oracle']['candidates'])}",
    ]
    for key, test, label in (("top_r_train", "vs_top_r_train", "Top R (train)"), ("against", "vs_against", None)):
        entry = report.get(key)
        if entry is None:
            continue
        name = label or f"against {entry['weights']}"
        member = f" {entry['member']}" if "member" in entry else ""
        paired = report[test]
        low, high = paired["ci"]
        lines.append(
            f"{name}{member}: EM {pct(entry['em'])}; {voter} − it = {pct(paired['difference'])} points "
            f"[{pct(low)}, {pct(high)}], {paired['test'].replace('_', ' ')} p = {significant(paired['p_value'], 3)}"
        )
    selective = report.get("selective")
    if selective:
        lines.append(
            f"P(right): ECE {fixed(selective['ece'], 3)} (a calibrated P's noise here "
            f"{fixed(selective['ece_noise']['mean'], 3)}), "
            f"AURC {fixed(selective['aurc'], 3)} (a constant's {fixed(selective['aurc_constant'], 3)})"
        )
        levels = "; ".join(
            f"{significant(row['alpha'])}: {pct(row['coverage'])}% answered, error {pct(row['error'])}"
            for row in selective["risk_levels"]
            if row["alpha"] in (0.2, 0.3, 0.4)
        )
        lines.append(f"abstention (error rate asked: coverage, realised error): {levels}")
    return lines


def judge_cascade_lines(report: dict[str, Any]) -> list[str]:
    """The report in a few lines."""
    cascade = report["cascade"]
    low, high = cascade["ci"]
    head = [
        f"cascade ending with the judge: EM {fixed(100 * cascade['em'], 1)} [{fixed(100 * low, 1)}, "
        f"{fixed(100 * high, 1)}] at "
        f"{fixed(cascade['cost'], 2)} s of reader time per question (p90 {fixed(cascade['cost_p90'], 2)}; "
        f"{fixed(cascade['members_run'], 2)} members run; the judge answered {fixed(100 * cascade['judged'], 1)}%)",
    ]
    used = ", ".join(f"{name} on {count}" for name, count in (report.get("selective") or {}).get("fits", {}).items())
    return head + judge_lines(report, voter="the cascade") + [f"P(right) by its fits: {used}"]


#: a judge voter's `report.md` (eor.evaluation.writing.writer registers the kind)
JUDGE_SECTIONS = {"title": lambda report: ["# The judge voter"], "summary": judge_lines}
#: a cascade ending with the judge's `report.md`
JUDGE_CASCADE_SECTIONS = {
    "title": lambda report: ["# The cascade ending with the judge"],
    "summary": judge_cascade_lines,
}
