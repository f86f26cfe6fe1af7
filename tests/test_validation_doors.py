"""Validation once at every door (eor.pipeline.validation): each command that reads an ensemble config, and each
Python door (`Ensemble`, `Ensemble.from_config`, `create_app`), calls `validate` exactly once before anything
heavy loads; nothing past a door calls it again. Each command is stopped at its first heavy step (the reader,
the records, the sources), which comes after every place that could validate a second time; no model loads."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eor.cli import main
from eor.commands.train_command import TrainOptions, train
from eor.core.config import load_config
from eor.core.errors import ConfigError
from eor.pipeline import validation
from eor.pipeline.ensemble import Ensemble
from eor.server import app as server_app
from tests.conftest import DEMO, ROOT


class Stop(Exception):
    """Raised by the first heavy step of a command: the door is behind it (not an EorError, so `main` lets it by)."""


def _stop(*args: Any, **kwargs: Any) -> Any:
    raise Stop


@pytest.fixture
def calls(monkeypatch) -> list[Any]:
    """The configs `validate` is called with, every caller counted (they all call the module's attribute)."""
    seen: list[Any] = []
    real = validation.validate

    def counted(config: Any) -> None:
        seen.append(config)
        real(config)

    monkeypatch.setattr(validation, "validate", counted)
    return seen


@pytest.fixture
def config(tmp_path) -> Path:
    """A valid config whose reader and indexes are never reached (each command stops before them)."""
    path = tmp_path / "config.yaml"
    path.write_text(
        f"name: doors\nreader: {{model: smollm2-135m}}\ncorpus: {{path: {DEMO / 'corpus.jsonl'}}}\n"
        "members: [ReFree, BM25@1]\nvoter: {metrics: [em]}\n",
        encoding="utf-8",
    )
    return path


def _commands(config: Path, tmp: Path) -> dict[str, tuple[list[str], str]]:
    """Each command that reads a config: its arguments, and its first heavy step (stopped)."""
    c, q, r, out = str(config), str(DEMO / "questions.jsonl"), str(tmp / "records"), str(tmp / "out")
    weights = str(tmp / "w.json")
    return {
        "ask": (["ask", "who wrote hamlet", "--config", c, "--no-cache"], "eor.pipeline.ensemble.build_reader"),
        "run": (["run", "--config", c, "--data", q, "--out", out, "--no-cache"], "eor.pipeline.ensemble.build_reader"),
        "retrieve": (["retrieve", "who wrote hamlet", "--config", c, "--members", "BM25@1"],
                     "eor.cli.handlers.retrieve.source_pool"),
        "design": (["design", r, "--config", c, "--out", out], "eor.commands.design_command.load_run"),
        "erag": (["erag", "--config", c, "--data", q, "--member", "BM25", "--out", out, "--no-cache"],
                 "eor.pipeline.executor.build_reader"),
        "utility": (["utility", "--config", c, "--data", q, "--member", "BM25", "--similarity", "f1", "--out", out,
                     "--no-cache"], "eor.pipeline.executor.build_reader"),
        "bench --config": (["bench", r, "--config", c, "--out", out], "eor.commands.bench_command.build_report"),
        "train --config": (["train", r, "--out", weights, "--config", c], "eor.learning.training.load_runs"),
        "train --voter judge": (["train", r, "--out", weights, "--voter", "judge", "--config", c],
                                "eor.learning.judge_data.read_runs"),
        "train --voter cascade --judge": (["train", r, "--out", weights, "--voter", "cascade", "--judge",
                                           str(tmp / "judge.json"), "--config", c],
                                          "eor.learning.judged_training.load_voter"),
    }  # fmt: skip


COMMANDS = list(_commands(Path("c"), Path("t")))


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_validates_its_config_once_before_its_first_heavy_step(
    command, config, tmp_path, calls, monkeypatch
) -> None:
    argv, heavy = _commands(config, tmp_path)[command]
    monkeypatch.setattr(heavy, _stop)
    with pytest.raises(Stop):
        main(argv)
    assert len(calls) == 1
    assert calls[0].name == "doors"


def test_serve_validates_once_and_its_ensemble_does_not_again(config, calls, monkeypatch) -> None:
    """`eor serve` up to the worker thread's first step, building the ensemble (stopped at its reader)."""
    real = server_app.create_app

    def building(*args: Any, loader: Callable[[], Any], **kwargs: Any) -> Any:
        app = real(*args, loader=loader, **kwargs)
        assert len(calls) == 1  # the door, before the application
        loader()  # what the worker thread does first
        return app

    monkeypatch.setattr("eor.server.serving.create_app", building)
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", _stop)
    with pytest.raises(Stop):
        main(["serve", "--config", str(config), "--no-cache"])
    assert len(calls) == 1


@pytest.mark.parametrize(
    "door",
    [
        lambda path: Ensemble(load_config(path), cache=False),
        lambda path: Ensemble.from_config(path, cache=False),
        lambda path: server_app.create_app(load_config(path)).state.worker._loader(),
    ],
    ids=["Ensemble", "Ensemble.from_config", "create_app"],
)
def test_each_python_door_validates_once_before_the_reader(door, config, calls, monkeypatch) -> None:
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", _stop)
    with pytest.raises(Stop):
        door(config)
    assert len(calls) == 1


def test_a_door_that_validated_builds_its_ensemble_without_validating_again(config, calls, monkeypatch) -> None:
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", _stop)
    loaded = validation.load_valid_config(config)
    for build in (Ensemble, Ensemble.from_config):
        with pytest.raises(Stop):
            build(loaded, cache=False, validated=True)
    assert len(calls) == 1


def test_eor_design_trains_its_pool_without_validating_it_again(config, tmp_path, calls, monkeypatch) -> None:
    """`eor design` trains its voters on the pool it wrote from the validated candidates (TrainOptions.pool)."""
    monkeypatch.setattr("eor.learning.training.load_runs", _stop)
    with pytest.raises(Stop):
        train(tmp_path / "records", tmp_path / "w.json", TrainOptions(pool_config=config, pool=load_config(config)))
    assert calls == []
    with pytest.raises(Stop):  # without `pool`, `train` is the door of its --config
        train(tmp_path / "records", tmp_path / "w.json", TrainOptions(pool_config=config))
    assert len(calls) == 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["erag", "--member", "Nope@2"],
            "--member 'Nope@2': unknown source(s) Nope; available: BM25, PK, ReFree, Wiki",
        ),
        (["utility", "--member", "BM25@XY"], "--member: invalid retriever name 'BM25@XY'"),
        (["erag", "--member", "BM25@1:fs"], "--member 'BM25@1:fs': unknown prompt variant 'fs'"),
    ],
)
def test_erag_and_utility_check_their_member_as_the_config_s_own(argv, message, config, tmp_path, capsys) -> None:
    data = ["--data", str(DEMO / "questions.jsonl"), "--out", str(tmp_path / "out"), "--no-cache"]
    assert main([argv[0], "--config", str(config), *argv[1:], *data]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"eor: error: {message}") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_bad_config_fails_at_the_door_of_commands_that_skipped_it(tmp_path, capsys) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("members: [ReFree, BM25@1]\nvoter: {metrics: [em, f2]}\n", encoding="utf-8")
    records, out = str(tmp_path / "records"), str(tmp_path / "out")
    for argv in (
        ["retrieve", "q", "--config", str(path)],
        ["design", records, "--config", str(path), "--out", out],
        ["bench", records, "--config", str(path), "--out", out],
        ["erag", "--config", str(path), "--data", str(DEMO / "questions.jsonl"), "--member", "BM25", "--out", out],
    ):
        assert main(argv) == 1
        assert capsys.readouterr().err.startswith("eor: error: voter.metrics: unknown similarity metric(s) f2")
    with pytest.raises(ConfigError, match="voter.metrics"):
        validation.load_valid_config(path)


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        (
            "{rule: nouns}",
            "judge.rule: unknown span rule 'nouns'; choose one of entities, ngrams, phrases, pointed, or null",
        ),
        ("{members: [ReFree, Nope]}", "judge.members: Nope: name members of the config (ReFree, BM25@1)"),
        ("{members: []}", "judge.members: none named"),
        ("{after: everything}", "judge.after: 'everything' is not one of members, cascade"),
    ],
)
def test_the_judge_section_is_checked_at_the_door(judge, message, config, calls, monkeypatch) -> None:
    """Before any model or weights file loads: `eor ask` stops at its door, not at the reader."""
    config.write_text(config.read_text() + f"judge: {judge}\n", encoding="utf-8")
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", _stop)
    with pytest.raises(ConfigError) as raised:
        validation.load_valid_config(config)
    assert str(raised.value).startswith(message)
    assert main(["ask", "who wrote hamlet", "--config", str(config), "--no-cache"]) == 1  # not Stop: the door


