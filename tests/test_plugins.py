"""Extending eor from another package: tests/plugin_package, installed with pip, adds a source type, a
retriever operator, a similarity metric and a reader through entry points (eor.core.plugins), and a config uses
all four."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "tests" / "plugin_package"
NOTES = [
    {"title": "Leonardo da Vinci", "text": "Leonardo da Vinci painted the Mona Lisa in Florence."},
    {"title": "Claude Monet", "text": "Claude Monet painted water lilies at Giverny."},
]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example package installed by pip into a folder of its own (the build runs offline)."""
    folder = tmp_path_factory.mktemp("plugin")
    source = shutil.copytree(PACKAGE, folder / "source")
    target = folder / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return target


def _python(installed: Path, code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), str(ROOT)]), "EOR_CACHE": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_the_plugins_are_found_and_eors_own_names_win(installed, tmp_path):
    done = _python(
        installed,
        """
import json, logging
logging.basicConfig(level=logging.WARNING)
from retrievers.builtin_sources import BM25
from retrievers.registry import source_types
from voters.similarity import available_metrics
from retrievers.operator_type import operator_types
from eor.readers import reader_backends
kinds = source_types()
print(json.dumps({"notes": kinds["notes"].summary, "bm25_is_eors": kinds["bm25"] is BM25,
                  "broken": "broken" in kinds, "metric": "length_ratio" in available_metrics(),
                  "reader": "first-title" in reader_backends(), "operators": sorted(operator_types())}))
""",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "notes": "passages written in the config",
        "bm25_is_eors": True,
        "broken": False,
        "metric": True,
        "reader": True,
        "operators": ["REV"],
    }
    assert "skipping eor.sources plugin 'broken' (eor_example_plugin:MISSING): it cannot be loaded" in done.stderr
    assert "skipping eor.operators plugin 'FLIP': it holds the operator 'REV' of another word" in done.stderr


def test_a_config_uses_the_plugins_source_operator_metric_and_reader(installed, tmp_path):
    config = tmp_path / "plugins.yaml"
    config.write_text(
        json.dumps(
            {
                "name": "plugins",
                "reader": {"backend": "first-title", "model": "none"},
                "sources": {"Notes": {"type": "notes", "params": {"notes": NOTES, "depth": 2}}},
                "members": ["ReFree", "Notes@1", "Notes@2", "Notes@REV@1"],
                "voter": {"metrics": ["em", "length_ratio"]},
            }
        )
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "eor.cli",
            "ask",
            "who painted the mona lisa",
            "--config",
            str(config),
            "--json",
            "--all-members",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), str(ROOT)]), "EOR_CACHE": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    answers = {name: output["answer"] for name, output in result["members"].items()}
    # The notes source ranks the Mona Lisa note first (4 shared words, Monet's 1); the reader answers its
    # title; @REV puts Monet's note first.
    assert answers == {
        "ReFree": "unknown",
        "Notes@1": "Leonardo da Vinci",
        "Notes@2": "Leonardo da Vinci",
        "Notes@REV@1": "Claude Monet",
    }
    assert [p["title"] for p in result["members"]["Notes@2"]["passages"]] == ["Leonardo da Vinci", "Claude Monet"]
    assert [p["title"] for p in result["members"]["Notes@REV@1"]["passages"]] == ["Claude Monet"]
    assert result["answer"] == "Leonardo da Vinci"  # two members agree (em 1, length ratio 1)


def test_an_unknown_parameter_of_a_plugin_source_is_named(installed, tmp_path):
    done = _python(
        installed,
        """
from retrievers.registry import source_types
from retrievers.source_type import BuildContext
from eor.core.errors import ConfigError
try:
    source_types()["notes"].create("N", {"notes": [], "colour": "red"}, BuildContext())
except ConfigError as exc:
    print(exc)
""",
        tmp_path,
    )
    assert done.stdout.strip() == "source 'N': unknown parameter(s) colour; valid: depth, notes"


def test_a_plugin_voter_trains_saves_loads_and_votes(installed, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), str(ROOT)]), "EOR_CACHE": str(tmp_path)}
    weights = tmp_path / "shortest.json"
    records = ROOT / "docs" / "records"
    trained = subprocess.run(
        [sys.executable, "-m", "eor.cli", "train", str(records / "nq-train.jsonl.gz"), "--out", str(weights)]
        + ["--voter", "shortest", "--metrics", "em,f1", "--config", str(ROOT / "configs/nq-offline.yaml")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert trained.returncode == 0, trained.stderr
    assert "voter: shortest" in trained.stdout
    assert json.loads(weights.read_text())["voter"] == "shortest"
    done = _python(
        installed,
        f"""
import json
from eor.evaluation.bench.vote import vote
from eor.runs.run_data import load_run
from voters import load_voter
data = load_run({str(records / "nq-dev.jsonl.gz")!r}, load_voter({str(weights)!r}).members_)
voted = vote(data, weights={str(weights)!r})
def shortest(row):
    lengths = [len(a) if a.strip() else float("inf") for a in row]
    return lengths.index(min(lengths))
print(json.dumps({{"kind": type(load_voter({str(weights)!r})).__name__,
                  "same": voted.chosen.tolist() == [shortest(row) for row in data.answers],
                  "questions": len(data.answers)}}))
""",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"kind": "ShortestVoter", "same": True, "questions": 414}
