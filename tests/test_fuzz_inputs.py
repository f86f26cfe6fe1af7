"""Bad input, fuzzed: every loader of user files either returns what it promises or raises the project's own
error (EorError) — never another exception. Inputs are hypothesis-generated (bounded example counts) and
mutations of the real files the repository ships (configs, weights files, run records).

Also through the CLI: a fuzzed records file given to `eor train` ends with `eor: error: ...`, exit status 1,
no traceback and no weights file.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eor.core.answers import exact_match, normalize_answer, token_f1
from eor.core.config import EnsembleConfig, load_config
from eor.core.data import load_questions
from eor.core.errors import EorError
from eor.core.results import Record
from eor.runs.records import read_records
from tests.conftest import ROOT

FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats() | st.text(max_size=12)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _mutations(document: dict, keys: list[str]) -> st.SearchStrategy[dict]:
    """`document` with one of `keys` (or a new key) replaced by an arbitrary value, or removed."""

    def mutate(choice: tuple[str, object, bool]) -> dict:
        key, value, remove = choice
        copy = dict(document)
        if remove:
            copy.pop(key, None)
        else:
            copy[key] = value
        return copy

    return st.tuples(st.sampled_from([*keys, "unknown_key"]), json_values, st.booleans()).map(mutate)


# -- configs ----------------------------------------------------------------------------------------------------

SHIPPED_CONFIG = yaml.safe_load((ROOT / "configs" / "nq-offline.yaml").read_text())


def _load_config_text(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        config = load_config(path)
    except EorError:
        return
    assert isinstance(config, EnsembleConfig)
    config.to_dict()


@FUZZ
@given(_mutations(SHIPPED_CONFIG, list(SHIPPED_CONFIG)))
def test_config_loader_mutated_shipped_config(tmp_path, document):
    _load_config_text(tmp_path, yaml.safe_dump(document))


@FUZZ
@given(st.dictionaries(st.sampled_from(["reader", "voter", "prompts", "corpus", "sources"]), json_values, max_size=3))
def test_config_loader_fuzzed_sections(tmp_path, document):
    _load_config_text(tmp_path, yaml.safe_dump({"members": ["BM25@1"], **document}))


@FUZZ
@given(st.text(alphabet=string.printable + "éü—", max_size=200))
def test_config_loader_arbitrary_text(tmp_path, text):
    _load_config_text(tmp_path, text)


# -- run records --------------------------------------------------------------------------------------------------

RECORD = {"id": "q1", "question": "who?", "answers": ["x"], "members": {"A": {"answer": "x", "passages": []}}}


@FUZZ
@given(st.lists(json_values.map(json.dumps) | st.text(max_size=40), max_size=5), st.booleans())
def test_records_reader_fuzzed_lines(tmp_path, lines, compressed):
    data = "\n".join([json.dumps(RECORD), *lines]) + "\n"
    path = tmp_path / ("records.jsonl.gz" if compressed else "records.jsonl")
    path.write_bytes(gzip.compress(data.encode()) if compressed else data.encode())
    try:
        records = read_records(path)
    except EorError:
        return
    assert all(isinstance(r, Record) and isinstance(r.members, dict) for r in records)


@FUZZ
@given(st.binary(max_size=200))
def test_records_reader_arbitrary_bytes(tmp_path, blob):
    for name in ("records.jsonl", "records.jsonl.gz"):
        path = tmp_path / name
        path.write_bytes(blob)
        with contextlib.suppress(EorError):
            read_records(path)


# -- weights files ------------------------------------------------------------------------------------------------

WEIGHTS = sorted((ROOT / "docs" / "weights").glob("*.json"))


@pytest.mark.parametrize("shipped", WEIGHTS, ids=[p.name for p in WEIGHTS])
def test_weights_loader_mutated_shipped_files(tmp_path, shipped):
    from voters import load_voter

    document = json.loads(shipped.read_text())

    @FUZZ
    @given(_mutations(document, list(document)))
    def check(mutated):
        path = tmp_path / "weights.json"
        path.write_text(json.dumps(mutated))
        with contextlib.suppress(EorError):
            load_voter(path)

    check()


@FUZZ
@given(json_values | st.text(max_size=50).map(lambda t: {"raw": t}))
def test_weights_loader_arbitrary_documents(tmp_path, document):
    from voters import load_voter

    path = tmp_path / "weights.json"
    path.write_text(json.dumps(document))
    with contextlib.suppress(EorError):
        load_voter(path)


# -- question files -----------------------------------------------------------------------------------------------


@FUZZ
@given(st.lists(json_values.map(json.dumps) | st.text(max_size=40), min_size=1, max_size=5), st.integers(-1, 3))
def test_question_files(tmp_path, lines, limit):
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")
    try:
        questions = load_questions(path, limit=limit or None)
    except EorError:
        return
    assert len({q.id for q in questions}) == len(questions)
    assert all(q.question.strip() for q in questions)


# -- answer normalisation -------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60))
def test_answer_normalisation_properties(a, b):
    once = normalize_answer(a)
    assert normalize_answer(once) == once  # idempotent
    assert exact_match(a, b) in (0.0, 1.0) and exact_match(a, b) == exact_match(b, a)
    assert 0.0 <= token_f1(a, b) <= 1.0
    assert exact_match(a, a) == 1.0 and token_f1(a, a) == 1.0
    if exact_match(a, b):
        assert token_f1(a, b) == 1.0


# -- the CLI ------------------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(json_values.map(json.dumps), min_size=1, max_size=4))
def test_train_on_fuzzed_records_fails_cleanly(tmp_path, lines):
    from eor.cli import main

    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(lines) + "\n")
    out = tmp_path / "weights.json"
    out.unlink(missing_ok=True)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        status = main(["train", str(records), "--out", str(out), "--voter", "paper", "--metrics", "em,f1"])
    assert status == 1
    assert stderr.getvalue().startswith("eor: error:") and "Traceback" not in stderr.getvalue()
    assert not out.exists()
