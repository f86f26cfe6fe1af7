"""`compare_reports`: the differences between two benchmark reports (two pools, readers or weights files).

Lists the members present in one report only, then per shared member and for EoR, Top R, Top R (train) and
the oracle the accuracy on every measure both reports have and MRLR, as A → B (Δ B − A in points). Lines
whose figures differ are marked with `*`. `compare_reports` renders it as text, `compare_reports_html` as one
self-contained page.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from eor.core.errors import InputError
from eor.core.formatting import markdown_table, pct, ratio, signed, significant
from eor.evaluation.bench.report import REPORT_FORMAT
from eor.evaluation.writing.html import render_html

CHANGED = "*"


def load_report(path: str | Path) -> dict[str, Any]:
    """A report from its `report.json` or the folder holding it."""
    source = Path(path)
    if source.is_dir():
        source = source / "report.json"
    if not source.is_file():
        raise InputError(f"no benchmark report at {str(source)!r}; write one with `eor bench`")
    try:
        report = json.loads(source.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{str(source)!r} is not valid JSON: {exc}") from None
    if not isinstance(report, dict) or report.get("format") != REPORT_FORMAT:
        raise InputError(f"{str(source)!r} is not an eor benchmark report (format {REPORT_FORMAT!r})")
    return report


def _delta(a: float | None, b: float | None, scale: float = 100.0, digits: int = 1) -> str:
    if a is None or b is None:
        return "n/a"
    return signed(scale * (b - a), digits)


def _cells(a: dict[str, Any], b: dict[str, Any], measures: list[str]) -> tuple[list[str], bool]:
    cells = []
    changed = False
    for measure in measures:
        x, y = a.get(measure), b.get(measure)
        changed |= x != y
        cells.append(f"{pct(x)} → {pct(y)} ({_delta(x, y)})")
    x, y = a.get("mrlr"), b.get("mrlr")
    if "mrlr" in a or "mrlr" in b:
        changed |= x != y
        cells.append(f"{ratio(x)} → {ratio(y)} ({_delta(x, y, 1.0, 3)})")
    else:
        cells.append("")
    return cells, changed


class Table(list):
    """Rows of cells; the first row is the header."""


Block = str | Table  # a line of text, or a table


def _text_table(rows: Table) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]


def _literal(text: str) -> str:
    """`text` as Markdown that renders as itself: every ASCII punctuation mark escaped (CommonMark allows it)."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def _markdown_table(rows: Table) -> list[str]:
    header, *body = [[_literal(cell) for cell in row] for row in rows]
    return ["", *markdown_table(header, body), ""]


def compare_reports(a: str | Path | dict[str, Any], b: str | Path | dict[str, Any]) -> str:
    """The differences between report A and report B (folders, report.json paths or report dicts), as text."""
    lines: list[str] = []
    for block in comparison(a, b):
        lines.extend(_text_table(block) if isinstance(block, Table) else [block])
    return "\n".join(lines)


def compare_reports_html(a: str | Path | dict[str, Any], b: str | Path | dict[str, Any]) -> str:
    """The same comparison as one self-contained HTML page (`eor compare --html`)."""

    lines = ["# Benchmark comparison", ""]
    for block in comparison(a, b):
        lines.extend(_markdown_table(block) if isinstance(block, Table) else [_literal(block), ""])
    return render_html("\n".join(lines), "eor benchmark comparison")


def comparison(a: str | Path | dict[str, Any], b: str | Path | dict[str, Any]) -> list[Block]:
    """The comparison's lines and tables, for either rendering."""
    first = a if isinstance(a, dict) else load_report(a)
    second = b if isinstance(b, dict) else load_report(b)
    label_a = str(a) if not isinstance(a, dict) else "A"
    label_b = str(b) if not isinstance(b, dict) else "B"
    lines: list[Block] = [
        f"A: {label_a} ({first['questions']} questions, {len(first['names'])} members, metric {first['metric']})",
        f"B: {label_b} ({second['questions']} questions, {len(second['names'])} members, metric {second['metric']})",
    ]
    if first["metric"] != second["metric"]:
        lines.append(
            f"note: the reports use different metrics ({first['metric']} vs {second['metric']}); "
            "MRLR and Top R are not comparable"
        )
    if first["questions"] != second["questions"] or first.get("records") != second.get("records"):
        lines.append("note: the reports cover different records; differences mix pool and question effects")

    only_a = [n for n in first["names"] if n not in second["names"]]
    only_b = [n for n in second["names"] if n not in first["names"]]
    lines.append(f"members only in A: {', '.join(only_a) if only_a else 'none'}")
    lines.append(f"members only in B: {', '.join(only_b) if only_b else 'none'}")
    lines += ["", "accuracy A → B (Δ points); MRLR A → B (Δ)", _accuracy(first, second)]
    lines += _significance(first, second)
    lines += _weights(first, second)
    return lines


def _accuracy(first: dict[str, Any], second: dict[str, Any]) -> Table:
    measures = [m for m in first["measures"] if m in second["measures"]]
    rows = Table([["", "", *measures, "MRLR"]])

    def add(label: str, x: dict[str, Any] | None, y: dict[str, Any] | None) -> None:
        if not x or not y:
            return
        cells, changed = _cells(x, y, measures)
        rows.append([CHANGED if changed else "", label, *cells])

    for name in first["names"]:
        if name in second["names"]:
            add(name, first["members"][name], second["members"][name])
    add("EoR", first["eor"], second["eor"])
    for key, label in (("top_r", "Top R"), ("top_r_train", "Top R (train)")):
        x, y = first.get(key), second.get(key)
        if x and y:
            name = x["member"] if x["member"] == y["member"] else f"{x['member']} → {y['member']}"
            add(f"{label} ({name})", x, y)
    add("oracle", first["oracle"], second["oracle"])
    return rows


def _significance(first: dict[str, Any], second: dict[str, Any]) -> list[Block]:
    out = []
    for key, label in (("top_r", "Top R"), ("top_r_train", "Top R (train)")):
        x = (first.get("significance") or {}).get(key)
        y = (second.get("significance") or {}).get(key)
        if x and y:
            out.append(
                f"EoR − {label}: A {_delta(0.0, x['difference'])} (p = {significant(x['p_value'], 3)}), "
                f"B {_delta(0.0, y['difference'])} (p = {significant(y['p_value'], 3)})"
            )
    return ["", *out] if out else []


def _weights(first: dict[str, Any], second: dict[str, Any]) -> list[Block]:
    x, y = first.get("weights"), second.get("weights")
    if not x and not y:
        return []
    if not x or not y:
        return ["", f"weights: only {'A' if x else 'B'} uses a weights file; the other votes uniformly"]
    if "retriever_weights" not in x or "retriever_weights" not in y:
        kinds = [w.get("voter", "paper") for w in (x, y)]
        return ["", f"voters: A {kinds[0]} ({x['file']}), B {kinds[1]} ({y['file']})"]
    names = list(dict.fromkeys([*x["retriever_weights"], *y["retriever_weights"]]))
    rows = Table([["", "member", "ω^r A → B"]])
    for name in names:
        wa, wb = x["retriever_weights"].get(name), y["retriever_weights"].get(name)
        cell = f"{ratio(wa)} → {ratio(wb)}"
        rows.append([CHANGED if wa != wb else "", name, cell])
    return ["", f"retriever weights ({x['file']} → {y['file']})", rows]
