"""The one writer of every report eor writes (`eor bench`'s, a judge voter's and its cascade's, `eor erag`'s and
`eor utility`'s) and the registry of their sections and figures.

A report is a JSON-ready document of one kind (`REPORT_KINDS`). Its kind names its files (`STEM.json`, `STEM.md`,
`STEM.html` and its figures), its Markdown sections in order and its figures. `write_report` writes, in order:

1. `STEM.json`, whole or not at all (numpy as Python, NaN and infinities null: an undefined ratio is null, never 0);
2. every figure of the kind, drawn from the JSON as read back (a drawing returns None where the report has
   nothing to draw), so that every output shows the same numbers;
3. `STEM.md`: each section's lines (a section with nothing to show gives [] and is left out), one blank line
   between sections, then a last section linking the figures drawn;
4. `STEM.html`: the Markdown with its figures embedded (eor.evaluation.writing.html), one file that opens alone.

A new section is a function of the report's JSON to Markdown lines, registered with `register_section(kind, name,
lines)` (appended to the kind's order, or `before` another section); a new figure is a function of the JSON and a
path that draws a PNG there, registered with `register_figure(kind, file_name, draw)`. eor's own kinds are
registered below, where the registry is defined (eor.core.registry's policy).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as with_parts
from pathlib import Path
from types import MappingProxyType
from typing import Any

from eor.core.atomic import write_text_atomically
from eor.core.errors import ConfigError
from eor.core.json_ready import json_ready
from eor.core.registry import Registry
from eor.evaluation.writing import bench_sections, erag_figures, erag_sections, figures, judge_sections
from eor.evaluation.writing.html import render_html

#: a report's JSON (as read back) -> its Markdown lines, [] when it has nothing to show
Section = Callable[[dict[str, Any]], list[str]]
#: a report's JSON and a path -> the path drawn, or None when the report has nothing to draw
Figure = Callable[[dict[str, Any], Path], Path | None]


@dataclass(frozen=True, eq=False)
class ReportKind:
    """The files of one kind of report (`STEM.json`, `.md`, `.html`, figures), its sections and figures in order.
    Never changed in place (its parts are read-only mappings): a section or a figure registers a new kind under
    the same name, so that what a `REPORT_KINDS.scoped()` block adds to one of eor's kinds is gone after it."""

    stem: str
    title: str  # the page's title, before the report folder's name
    sections: Mapping[str, Section] = field(default_factory=lambda: MappingProxyType({}))
    figures: Mapping[str, Figure] = field(default_factory=lambda: MappingProxyType({}))

    def files(self) -> tuple[str, str, str]:
        """The names of its JSON, Markdown and page."""
        return f"{self.stem}.json", f"{self.stem}.md", f"{self.stem}.html"


REPORT_KINDS: Registry[ReportKind] = Registry("report kind")


def register_report_kind(name: str, stem: str, title: str, *, replace: bool = False) -> ReportKind:
    """A new kind of report, with no section or figure yet."""
    return REPORT_KINDS.register(name, ReportKind(stem, title), replace=replace)


def register_section(kind: str, name: str, lines: Section, *, before: str | None = None) -> Section:
    """Section `name` of reports of `kind`: last, or just before section `before`."""

    def added(report: ReportKind) -> ReportKind:
        if name in report.sections:
            raise ConfigError(f"the {kind} report already has a section {name!r}")
        if before is not None and before not in report.sections:
            raise ConfigError(f"the {kind} report has no section {before!r}; it has {', '.join(report.sections)}")
        ordered = list(report.sections.items())
        ordered.insert(len(ordered) if before is None else list(report.sections).index(before), (name, lines))
        return with_parts(report, sections=MappingProxyType(dict(ordered)))

    REPORT_KINDS.update(kind, added)
    return lines


def register_figure(kind: str, file_name: str, draw: Figure) -> Figure:
    """Figure `file_name` (a PNG's name, drawn into the report's folder) of reports of `kind`, drawn after the
    kind's other figures."""

    def added(report: ReportKind) -> ReportKind:
        if Path(file_name).name != file_name or not file_name.endswith(".png"):
            raise ConfigError(f"a figure of the {kind} report is a PNG's file name, not {file_name!r}")
        if file_name in report.figures:
            raise ConfigError(f"the {kind} report already has a figure {file_name!r}")
        return with_parts(report, figures=MappingProxyType({**report.figures, file_name: draw}))

    REPORT_KINDS.update(kind, added)
    return draw


def write_json(path: Path, document: Any) -> dict[str, Any]:
    """`document` written whole or not at all (a kill leaves no half file), and read back: what every other output
    of the report is drawn from."""
    write_text_atomically(path, json.dumps(json_ready(document), indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    return json.loads(path.read_text(encoding="utf-8"))


def render_markdown(kind: str, document: dict[str, Any], figure_names: Sequence[str] = ()) -> str:
    """The Markdown of a report of `kind`: its sections in order, then the figures named, linked."""
    return _markdown(REPORT_KINDS[kind], document, figure_names)


def _markdown(report: ReportKind, document: dict[str, Any], figure_names: Sequence[str]) -> str:
    sections = [lines(document) for lines in report.sections.values()]
    if figure_names:
        sections.append(["## Figures", "", *(f"![{name}]({name})" for name in figure_names)])
    return "\n\n".join("\n".join(lines) for lines in sections if lines) + "\n"


def write_report(kind: str, document: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write a report of `kind` into `out_dir` (made if missing): its JSON, figures, Markdown and HTML page, in the
    order of this module's docstring; the paths written (JSON, Markdown, page, then the figures)."""
    report = REPORT_KINDS[kind]  # one kind for every file, whatever registers meanwhile
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    data, markdown, page = (folder / name for name in report.files())
    written = write_json(data, document)
    drawn = [path for name, draw in report.figures.items() if (path := draw(written, folder / name)) is not None]
    text = _markdown(report, written, [path.name for path in drawn])
    write_text_atomically(markdown, text)
    write_text_atomically(page, render_html(text, f"{report.title}: {folder.name}", folder))
    return [data, markdown, page, *drawn]


def _register(
    name: str, stem: str, title: str, sections: Mapping[str, Section], drawings: Mapping[str, Figure]
) -> None:
    register_report_kind(name, stem, title)
    for section, lines in sections.items():
        register_section(name, section, lines)
    for file_name, draw in drawings.items():
        register_figure(name, file_name, draw)


_register("bench", "report", "eor benchmark", bench_sections.SECTIONS, figures.FIGURES)
_register("erag", "erag", "eor erag", erag_sections.ERAG_SECTIONS, {"erag.png": erag_figures.plot_erag})
_register("judge", "report", "eor judge", judge_sections.JUDGE_SECTIONS, {})
_register("judge_cascade", "report", "eor judged cascade", judge_sections.JUDGE_CASCADE_SECTIONS, {})
_register(
    "utility", "utility", "eor utility", erag_sections.UTILITY_SECTIONS, {"utility.png": erag_figures.plot_utility}
)
