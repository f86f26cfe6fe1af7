"""`eor bench`'s report from run records (EoR paper, table 1, figures 1 and 4-6, appendix B), and `eor compare`.

`build_report` computes the report dict (eor.evaluation.writing.writer writes it: `write_report("bench", report,
folder)`), `compare_reports` diffs two reports. Modules: `report`, `vote` (the EoR system on the records, read by
eor.runs.run_data), `cost_section` (members' costs and the frontier), `probability` (the P(right) section), `judge`
and `judge_cascade_report` (a judge voter's report and its cascade's; their sections are
eor.evaluation.writing.judge_sections), `compare`. The measures they report are eor.evaluation's;
the command is eor.commands.bench_command.
"""

from __future__ import annotations

from eor.evaluation.bench.compare import compare_reports
from eor.evaluation.bench.report import build_report

__all__ = ["build_report", "compare_reports"]
