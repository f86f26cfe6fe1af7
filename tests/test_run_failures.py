"""`eor run` under member failures: the failed members are listed at the end, `--retry-failed` runs only them
again, merges their answers into the records and votes again; a torn last line is repaired with a message."""

from __future__ import annotations

import json
import os
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from eor.cli import main
from eor.readers.base import BatchedReader
from tests.conftest import DEMO, write_jsonl

DOWN = "EOR_TEST_FLAKY_DOWN"


class Flaky(BaseRetriever):
    """Down (raises) while the environment variable EOR_TEST_FLAKY_DOWN is 1, else one passage."""

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        if os.environ.get(DOWN) == "1":
            raise ConnectionError("search API unreachable")
        return [Document(page_content="Leonardo da Vinci painted the Mona Lisa.", metadata={"title": "Mona Lisa"})]


class Scripted(BatchedReader):
    """Answers 'Leonardo da Vinci' when the prompt holds that name, else 'unknown'."""

    name = "scripted"

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[str] = []

    def _generate_batch(self, prompts, max_tokens):
        self.prompts += prompts
        return ["Leonardo da Vinci" if "Leonardo" in prompt else "unknown" for prompt in prompts]


def config(folder: Path) -> Path:
    path = folder / "flaky.yaml"
    path.write_text(
        f"""
name: flaky
corpus: {{path: {DEMO / "corpus.jsonl"}}}
sources:
  Flaky: {{type: langchain, params: {{class: "{__name__}:Flaky"}}}}
members: [ReFree, Flaky]
voter: {{metrics: [em]}}
"""
    )
    return path


def test_failed_members_are_listed_and_retried_alone(tmp_path, isolated_cache, capsys, monkeypatch) -> None:
    readers: list[Scripted] = []
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", lambda cfg: readers.append(Scripted()) or readers[-1])
    data = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"id": f"q{n}", "question": f"who painted the mona lisa ({n})", "answers": ["Leonardo da Vinci"]}
            for n in range(3)
        ],
    )
    out = tmp_path / "run"
    args = ["run", "--config", str(config(tmp_path)), "--data", str(data), "--out", str(out), "--no-cache"]
    monkeypatch.setenv(DOWN, "1")
    assert main(args) == 0
    summary = capsys.readouterr().out
    assert "members that failed (left out of those questions' votes):" in summary
    assert "Flaky" in summary
    assert "3 questions; e.g. retrieval failed: ConnectionError: search API unreachable" in summary
    assert "--retry-failed" in summary
    before = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert all(r["degraded"] == ["Flaky"] and list(r["members"]) == ["ReFree"] for r in before)
    assert all(r["vote"]["answer"] == "unknown" for r in before)

    monkeypatch.setenv(DOWN, "0")  # the API is back: only Flaky runs again
    assert main([*args, "--retry-failed"]) == 0
    summary = capsys.readouterr().out
    assert "retried the failed members of 3 questions: 3 member answers recovered" in summary
    assert "members that failed" not in summary
    after = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in after] == ["q0", "q1", "q2"]  # rewritten in place, nothing duplicated
    for old, new in zip(before, after, strict=True):
        assert list(new["members"]) == ["ReFree", "Flaky"] and "degraded" not in new
        assert new["members"]["ReFree"] == old["members"]["ReFree"]  # the members that worked are kept as they were
        assert new["members"]["Flaky"]["answer"] == "Leonardo da Vinci"
        assert set(new["vote"]["scores"]) == {"ReFree", "Flaky"}
    assert len(readers[-1].prompts) == 3 and all("Assuming" in p for p in readers[-1].prompts)  # Flaky's only
    assert "EoR (vote)" in summary
    # a second --retry-failed has nothing to do
    assert main([*args, "--retry-failed"]) == 0
    assert "retried the failed members of 0 questions" in capsys.readouterr().out


def test_a_torn_last_line_is_repaired_with_a_message(tmp_path, isolated_cache, capsys, monkeypatch) -> None:
    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", lambda cfg: Scripted())
    monkeypatch.setenv(DOWN, "0")
    data = write_jsonl(tmp_path / "q.jsonl", [{"id": "q0", "question": "who painted the mona lisa"}])
    out = tmp_path / "run"
    args = ["run", "--config", str(config(tmp_path)), "--data", str(data), "--out", str(out), "--no-cache"]
    assert main(args) == 0
    capsys.readouterr()
    finished = (out / "records.jsonl").read_bytes()
    (out / "records.jsonl").write_bytes(finished + b'{"id": "q1", "ques')
    assert main(args) == 0
    assert "repaired: cut a torn last line (18 bytes)" in capsys.readouterr().out
    assert (out / "records.jsonl").read_bytes() == finished
