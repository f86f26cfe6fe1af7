"""Records that grow by the judge's scores: `eor run` with a `judge:` section scores each recorded question's
candidates without generating anything again, keeps every other byte of each record, resumes where it stopped,
and refuses scores made by another judge (reader, span rule, K)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eor.cli import main
from eor.commands.runner import run
from eor.core.answers import normalize_answer
from eor.core.errors import InputError
from eor.runs.records import RECORDS_FILE
from tests.conftest import DEMO

MEMBERS = ["ReFree", "BM25@1", "Wiki@2"]


def _config(folder: Path, *, judge: str = "", name: str = "judged") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(
        f"""
name: judged
reader: {{model: smollm2-135m, max_tokens: 8, llama_cpp: {{context_tokens: 2048}}}}
corpus: {{path: {DEMO / "corpus.jsonl"}}}
members: {json.dumps(MEMBERS)}
voter: {{metrics: [em, f1]}}
{judge}
"""
    )
    return path


def _run(config: Path, out: Path) -> int:
    data = DEMO / "questions.jsonl"
    return main(["run", "--config", str(config), "--data", str(data), "--limit", "2", "--out", str(out), "--no-cache"])


def _lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / RECORDS_FILE).read_text().splitlines()]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("judged")
    assert _run(_config(folder), folder / "run") == 0
    return folder


def test_records_grow_by_scores_and_keep_every_other_byte(recorded, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    shutil.copytree(recorded / "run", out)
    before = (out / RECORDS_FILE).read_text().splitlines()
    capsys.readouterr()
    config = _config(tmp_path, judge="judge: {rule: entities, k: 3, passages: true}")
    assert _run(config, out) == 0
    assert "scored the candidates of 2 questions" in capsys.readouterr().out
    after = (out / RECORDS_FILE).read_text().splitlines()
    for old, new in zip(before, after, strict=True):
        assert new.startswith(old[:-1] + ', "judge": ')  # the old line, byte for byte, then the scores
    for record in _lines(out):
        judge = record["judge"]
        assert judge["identity"]["rule"] == "entities" and judge["identity"]["k"] == 3
        assert judge["identity"]["reader"].startswith("llama.cpp:") and judge["identity"]["members"] == MEMBERS
        texts = [c["text"] for c in judge["candidates"]]
        assert len(texts) == len(set(texts))
        assert sum(c["rule"] == "entities" for c in judge["candidates"]) <= 3
        for member in MEMBERS:  # each member's answer is the candidate that names it
            answer = normalize_answer(record["members"][member]["answer"])
            wrote = [c for c in judge["candidates"] if member in c["members"]]
            assert [normalize_answer(c["text"]) for c in wrote] == ([answer] if answer else [])
        passages = {p["id"] for m in ("BM25@1", "Wiki@2") for p in record["members"][m]["passages"]}
        for candidate in judge["candidates"]:
            assert set(candidate["scores"]) == set(MEMBERS) | {f"#{p}" for p in passages}
            for summary in candidate["scores"].values():
                assert summary["logprob"] <= 0 and summary["tokens"] >= 1
    # again: nothing to score, nothing changes
    capsys.readouterr()
    assert _run(config, out) == 0
    assert "hold the judge's scores" in capsys.readouterr().out
    assert (out / RECORDS_FILE).read_text().splitlines() == after


def test_scores_of_another_judge_are_refused(recorded, tmp_path) -> None:
    out = tmp_path / "run"
    shutil.copytree(recorded / "run", out)
    assert _run(_config(tmp_path, judge="judge: {rule: entities, k: 3}"), out) == 0
    scored = (out / RECORDS_FILE).read_text()
    with pytest.raises(InputError, match=r"k: 3 → 5"):
        run(_config(tmp_path, judge="judge: {rule: entities, k: 5}", name="other"), DEMO / "questions.jsonl", out, 2)
    assert (out / RECORDS_FILE).read_text() == scored


def test_an_interrupted_scoring_goes_on_where_it_stopped(recorded, tmp_path) -> None:
    out = tmp_path / "run"
    shutil.copytree(recorded / "run", out)
    config = _config(tmp_path, judge="judge: {rule: null, k: 0, passages: false}")
    assert _run(config, out) == 0
    full = _lines(out)
    lines = (out / RECORDS_FILE).read_text().splitlines()
    first = json.loads(lines[0])
    first.pop("judge")  # as if the run had stopped after the second question's batch
    (out / RECORDS_FILE).write_text(json.dumps(first, ensure_ascii=False) + "\n" + lines[1] + "\n")
    assert _run(config, out) == 0
    assert _lines(out) == full
    assert all(c["rule"] == "members" for r in full for c in r["judge"]["candidates"])


def test_a_run_answers_without_the_judge_voter_so_that_each_question_is_scored_once(tmp_path) -> None:
    """A config whose judge names a voter records every member's answer and the vote of --weights: the questions
    are answered without the judge stage (which would score each question live, only for the records' growth
    to score it again); the scoring settings, and the config saved with the records, stay as they were."""
    from eor.commands.run_growth import answering_config
    from eor.core.config import load_config

    config = load_config(_config(tmp_path, judge="judge: {rule: entities, k: 3, passages: false, weights: j.json}"))
    answering = answering_config(config)
    assert answering.judge is not None and answering.judge.weights is None
    assert (answering.judge.rule, answering.judge.k, answering.judge.passages) == ("entities", 3, False)
    assert config.judge is not None and config.judge.weights == "j.json"  # the records' own config is untouched
    plain = load_config(_config(tmp_path, name="plain"))
    assert answering_config(plain) is plain


def test_the_null_candidate_grows_records_scored_before_and_equals_a_full_evaluation(
    recorded, tmp_path, capsys, smollm2
) -> None:
    """`judge.null_candidate`: records scored before get the null candidate alone (their candidates as they were),
    records never scored get both in one pass, and each recorded score is the model's own evaluation from an empty
    cache (llama-cpp-python's `eval` with every position's logits), token by token."""
    from llama_cpp import Llama

    from eor.pipeline.judging import NULL_ANSWERS
    from tests.test_scoring import _reference_logprobs

    judged = tmp_path / "judged"
    shutil.copytree(recorded / "run", judged)
    assert _run(_config(tmp_path, judge="judge: {rule: entities, k: 3, passages: false}"), judged) == 0
    candidates = [record["judge"]["candidates"] for record in _lines(judged)]
    fresh = tmp_path / "fresh"
    shutil.copytree(recorded / "run", fresh)
    config = _config(
        tmp_path, judge="judge: {rule: entities, k: 3, passages: false, null_candidate: true}", name="null"
    )
    capsys.readouterr()
    assert _run(config, judged) == 0
    assert "scored the null candidate of 2 questions" in capsys.readouterr().out
    assert [record["judge"]["candidates"] for record in _lines(judged)] == candidates
    assert _run(config, fresh) == 0
    assert "scored the candidates of 2 questions and the null candidate of 2" in capsys.readouterr().out
    assert _lines(fresh) == _lines(judged)  # one pass or two, the same records
    chunk = smollm2.prefix_chunk
    reference = Llama(
        model_path=str(smollm2.model_path),
        n_ctx=smollm2.context_tokens,
        n_batch=chunk,
        n_ubatch=chunk,
        n_threads=smollm2.threads,
        logits_all=True,
        verbose=False,
    )
    try:
        for record in _lines(judged):
            null = record["judge"]["null"]
            assert null["texts"] == list(NULL_ANSWERS) and set(null["scores"]) == set(MEMBERS)
            for member, summaries in null["scores"].items():
                prompt = smollm2.chat_tokens(record["members"][member]["prompt"])
                texts = [smollm2.continuation_tokens(text) for text in NULL_ANSWERS]
                for summary, logprobs in zip(summaries, _reference_logprobs(reference, prompt, texts), strict=True):
                    assert summary["tokens"] == len(logprobs)
                    assert summary["logprob"] == pytest.approx(sum(logprobs), abs=1e-3)
                    assert summary["min_logprob"] == pytest.approx(min(logprobs), abs=1e-4)
    finally:
        reference.close()
    with pytest.raises(InputError, match="other phrasings"):
        lines = _lines(judged)
        lines[0]["judge"]["null"]["texts"] = ["No answer"]
        (judged / RECORDS_FILE).write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
        run(config, DEMO / "questions.jsonl", judged, 2)
