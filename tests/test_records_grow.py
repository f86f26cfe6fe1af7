"""Records that grow: `eor run` with a config that names the recorded members and more runs only the new ones on
the questions already recorded, keeps every recorded output byte for byte, updates the pool's identity, and
refuses a config that changes what is behind a recorded member (reader, corpus, prompts, sources)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eor.cli import main
from eor.commands.plan_command import Pilot
from eor.core.errors import InputError
from eor.runs.records import RECORDS_FILE, read_header, read_records
from eor.runs.run_folder import recorded_pool
from tests.conftest import DEMO

OLD = ["BM25@1", "Wiki@1"]
NEW = ["BM25#2", "(BM25+Wiki)@1", "Wiki@1:fs"]
VARIANTS = """
  variants:
    fs:
      demonstrations: [{question: who wrote hamlet, answer: William Shakespeare}]
"""


def _config(
    folder: Path,
    members: list[str],
    *,
    name: str = "grow",
    corpus: Path = DEMO / "corpus.jsonl",
    max_tokens: int = 8,
    style: str = "few-words",
    variants: str = VARIANTS,
) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        f"""
name: {name}
reader: {{model: smollm2-135m, max_tokens: {max_tokens}, llama_cpp: {{context_tokens: 2048}}}}
corpus: {{path: {corpus}}}
members: {json.dumps(members)}
voter: {{metrics: [em, f1]}}
prompts:
  style: {style}{variants}
"""
    )
    return path


def _run(config: Path, out: Path, *extra: str) -> int:
    data = DEMO / "questions.jsonl"
    return main(["run", "--config", str(config), "--data", str(data), "--limit", "3", "--out", str(out), *extra])


def _member_lines(out: Path) -> list[dict[str, str]]:
    """Each record's members, each as the exact JSON text it has in the file."""
    lines = (out / RECORDS_FILE).read_text().splitlines()
    return [
        {name: json.dumps(value, ensure_ascii=False) for name, value in json.loads(line)["members"].items()}
        for line in lines
    ]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """Three demo questions recorded with two members, packed as the repository keeps records."""
    folder = tmp_path_factory.mktemp("grow")
    assert _run(_config(folder, OLD), folder / "run", "--no-cache") == 0
    assert main(["records", "pack", str(folder / "run"), "--out", str(folder / "packed.jsonl.gz")]) == 0
    return folder


