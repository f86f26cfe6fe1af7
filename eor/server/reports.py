"""The benchmark reports under `eor serve --reports DIR`: every folder below DIR that holds a `report.md`.

A report is named by its folder's path relative to DIR (`nq16-dev`, `pools/nq-7`); only names found by the
listing are served, so a request cannot reach a file outside DIR. A page is rendered from `report.md` and
its figures on request (eor.evaluation.writing.html), so reports written before `report.html` existed show as well.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: most reports listed (a huge folder must not stall the page).
MAX_REPORTS = 500


@dataclass(frozen=True)
class ReportEntry:
    name: str
    folder: Path

    def summary(self) -> dict[str, Any]:
        """The name and, from `report.json` when it is there and readable, the headline figures."""
        entry: dict[str, Any] = {"name": self.name}
        try:
            report = json.loads((self.folder / "report.json").read_text(encoding="utf-8"))
            metric = report["metric"]
            entry.update(
                questions=int(report["questions"]),
                members=len(report["names"]),
                metric=str(metric),
                eor=report["eor"].get(metric),
                top_r=(report.get("top_r") or {}).get(metric),
                oracle=(report.get("oracle") or {}).get(metric),
            )
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # listed by name only
        return entry


def find_reports(root: Path) -> list[ReportEntry]:
    """The reports under `root`, sorted by name (hidden folders skipped; at most MAX_REPORTS)."""
    found = []
    for markdown in sorted(root.rglob("report.md")):
        relative = markdown.parent.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue
        found.append(ReportEntry(relative.as_posix() if relative.parts else ".", markdown.parent))
        if len(found) == MAX_REPORTS:
            break
    return found


def find_report(root: Path, name: str) -> ReportEntry | None:
    """The report of that name under `root`, or None."""
    return next((entry for entry in find_reports(root) if entry.name == name), None)
