"""The files `eor erag` and `eor utility` write into their folder, and the summary they print.

The JSON holds the full result and is written first, whole or not at all; the Markdown tables and the PNG
figure are drawn from the JSON as read back (NaN as None), so every output shows the same numbers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from eor.core.atomic import write_text_atomically
from eor.core.formatting import fixed
from eor.core.json_ready import json_ready
from eor.erag.erag_report import erag_markdown, utility_markdown
from eor.erag.plots import plot_erag, plot_utility


def write_json(path: Path, data: Any) -> None:
    """Written whole or not at all (a kill leaves no half file)."""

    write_text_atomically(path, json.dumps(json_ready(data), ensure_ascii=False, indent=2) + "\n")


def write_erag(out: Path, data_out: dict[str, Any]) -> str:
    """erag.json, then erag.md and erag.png from the JSON view (NaN as None); the summary."""

    write_json(out / "erag.json", data_out)
    data_out = json.loads((out / "erag.json").read_text(encoding="utf-8"))
    write_text_atomically(out / "erag.md", erag_markdown(data_out))
    plot_erag(data_out, out / "erag.png")
    return _erag_summary(data_out, out)


def _erag_summary(data: dict[str, Any], out: Path) -> str:
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
    lines.append(f"wrote {out / 'erag.json'}, {out / 'erag.md'}, {out / 'erag.png'}")
    return "\n".join(lines)


def write_utility(out: Path, data_out: dict[str, Any]) -> str:
    """utility.json, then utility.md and utility.png from the JSON view; the summary."""

    write_json(out / "utility.json", data_out)
    data_out = json.loads((out / "utility.json").read_text(encoding="utf-8"))
    write_text_atomically(out / "utility.md", utility_markdown(data_out))
    plot_utility(data_out, out / "utility.png")
    return _utility_summary(data_out, out)


def _utility_summary(data: dict[str, Any], out: Path) -> str:
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
    lines.append(f"wrote {out / 'utility.json'}, {out / 'utility.md'}, {out / 'utility.png'}")
    return "\n".join(lines)


def _mean(values: Any) -> float:
    finite = [v for v in values if v is not None and not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan


def _fmt(value: Any) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else fixed(value, 3)
