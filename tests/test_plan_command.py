"""eor.commands.plan_command and `eor plan`: reader time from a pilot's tokens and rates, worked out by hand."""

from __future__ import annotations

import json

import pytest

from eor.cli import main
from eor.commands.plan_command import Pilot, estimate
from eor.core.errors import InputError


def test_the_estimate_by_hand() -> None:
    pilot = Pilot(
        questions=10, prompt_tokens=1000, generated_tokens=50, prompt_rate=200, generation_rate=25, overhead=1.2
    )
    result = estimate(pilot, 100, replicas=2)
    # 100 × (1000 / 200 + 50 / 25) = 700 reader seconds; × 1.2 overhead / 2 replicas = 420 s of wall time
    assert result["reader_seconds"] == pytest.approx(700) and result["wall_seconds"] == pytest.approx(420)
    assert (result["prompt_tokens"], result["generated_tokens"]) == (100_000, 5_000)
    faster = estimate(pilot, 100, prompt_rate=20_000, generation_rate=2_500)  # a GPU server's rates
    assert faster["reader_seconds"] == pytest.approx(7) and faster["wall_seconds"] == pytest.approx(8.4)
    with pytest.raises(InputError):
        estimate(pilot, 0)
    with pytest.raises(InputError):
        Pilot(questions=1, prompt_tokens=1, generated_tokens=1, prompt_rate=0, generation_rate=1)


def test_a_pilot_from_a_run_folder_and_eor_plan(tmp_path, capsys) -> None:
    stats = {
        "prompt_tokens": 2000,
        "prompt_seconds": 10.0,
        "generated_tokens": 100,
        "generation_seconds": 4.0,
        "questions": 2,
        "wall_seconds": 21.0,
    }
    (tmp_path / "generation.json").write_text(json.dumps(stats))
    pilot = Pilot.from_run(tmp_path)
    assert pilot == Pilot(2, 1000.0, 50.0, 200.0, 25.0, 1.5)  # 21 s of wall for 14 s of reader
    assert main(["plan", str(tmp_path), "--questions", "100", "--replicas", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["wall_seconds"] == pytest.approx(100 * 7 * 1.5 / 3)
    assert main(["plan", str(tmp_path), "--questions", "100"]) == 0
    assert "reader time 0.19 h" in capsys.readouterr().out  # 700 s
    with pytest.raises(InputError, match="generation.json"):
        Pilot.from_run(tmp_path / "missing")
