"""A non-editable install answers a question from another directory, with an empty cache folder.

The project is built into a wheel and installed (not editable) into a new virtual environment; its
dependencies are those of the environment running the tests, seen through a `.pth` file, so that
llama-cpp-python is not compiled a second time (the editable install of that environment is not seen: a
`.pth` line adds a folder, not the `.pth` hooks inside it). Then `eor ask` runs from an empty folder with
`EOR_CACHE` pointing at an empty cache: the default config, the demo corpus and the explorer's files must
come from the installed package. Marked slow (about a minute); CI runs it with the tour (`make slow`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{argv}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def test_a_wheel_install_answers_from_another_directory(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip"]
    run([*pip, "wheel", "--quiet", "--no-deps", "--no-build-isolation", str(ROOT), "-w", str(wheels)])
    (wheel,) = wheels.glob("eor-*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    run([*pip, "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)])
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("EOR_", "PYTHON"))}
    env["EOR_CACHE"] = str(tmp_path / "empty-cache")
    where = run([str(python), "-c", "import eor; print(eor.__file__)"], cwd=elsewhere, env=env).stdout.strip()
    assert Path(where).is_relative_to(site), f"eor imported from {where}, not from the wheel install"

    done = run(
        [str(venv / "bin" / "eor"), "ask", "who was the first president of the united states", "--no-cache"],
        cwd=elsewhere,
        env=env,
        timeout=600,
    )
    assert "Answer:" in done.stdout and "Washington" in done.stdout, done.stdout
    assert not list(elsewhere.iterdir()), "eor ask wrote into the working directory"
