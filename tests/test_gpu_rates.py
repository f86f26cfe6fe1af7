"""benchmarks/gpu_rates.py: the rates are the tokens (passages) over the measured seconds, and docs/scale.md's
H100 figures are the JSON the benchmark wrote there (the GPU run itself cannot run here: a CPU check with one
layer)."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks import gpu_rates as rates
from tests.conftest import ROOT


def test_rates_are_tokens_over_seconds_on_a_cpu(tmp_path):
    out = tmp_path / "rates.json"
    argv = ["--device", "cpu", "--layers", "1", "--arch", "qwen2.5-0.5b", "--batches", "1,2", "--prompt", "8"]
    argv += ["--encoder-batches", "2", "--passage", "8", "--repeats", "2"]
    assert rates.main([*argv, "--generate", "3", "--json", str(out)]) == 0
    found = json.loads(out.read_text(encoding="utf-8"))
    arch = found["architectures"]["qwen2.5-0.5b"]
    assert arch["dtype"] == "float32" and found["layers"] == 1
    assert [row["batch"] for row in arch["rows"]] == [1, 2]
    for row in arch["rows"]:
        assert row["prompt_rate"] == pytest.approx(row["batch"] * 8 / row["prompt_seconds"])
        assert row["generation_rate"] == pytest.approx(row["batch"] * 3 / row["generate_seconds"])
    (encoded,) = found["encoder"]["rows"]
    assert encoded["passages_per_second"] == pytest.approx(2 / encoded["seconds"])
    with pytest.raises(SystemExit):
        rates.main(["--arch", "qwen9"])


def test_the_scale_page_shows_the_recorded_h100_rates():
    recorded = json.loads((ROOT / "docs" / "scale-gpu-rates.json").read_text(encoding="utf-8"))
    page = (ROOT / "docs" / "scale.md").read_text(encoding="utf-8")
    section = page.split("### Reader rates on one H100, measured", 1)[1]
    table = [line for line in section.splitlines() if re.match(r"\| \d+ \|", line)]
    small, large = (recorded["architectures"][arch]["rows"] for arch in ("qwen2.5-0.5b", "qwen2.5-7b"))
    assert len(table) == len(small) == len(large)
    for line, row, big in zip(table, small, large, strict=True):
        cells = [cell.strip().replace(",", "") for cell in line.strip("|").split("|")]
        expected = [row["batch"], row["prompt_rate"], row["generation_rate"]]
        expected += [big["prompt_rate"], big["generation_rate"]]
        assert [int(cell) for cell in cells] == [round(value) for value in expected]
    assert recorded["device"] in section
    encoder = ", ".join(f"{row['passages_per_second']:,.0f}" for row in recorded["encoder"]["rows"][:-1])
    last = recorded["encoder"]["rows"][-1]["passages_per_second"]
    assert f"The passage encoder: {encoder} and {last:,.0f} passages a second" in section
