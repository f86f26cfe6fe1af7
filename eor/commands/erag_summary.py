"""What `eor erag` and `eor utility` print: a summary of the report they wrote (eor.evaluation.writing.writer: the
JSON first, whole or not at all, then the Markdown, the figure and the page, all drawn from the JSON as read back,
so every output shows the same numbers).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from eor.core.formatting import fixed
from eor.evaluation.writing.writer import write_report


def write_erag(out: Path, data_out: dict[str, Any]) -> str:
    """The report of `eor erag` written into `out`; its summary."""
    written = write_report("erag", data_out, out)
    return _erag_summary(read_back(written[0]), written)


def write_utility(out: Path, data_out: dict[str, Any]) -> str:
    """The report of `eor utility` written into `out`; its summary."""
    written = write_report("utility", data_out, out)
    return _utility_summary(read_back(written[0]), written)


def read_back(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _erag_summary(data: dict[str, Any], written: list[Path]) -> str:
    """What `eor erag` prints: the end-to-end mean, each labelling's means and correlations, the files."""
    k = data["settings"]["k"]
    lines = [
        f"eRAG of {data['settings']['member']} over {data['settings']['questions']} questions, k = {k}, "
        f"metric {data['settings']['downstream_metric']}",
        f"end-to-end mean: {_fmt(_mean(entry['e2e'] for entry in data['questions']))}",
        f"{'labels':<12} {'metric':<10} {'mean':>6} {'tau':>7} {'rho':>7}",
    ]
    tables = {"erag": data}
    tables.update(data["baselines"])
    for name, table in tables.items():
        for metric_name, value in table["mean"].items():
            corr = table["correlation"].get(metric_name, {})
            lines.append(
                f"{name:<12} {metric_name:<10} {_fmt(value):>6} {_fmt(corr.get('kendall_tau')):>7} "
                f"{_fmt(corr.get('spearman_rho')):>7}"
            )
    lines.append(f"wrote {', '.join(map(str, written))}")
    return "\n".join(lines)


def _utility_summary(data: dict[str, Any], written: list[Path]) -> str:
    """What `eor utility` prints: per setting and k, the mean U, P and nDCG and r(nDCG, U); the files."""
    lines = [
        f"utility of {data['settings']['member']} over {data['settings']['questions']} questions "
        f"(similarity {data['settings']['similarity']} vs gold {data['settings']['references']}); "
        f"0-shot mean P {_fmt(data['settings']['zero_shot_p'])}",
        f"{'setting':<10} {'k':>3} {'mean U':>8} {'mean P':>7} {'nDCG':>6} {'r(nDCG,U)':>10}",
    ]
    for setting, rows in data["mean"].items():
        for k, row in rows.items():
            r = data["correlation"].get(setting, {}).get(k, {}).get("pearson_r")
            lines.append(
                f"{setting:<10} {k:>3} {_fmt(row['utility']):>8} {_fmt(row['p']):>7} {_fmt(row['ndcg']):>6} "
                f"{_fmt(r):>10}"
            )
    lines.append(f"wrote {', '.join(map(str, written))}")
    return "\n".join(lines)


def _mean(values: Any) -> float:
    finite = [v for v in values if v is not None and not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


def _fmt(value: Any) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else fixed(value, 3)
