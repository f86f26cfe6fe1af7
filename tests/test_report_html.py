"""`report.html` and `eor compare --html`: one self-contained page with every table and figure of the Markdown."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from eor.core.errors import InputError
from eor.evaluation.bench import build_report, compare_reports
from eor.evaluation.bench.compare import compare_reports_html
from eor.evaluation.writing.html import render_html, report_html
from eor.evaluation.writing.writer import write_report
from tests.test_bench import ANSWERS, PASSAGES, write_records


class Page(HTMLParser):
    """The tables (as lists of rows of cell texts), the image sources and every external reference."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.images: list[str] = []
        self.tags: set[str] = set()
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        attributes = dict(attrs)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(attributes["src"])

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def markdown_tables(markdown: str) -> list[list[list[str]]]:
    """The pipe tables of a Markdown text as text (bold and code marks dropped), header row first."""
    tables, current = [], None
    for line in markdown.splitlines():
        if line.startswith("|"):
            if current is None:
                current = []
                tables.append(current)
            if not re.fullmatch(r"\|(---\|)+", line):
                cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
                current.append([re.sub(r"\*\*|`", "", cell).strip().replace("\\|", "|") for cell in cells])
        else:
            current = None
    return tables


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    records = write_records(tmp_path_factory.mktemp("run"))
    folder = tmp_path_factory.mktemp("report")
    write_report("bench", build_report(records, metrics=("em", "f1"), resamples=50), folder)
    return folder


def test_report_html_holds_every_table_and_figure_of_report_md(written):
    markdown = (written / "report.md").read_text(encoding="utf-8")
    page = Page((written / "report.html").read_text(encoding="utf-8"))
    expected = markdown_tables(markdown)
    assert len(expected) >= 4  # accuracy, RWR, errors, upper bound (and more as the report has them)
    assert page.tables == expected  # the same tables, cell for cell
    figures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert figures and len(page.images) == len(figures)
    for name, source in zip(figures, page.images, strict=True):
        kind, data = source.split(",", 1)
        assert kind == "data:image/png;base64"
        assert base64.b64decode(data) == (written / name).read_bytes()  # the figure itself, embedded


def test_report_html_needs_nothing_else(written):
    text = (written / "report.html").read_text(encoding="utf-8")
    page = Page(text)
    assert not {"script", "link", "iframe", "object"} & page.tags
    assert not re.search(r"""(src|href)\s*=\s*(?!["']?data:)""", text)  # nothing fetched or linked
    assert "http://" not in text and "https://" not in text
    assert "<style>" in text


def test_a_missing_figure_is_an_error_not_a_blank(tmp_path):
    with pytest.raises(InputError, match="missing"):
        render_html("![rwr.png](rwr.png)\n", "t", tmp_path)
    (tmp_path / "secret.txt").write_text("x")
    with pytest.raises(InputError):  # only images, only inside the folder
        render_html("![x](../secret.txt)\n", "t", tmp_path / "sub")
    with pytest.raises(InputError, match="no report.md"):
        report_html(tmp_path)


def test_a_served_page_keeps_the_title_its_writer_gave_it(tmp_path):
    (tmp_path / "report.md").write_text("# The judge voter\n\n414 questions\n")
    assert "<title>eor benchmark: " + tmp_path.name + "</title>" in report_html(tmp_path)  # written before pages were
    (tmp_path / "report.html").write_text(render_html("# The judge voter\n", "eor judge & co: an old name"))
    page = report_html(tmp_path)  # the kind as written, the folder's name as it is now
    assert f"<title>eor judge &amp; co: {tmp_path.name}</title>" in page and "414 questions" in page


def test_markup_in_a_report_is_shown_as_text(tmp_path):
    page = render_html("# <script>alert(1)</script>\n\n| a |\n|---|\n| <b>x</b> |\n", "<i>t</i>")
    assert "<script>" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;script&gt;" in page and "&lt;b&gt;x&lt;/b&gt;" in page


def test_compare_html_has_the_text_comparisons_tables(tmp_path):
    answers = {**ANSWERS, "B": ["paris", "london", "berlin", "seville", "rome", "vienna", "stockholm", "galway"]}
    odd = "D|<b>*x*</b>"
    answers[odd] = ANSWERS["C"]
    passages = {**PASSAGES, odd: PASSAGES["C"]}
    write_report(
        "bench", build_report(write_records(tmp_path / "r1"), metrics=("em", "f1"), resamples=50), tmp_path / "a"
    )
    changed = write_records(tmp_path / "r2", answers, passages)
    write_report("bench", build_report(changed, metrics=("em", "f1"), resamples=50), tmp_path / "b")
    text = compare_reports(tmp_path / "a", tmp_path / "b")
    page = Page(compare_reports_html(tmp_path / "a", tmp_path / "b"))
    accuracy = page.tables[0]
    assert accuracy[0][2:] == ["em", "f1", "contains", "MRLR"]
    rows = {row[1]: row for row in accuracy[1:]}
    assert rows["B"][0] == "*" and rows["B"][2] == "50.0 → 62.5 (+12.5)"
    assert all(" ".join(row[1:3]) in " ".join(text.split()) for row in accuracy[1:])  # the same figures
    html = compare_reports_html(tmp_path / "a", tmp_path / "b")
    assert f"members only in B: {odd}".replace("<", "&lt;").replace(">", "&gt;") in html  # literally, no markup
    assert "<b>" not in html


def test_eor_compare_writes_the_html_page(tmp_path, written):
    out = tmp_path / "comparison.html"
    done = subprocess.run(
        [sys.executable, "-m", "eor.cli", "compare", str(written), str(written), "--html", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"written to {out}" in done.stdout and "members only in A: none" in done.stdout
    page = Page(out.read_text(encoding="utf-8"))
    assert page.tables and all(row[0] == "" for row in page.tables[0][1:])  # nothing changed: no * marks
