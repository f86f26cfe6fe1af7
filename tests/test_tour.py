"""The tour of docs/tour.md, run as written from the repository root with only what the repository ships; the
README's short tour is part of it.

Each line of the tour's code block is one command (comments stripped); `source .venv/bin/activate` is
replaced by putting this interpreter's `bin/` first on PATH, and `eor serve` (which runs until stopped) is
started, asked for its page and `/healthz`, and stopped. Afterwards `git status` shows nothing the tour
wrote: it writes only under `runs/` (ignored). The run is marked slow (about 2.5 minutes on 2 cores: the reader
answers real questions); CI runs it after the default suite (`make slow`). The walk of one's own documents in
docs/guides.md is run the same way. The README's short tour is checked
fast: each of its commands is one of the full tour's, in the same order, so the README shows no command that
the slow run does not run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
#: the full tour (run here) and the README's short one (a part of it), each the first bash block under its heading
TOUR = (ROOT / "docs" / "tour.md", "## Every command")
SHORT_TOUR = (ROOT / "README.md", "## A short tour")
#: the walk of one's own documents, run as written too (on the example folder the repository ships)
DOCUMENTS_WALK = (ROOT / "docs" / "guides.md", "### A folder of your own documents")


def tour_commands(page: Path, heading: str) -> list[str]:
    """The commands of the first code block under `heading` in `page`, comments and blank lines removed."""
    text = page.read_text(encoding="utf-8")
    assert f"\n{heading}\n" in text, f"{page.name} has no {heading!r}"
    section = text.split(f"\n{heading}\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, f"{page.name}, {heading!r}: no ```bash block"
    commands = []
    for line in block.group(1).splitlines():
        command = line.split("  #", 1)[0].strip()
        if command and not command.startswith("#"):
            commands.append(command)
    return commands


def git_status() -> set[str]:
    out = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(out.stdout.splitlines())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve_and_stop(command: str, env: dict[str, str], log: Path) -> None:
    """Start `eor serve ...` on a free port, check its page and /healthz, stop it (its output goes to `log`)."""
    port = free_port()
    argv = [*shlex.split(command), "--port", str(port)]
    with log.open("w") as sink:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()[-3000:]
            try:
                if requests.get(f"{base}/healthz", timeout=5).status_code == 200:
                    break
            except requests.RequestException:  # not listening yet, or busy loading the models
                time.sleep(0.5)
        else:
            raise AssertionError(f"{command}: not ready within 300 s\n{log.read_text()[-3000:]}")
        page = requests.get(f"{base}/", timeout=10)
        assert page.status_code == 200 and "<html" in page.text.lower()
    finally:
        process.terminate()
        process.wait(120)
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("tour", [TOUR, SHORT_TOUR, DOCUMENTS_WALK], ids=["docs/tour.md", "README.md", "guides.md"])
def test_the_tour_parses(tour: tuple[Path, str]) -> None:
    commands = tour_commands(*tour)
    assert commands[0] == "source .venv/bin/activate"
    assert all(c.startswith(("eor ", "source ")) for c in commands), commands
    assert not any("../shared" in c for c in commands), "the tour must run on what the repository ships"


def test_the_short_tour_is_part_of_the_full_one() -> None:
    """Every command of the README's tour is run by the slow test, after the commands it comes after there."""
    full, short = tour_commands(*TOUR), tour_commands(*SHORT_TOUR)
    missing = [command for command in short if command not in full]
    assert not missing, f"README.md's tour shows commands docs/tour.md does not run: {missing}"
    positions = [full.index(command) for command in short]
    assert positions == sorted(positions), "README.md's tour runs its commands in another order than docs/tour.md"


@pytest.mark.slow
@pytest.mark.parametrize("tour", [TOUR, DOCUMENTS_WALK], ids=["docs/tour.md", "guides.md"])
def test_the_tour_runs_as_written_and_writes_only_under_runs(tour: tuple[Path, str], tmp_path: Path) -> None:
    commands = tour_commands(*tour)
    if tour == DOCUMENTS_WALK:  # a first walk: `eor init` writes a folder that is not there yet
        shutil.rmtree(ROOT / "runs" / "my-pool", ignore_errors=True)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    before = git_status()
    for command in commands:
        if command.startswith("source "):
            continue
        start = time.monotonic()
        if command.startswith("eor serve"):
            serve_and_stop(command, env, tmp_path / "serve.log")
        else:
            done = subprocess.run(command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True)
            assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
            assert "Traceback" not in done.stderr, f"{command}\n{done.stderr[-3000:]}"
        print(f"{time.monotonic() - start:6.1f} s  {command}", flush=True)
    assert git_status() == before, f"{tour[0].name} wrote outside runs/"