def test_a_missing_judge_file_fails_before_the_reader_where_the_judge_answers(config, calls, monkeypatch) -> None:
    """`eor ask` reads the judge's file before the reader loads; `eor run`, which records without it (and may
    score the records a judge is then trained on), passes the door and reaches its reader."""
    config.write_text(config.read_text() + "judge: {weights: missing.json}\n", encoding="utf-8")
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", _stop)
    with pytest.raises(ConfigError, match="judge.weights: no file .*missing.json"):
        Ensemble.from_config(config, cache=False)
    questions, out = str(DEMO / "questions.jsonl"), str(config.parent / "out")
    with pytest.raises(Stop):
        main(["run", "--config", str(config), "--data", questions, "--out", out, "--no-cache"])


def _validate_calls() -> dict[str, int]:
    """Each project module's calls of `validate`, by path; ValueError for `validate` imported by name."""
    found: dict[str, int] = {}
    for package in ("eor", "retrievers", "voters"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                by_name = isinstance(node, ast.ImportFrom) and node.module == "eor.pipeline.validation"
                if by_name and any(alias.name == "validate" for alias in node.names):
                    raise ValueError(f"{path} imports validate by name")
                called = isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Name) and node.func.id == "validate")
                    or (isinstance(node.func, ast.Attribute) and ast.unparse(node.func) == "validation.validate")
                )
                if called:
                    where = str(path.relative_to(ROOT))
                    found[where] = found.get(where, 0) + 1
    return found


def test_validate_is_called_at_the_doors_alone_through_the_module() -> None:
    """The commands' door (`load_valid_config`) and Python's (`Ensemble`, `Ensemble.from_config`, `create_app`)."""
    assert _validate_calls() == {
        "eor/pipeline/validation.py": 1,
        "eor/pipeline/ensemble.py": 2,
        "eor/server/app.py": 1,
    }