def test_records_grow_by_the_new_members_alone(recorded, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    assert main(["records", "unpack", str(recorded / "packed.jsonl.gz"), "--out", str(out)]) == 0
    before = _member_lines(out)
    capsys.readouterr()
    assert _run(_config(tmp_path, OLD + NEW), out, "--no-cache") == 0
    printed = capsys.readouterr().out
    assert "grew 3 records by 3 member(s) (BM25#2, (BM25+Wiki)@1, Wiki@1:fs): 9 member answers added" in printed
    assert "3 questions in" in printed and "(3 were already done)" in printed
    generation = json.loads((out / "generation.json").read_text())
    assert generation["generated"] == 9  # the new members' 9 answers, nothing of the recorded ones
    assert generation["grew"] is True  # some members only: not a pilot of the pool
    with pytest.raises(InputError, match="grew its records by new members"):
        Pilot.from_run(out)
    after = _member_lines(out)
    for old, new in zip(before, after, strict=True):
        assert list(new) == OLD + NEW
        assert {name: new[name] for name in OLD} == old  # byte for byte
    records = read_records(out)
    assert all(record.vote is not None and set(record.vote.scores) == set(OLD + NEW) for record in records)
    prompt = records[0].members["Wiki@1:fs"].prompt
    assert prompt.startswith("Answer each question with one or few words, as in these examples.\n\nQuestion: who")
    assert prompt.endswith(records[0].members["Wiki@1"].prompt)  # the same evidence under the variant
    assert recorded_pool(out)["members"] == OLD + NEW
    assert main(["records", "pack", str(out), "--out", str(tmp_path / "grown.jsonl.gz")]) == 0
    assert read_header(tmp_path / "grown.jsonl.gz")["pool"]["members"] == OLD + NEW
    # `--config` of the former pool trains and benchmarks its members alone.
    old_config = _config(tmp_path, OLD, name="old")
    weights = tmp_path / "old.json"
    assert main(["train", str(out), "--config", str(old_config), "--voter", "top", "--out", str(weights)]) == 0
    assert json.loads(weights.read_text())["members"] == OLD
    assert (
        main(["bench", str(out), "--config", str(old_config), "--out", str(tmp_path / "bench"), "--metrics", "em"]) == 0
    )
    assert json.loads((tmp_path / "bench" / "report.json").read_text())["names"] == OLD
    # Growing again finds nothing to add; the same config resumes as it always did.
    capsys.readouterr()
    assert _run(_config(tmp_path, OLD + NEW), out, "--no-cache") == 0
    assert "grew" not in capsys.readouterr().out and _member_lines(out) == after
    # A growth interrupted after some records (here: the last one lost its new members) resumes where it stopped.
    lines = (out / RECORDS_FILE).read_text().splitlines()
    last = json.loads(lines[-1])
    last["members"] = {name: last["members"][name] for name in OLD}
    (out / RECORDS_FILE).write_text("\n".join([*lines[:-1], json.dumps(last, ensure_ascii=False)]) + "\n")
    assert _run(_config(tmp_path, OLD + NEW), out, "--no-cache") == 0
    assert "grew 1 records by 3 member(s)" in capsys.readouterr().out
    resumed = _member_lines(out)
    assert resumed[:-1] == after[:-1] and list(resumed[-1]) == OLD + NEW  # the rest untouched, byte for byte
    again = read_records(out)[-1].members
    assert [again[name].answer for name in NEW] == [records[-1].members[name].answer for name in NEW]


def _refused(recorded: Path, tmp_path: Path, config: Path, capsys) -> str:
    out = tmp_path / "refused"
    shutil.rmtree(out, ignore_errors=True)
    assert main(["records", "unpack", str(recorded / "packed.jsonl.gz"), "--out", str(out)]) == 0
    before = (out / RECORDS_FILE).read_bytes()
    capsys.readouterr()
    assert _run(config, out, "--no-cache") == 1
    assert (out / RECORDS_FILE).read_bytes() == before  # nothing changed
    return capsys.readouterr().err


def test_another_reader_setting_is_refused(recorded, tmp_path, capsys) -> None:
    err = _refused(recorded, tmp_path, _config(tmp_path, OLD + NEW, max_tokens=16), capsys)
    assert "member BM25@1 of the records was made differently from this config's: generation:" in err
    assert '"max_tokens": 8' in err and '"max_tokens": 16' in err


def test_another_corpus_is_refused(recorded, tmp_path, capsys) -> None:
    corpus = tmp_path / "corpus.jsonl"
    lines = (DEMO / "corpus.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    corpus.write_text("\n".join([json.dumps({**first, "text": first["text"] + " Changed."}), *lines[1:]]) + "\n")
    err = _refused(recorded, tmp_path, _config(tmp_path, OLD + NEW, corpus=corpus), capsys)
    assert "member BM25@1 of the records was made differently" in err and "corpus: recorded" in err


def test_other_prompts_are_refused(recorded, tmp_path, capsys) -> None:
    err = _refused(recorded, tmp_path, _config(tmp_path, OLD + NEW, style="15-words"), capsys)
    assert "answer prompt: recorded" in err


def test_another_config_of_the_same_members_is_refused(recorded, tmp_path, capsys) -> None:
    err = _refused(recorded, tmp_path, _config(tmp_path, OLD, name="other", max_tokens=16), capsys)
    assert "holds a run of a different config" in err
    # a config that differs only in its name (a label: no record depends on it) resumes the records
    out = tmp_path / "renamed"
    assert main(["records", "unpack", str(recorded / "packed.jsonl.gz"), "--out", str(out)]) == 0
    before = (out / RECORDS_FILE).read_bytes()
    assert _run(_config(tmp_path, OLD, name="renamed"), out, "--no-cache") == 0
    assert "(3 were already done)" in capsys.readouterr().out and (out / RECORDS_FILE).read_bytes() == before


def test_unpacked_records_resume_with_their_config(recorded, tmp_path, capsys) -> None:
    """The packed header names the corpus file alone; the same config over the same file resumes them."""
    out = tmp_path / "resumed"
    assert main(["records", "unpack", str(recorded / "packed.jsonl.gz"), "--out", str(out)]) == 0
    before = (out / RECORDS_FILE).read_bytes()
    assert _run(_config(tmp_path, OLD), out, "--no-cache") == 0
    assert "(3 were already done)" in capsys.readouterr().out and (out / RECORDS_FILE).read_bytes() == before


def test_a_dropped_member_is_refused(recorded, tmp_path, capsys) -> None:
    err = _refused(recorded, tmp_path, _config(tmp_path, ["BM25@1", *NEW]), capsys)
    assert "holds a run of a different config: the records hold member(s) Wiki@1 that this config lacks" in err


def test_records_without_their_config_cannot_grow(recorded, tmp_path, capsys) -> None:
    out = tmp_path / "bare"
    out.mkdir()
    shutil.copy(recorded / "run" / RECORDS_FILE, out / RECORDS_FILE)
    assert _run(_config(tmp_path, OLD + NEW), out, "--no-cache") == 1
    assert "holds records of other members and no config.json: unpack packed records" in capsys.readouterr().err


def test_unpack_refuses_a_folder_with_records(recorded, tmp_path, capsys) -> None:
    assert main(["records", "unpack", str(recorded / "packed.jsonl.gz"), "--out", str(recorded / "run")]) == 1
    assert "already holds records" in capsys.readouterr().err
