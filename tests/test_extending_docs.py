"""docs/extending.md's examples run: every Python block, in order, in one namespace, from the repository
root; and its entry point block is the example package's (tests/plugin_package)."""

from __future__ import annotations

import contextlib
import os
import re

import pytest

from tests.conftest import ROOT

DOC = ROOT / "docs" / "extending.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", DOC.read_text(encoding="utf-8"), flags=re.S | re.M)


@pytest.fixture
def registries():
    """The examples register a source type, an operator, a metric, a pooling and a voter: the other tests
    must not see them."""
    from eor.learning.crossval import CANDIDATES
    from retrievers.operator_type import OPERATORS
    from retrievers.registry import SOURCE_TYPES
    from voters.loading import VOTER_KINDS
    from voters.pooling import POOLINGS
    from voters.similarity.registry import METRICS

    with contextlib.ExitStack() as stack:
        for registry in (SOURCE_TYPES, OPERATORS, POOLINGS, METRICS, CANDIDATES, VOTER_KINDS):
            stack.enter_context(registry.scoped())
        yield


def test_every_python_example_runs(isolated_cache, monkeypatch, registries):
    blocks = _blocks("python")
    assert len(blocks) >= 7  # source type, its error, operator, metric, pooling, voter, reader
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": "extending_docs"}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"docs/extending.md, python block {number}", "exec"), namespace)  # noqa: S102


def test_the_entry_point_example_is_the_plugin_packages():
    (block,) = _blocks("toml")
    pyproject = (ROOT / "tests" / "plugin_package" / "pyproject.toml").read_text(encoding="utf-8")
    for section in block.strip().split("\n\n"):
        assert section in pyproject, section
    assert os.path.isdir(ROOT / "tests" / "plugin_package" / "eor_example_plugin")
