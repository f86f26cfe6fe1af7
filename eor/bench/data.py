"""The records of a run as the arrays a benchmark needs (see `eor.runs.run_data`)."""

from __future__ import annotations

from eor.runs.run_data import RunData, load_run

__all__ = ["RunData", "load_run"]
