"""Evaluation mathematics on plain numpy arrays: retriever inconsistency, error breakdown, upper bound.

Everything here works on (members × questions) arrays and strings, so it is independent of how records
are stored; the modules are `inconsistency` (RWR, MRWR, MRLR), `error_breakdown` (E_r, E_h, E_e, lucky
guess and their RWR_E), `upper_bound` (the oracle voter per pool size), `stats` (the bootstrap and paired
tests of two systems on the same questions) and `selective` (how good a P(right) is: calibration, risk and
coverage). Training and `eor bench` both report with them.
"""
