"""Benchmarking retriever pools from run records (EoR paper, table 1, figures 1 and 4-6, appendix B).

`bench(records_dir, out_dir, ...)` writes `report.json`, `report.md`, `report.html` and PNG figures and returns
a summary; `build_report` computes the report dict, `write_report` writes it, `compare_reports` diffs two reports.
Modules: `vote` (the EoR system on the records, read by eor.runs.run_data), `cost_section` (members' costs and
the frontier), `probability` (the P(right) section), `judge` and `judge_cascade_report` (a judge voter's sections),
`report`, `figures`, `heatmaps`, `markdown`, `html`, `compare`, `command`. The statistics they report (paired tests,
P(right)'s figures) are eor.evaluation's.
Heavy imports (matplotlib, the sentence encoder) happen inside the functions that need them.
"""

from __future__ import annotations

from eor.bench.bench_command import bench
from eor.bench.compare import compare_reports
from eor.bench.report import build_report, write_report

__all__ = ["bench", "build_report", "compare_reports", "write_report"]
