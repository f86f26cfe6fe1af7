"""A non-editable install answers a question from another directory, with an empty cache folder.

`make wheel-install TARGET=DIR` makes a new virtual environment and installs `.[offline]` into it, not
editable, with the same torch and llama.cpp build as `make install` (llama.cpp is compiled again: about 5–7
minutes on 2 cores). Then `eor ask` runs from an empty folder with `EOR_CACHE` pointing at an empty cache and
`--no-cache`: the default config, the demo corpus and the models must come from the installed packages.
Marked slow; CI runs it with the tour (`make slow`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{argv}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_a_wheel_install_answers_from_another_directory(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("EOR_", "PYTHON", "VIRTUAL_ENV"))}
    run(["make", "-s", "wheel-install", f"TARGET={venv}"], cwd=ROOT, env=env, timeout=1800)
    python = venv / "bin" / "python"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env["EOR_CACHE"] = str(tmp_path / "empty-cache")
    where = run([str(python), "-c", "import eor; print(eor.__file__)"], cwd=elsewhere, env=env).stdout.strip()
    site = run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    assert Path(where).is_relative_to(site), f"eor imported from {where}, not from the installed wheel"
    done = run(
        [str(venv / "bin" / "eor"), "ask", "who was the first president of the united states", "--no-cache"],
        cwd=elsewhere,
        env=env,
        timeout=600,
    )
    assert "Answer:" in done.stdout and "Washington" in done.stdout, done.stdout
    assert not list(elsewhere.iterdir()), "eor ask wrote into the working directory"
