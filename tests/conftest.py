"""Shared fixtures: real packaged models (loaded once per session) and the demo data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "eor" / "demo"
SHARED_DATA = ROOT.parent / "shared" / "data"

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(autouse=True, scope="session")
def _private_generation_cache(tmp_path_factory):
    """Generations are cached in a file of this test session, never in the user's cache: each test run
    starts cold (nothing earlier runs generated can hide a reader that changed), while tests of one run
    share generations as users' commands do."""
    path = tmp_path_factory.mktemp("generation-cache") / "generations.sqlite"
    previous = os.environ.get("EOR_GENERATION_CACHE")
    os.environ["EOR_GENERATION_CACHE"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("EOR_GENERATION_CACHE", None)
    else:
        os.environ["EOR_GENERATION_CACHE"] = previous


@pytest.fixture(scope="session")
def demo_corpus() -> Path:
    return DEMO / "corpus.jsonl"


@pytest.fixture(scope="session")
def demo_questions() -> Path:
    return DEMO / "questions.jsonl"


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M through llama.cpp: fast, for mechanics (its answers are poor)."""
    from eor.core.models import resolve_model
    from eor.readers.llamacpp import LlamaCppReader

    return LlamaCppReader(resolve_model("smollm2-135m"), name="smollm2-135m", context_tokens=4096)


@pytest.fixture(scope="session")
def qwen():
    """Qwen2.5-0.5B through llama.cpp: the default reader, good enough to assert real answers."""
    from eor.core.models import resolve_model
    from eor.readers.llamacpp import LlamaCppReader

    return LlamaCppReader(resolve_model("qwen2.5-0.5b"), name="qwen2.5-0.5b", context_tokens=4096)


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch) -> Path:
    """A private eor cache folder (indexes are rebuilt there, generations cached in its default file);
    packaged models keep their own paths."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("EOR_CACHE", str(cache))
    monkeypatch.delenv("EOR_GENERATION_CACHE", raising=False)
    return cache


def write_jsonl(path: Path, rows: list) -> Path:
    import json

    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path
