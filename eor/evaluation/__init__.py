"""The one evaluation package: every measure of the reports and of training, with one home each, and the reports.

The measures work on (members × questions) arrays and strings, so they are independent of how records are stored:
`inconsistency` (RWR, MRWR, MRLR), `error_breakdown` (E_r, E_h, E_e, lucky guess and their RWR_E), `upper_bound`
(the oracle voter per pool size, Top R), `stats` (the bootstrap and paired tests of two systems on the same
questions) and `selective` (how good a P(right) is: calibration, risk and coverage). Training and `eor bench` both
report with them. `erag`: document-level evaluation (eRAG's labels and retrieval metrics, their correlation with
end-to-end quality, context utility); `bench`: `eor bench`'s report from run records and `eor compare`; `writing`:
the one writer of every report (JSON, Markdown, figures, HTML page) and the sections of each.
"""
