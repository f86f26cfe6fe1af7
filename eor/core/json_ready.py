"""`json_ready`: the one conversion of results into what JSON can hold, used wherever eor writes or serves
JSON (reports, eRAG results, explanations, API bodies)."""

from __future__ import annotations

import math
from typing import Any


def json_ready(value: Any) -> Any:
    """A copy of `value` that `json.dumps(..., allow_nan=False)` accepts: numpy arrays and scalars become
    Python lists and numbers, NaN and infinities None (JSON has no NaN; an undefined ratio is null, never 0),
    tuples lists, mapping keys strings, and any other object its text (a foreign retriever may put anything
    in a passage's metadata)."""
    if isinstance(value, dict):
        return {str(key): json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(item) for item in value]
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return json_ready(value.tolist())
    return str(value)
