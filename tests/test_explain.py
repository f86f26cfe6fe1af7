"""`eor ask --explain`: a short account a person reads (eor.cli.account), for the README's demo question with the
default config, the shipped NQ cascade and the judged cascade (real models, real corpora: slow), each under 40
lines, without the voter's raw account (that is `--explain full` and `--json`)."""

from __future__ import annotations

import pytest

from eor.cli import main
from tests.conftest import ROOT

QUESTION = "who wrote the origin of species"  # the README's


@pytest.mark.slow
@pytest.mark.parametrize("config", ["default", "nq-offline", "nq-judge-cascade"])
def test_explain_is_a_short_account(config, capsys):
    assert main(["ask", QUESTION, "--config", str(ROOT / "configs" / f"{config}.yaml"), "--explain"]) == 0
    out = capsys.readouterr().out
    print(out)
    lines = out.splitlines()
    assert len(lines) < 40, out
    why = lines.index("Why:")
    assert lines[why + 1].startswith("  chosen:    ") and lines[why + 2].startswith("  evidence:  ")
    assert "Darwin" in out and "  agreement: " in out
    assert "{" not in out and "similarity" not in out  # no raw account
