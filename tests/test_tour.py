"""The README's tour, run as written from the repository root with only what the repository ships.

Each line of the tour's code block is one command (comments stripped); `source .venv/bin/activate` is
replaced by putting this interpreter's `bin/` first on PATH, and `eor serve` (which runs until stopped) is
started, asked for its page and `/healthz`, and stopped. Afterwards `git status` shows nothing the tour
wrote: it writes only under `runs/` (ignored). Marked slow (about 5 minutes on 2 cores: the reader answers
real questions); CI runs it after the default suite (`make tour`).
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def tour_commands(readme: str) -> list[str]:
    """The commands of the first code block under "## A short tour", comments and blank lines removed."""
    section = readme.split("## A short tour", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "the tour has no ```bash block"
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


def test_the_tour_parses() -> None:
    commands = tour_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert commands[0] == "source .venv/bin/activate"
    assert all(c.startswith(("eor ", "source ")) for c in commands), commands
    assert not any("../shared" in c for c in commands), "the tour must run on what the repository ships"


def test_the_tour_runs_as_written_and_writes_only_under_runs(tmp_path: Path) -> None:
    commands = tour_commands((ROOT / "README.md").read_text(encoding="utf-8"))
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
    assert git_status() == before, "the tour wrote outside runs/"
