"""The one report writer (eor.evaluation.writing.writer): a kind of report registered from outside, its sections in
order (`before`), its figure drawn from the JSON as read back, and the files in the order the module promises."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np
import pytest

from eor.core.errors import ConfigError
from eor.core.plotting import pyplot
from eor.evaluation.writing.writer import (
    REPORT_KINDS,
    register_figure,
    register_report_kind,
    register_section,
    render_markdown,
    write_report,
)

SEEN: list[dict] = []  # what the figure was drawn from


def _bars(report: dict, path: Path) -> Path | None:
    SEEN.append(report)
    if not report["values"]:
        return None  # nothing to draw: no file, no link
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(2, 1))
    ax.bar(range(len(report["values"])), [0.0 if v is None else v for v in report["values"]])
    fig.savefig(path)
    plt.close(fig)
    return path


@pytest.fixture
def kind():
    with REPORT_KINDS.scoped():
        register_report_kind("tally", "tally", "a tally")
        register_section("tally", "title", lambda report: ["# Tally"])
        register_section("tally", "values", lambda report: [f"- {value}" for value in report["values"]])
        register_section("tally", "empty", lambda report: [])  # nothing to show: left out
        register_section("tally", "count", lambda report: [f"{len(report['values'])} values"], before="values")
        register_figure("tally", "bars.png", _bars)
        yield "tally"


def test_a_kind_registered_from_outside_is_written_like_eors_own(kind, tmp_path):
    SEEN.clear()
    document = {"values": np.array([0.25, math.nan, 1.0]), "name": ("a", "b")}
    written = write_report(kind, document, tmp_path / "out")
    assert [path.name for path in written] == ["tally.json", "tally.md", "tally.html", "bars.png"]
    data = json.loads(written[0].read_text(encoding="utf-8"))
    assert data == {"values": [0.25, None, 1.0], "name": ["a", "b"]}  # NaN null, numpy and tuples as JSON
    assert SEEN == [data]  # the figure is drawn from the JSON as read back, not from the document given
    markdown = written[1].read_text(encoding="utf-8")
    assert markdown == "# Tally\n\n3 values\n\n- 0.25\n- None\n- 1.0\n\n## Figures\n\n![bars.png](bars.png)\n"
    page = written[2].read_text(encoding="utf-8")
    assert "<title>a tally: out</title>" in page
    png = base64.b64encode((tmp_path / "out" / "bars.png").read_bytes()).decode("ascii")
    assert f'src="data:image/png;base64,{png}"' in page  # the figure embedded: the page opens alone


def test_a_figure_with_nothing_to_draw_is_neither_written_nor_linked(kind, tmp_path):
    written = write_report(kind, {"values": []}, tmp_path)
    assert [path.name for path in written] == ["tally.json", "tally.md", "tally.html"]
    assert render_markdown(kind, {"values": []}) == "# Tally\n\n0 values\n"
    assert "Figures" not in written[1].read_text(encoding="utf-8")


def test_registering_refuses_what_would_be_ambiguous(kind):
    with pytest.raises(ConfigError, match="already has a section 'values'"):
        register_section(kind, "values", lambda report: [])
    with pytest.raises(ConfigError, match="has no section 'nope'; it has title, count, values, empty"):
        register_section(kind, "more", lambda report: [], before="nope")
    with pytest.raises(ConfigError, match="already has a figure 'bars.png'"):
        register_figure(kind, "bars.png", _bars)
    with pytest.raises(ConfigError, match="unknown report kind .no-such-kind."):
        register_section("no-such-kind", "x", lambda report: [])


def test_the_kind_goes_with_the_scope():
    with REPORT_KINDS.scoped():
        register_report_kind("tally", "tally", "a tally")
        assert "tally" in REPORT_KINDS.names()
    assert REPORT_KINDS.names() == ["bench", "erag", "judge", "judge_cascade", "utility"]


def test_a_section_added_to_eors_own_kind_goes_with_the_scope():
    before = list(REPORT_KINDS["judge"].sections)
    with REPORT_KINDS.scoped():
        register_section("judge", "note", lambda report: ["a note"], before=before[0])
        register_figure("judge", "note.png", _bars)
        assert list(REPORT_KINDS["judge"].sections) == ["note", *before]
        assert list(REPORT_KINDS["judge"].figures) == ["note.png"]
    assert list(REPORT_KINDS["judge"].sections) == before  # eor's kind as it was: never changed in place
    assert REPORT_KINDS["judge"].figures == {}


def test_a_figure_is_a_png_in_the_reports_folder(kind):
    for name in ("../outside.png", "sub/bars2.png", "tally.json", "tally.md"):
        with pytest.raises(ConfigError, match="is a PNG's file name"):
            register_figure(kind, name, _bars)


def test_a_judge_report_whose_undefined_values_were_read_back_as_null_is_written(tmp_path):
    """NaN in a report is null in its JSON, and every section is drawn from the JSON as read back: an undefined
    ECE or p-value shows as a dash, never a crash after the JSON was written."""
    report = {
        "questions": 1,
        "scored": 1,
        "fits_used": {"scores": 1},
        "judge": {"em": 1.0, "ci": [1.0, 1.0]},
        "oracle": {"members": 1.0, "candidates": 1.0},
        "top_r_train": {"em": 1.0, "member": "Wiki@1"},
        "vs_top_r_train": {"difference": 0.0, "ci": [0.0, 0.0], "test": "exact_mcnemar", "p_value": math.nan},
        "selective": {
            "ece": math.nan,
            "ece_noise": {"mean": math.nan},
            "aurc": math.nan,
            "aurc_constant": 0.0,
            "risk_levels": [{"alpha": 0.3, "coverage": None, "error": None}],
        },
    }
    written = write_report("judge", report, tmp_path)
    markdown = written[1].read_text(encoding="utf-8")
    assert "exact mcnemar p = –" in markdown and "P(right): ECE – (a calibrated P's noise here –), AURC –" in markdown
    cascade = {**report, "selective": None, "cascade": {"em": 1.0, "ci": [1.0, 1.0], "cost": 0.5, "cost_p90": 0.5}}
    cascade["cascade"] |= {"members_run": 1.0, "judged": 0.0}
    assert "P(right) by its fits: " in write_report("judge_cascade", cascade, tmp_path / "c")[1].read_text()
