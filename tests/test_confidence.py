"""Reader confidence (eor.core.confidence): llama.cpp's per-token log-probabilities against an independent
reference, an OpenAI-compatible server with and without logprobs, the generation cache's schema-1 entries,
and confidence in `eor ask --json`."""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from eor.core.confidence import Confidence, StepRecorder, token_logprob, top_margin
from eor.core.errors import InputError

PROMPT = "Generate a background document to answer the given question. who painted the mona lisa"


def test_log_softmax_and_margin_by_hand():
    logits = np.array([2.0, 1.0, 0.0], dtype=np.float32)
    total = math.exp(2) + math.exp(1) + 1
    assert token_logprob(logits, 1) == pytest.approx(1 - math.log(total), abs=1e-6)
    assert top_margin(logits) == pytest.approx(1.0)
    recorder = StepRecorder()
    recorder.step(logits, 0)
    recorder.step(np.array([0.0, 0.0], dtype=np.float32), 1)  # an end token afterwards
    confidence = recorder.confidence(1)
    assert confidence.logprobs == pytest.approx((2 - math.log(total),)) and confidence.first_margin == 1.0
    summary = Confidence((-0.5, -1.5), 2.0).summary()
    assert summary == {"mean_logprob": -1.0, "min_logprob": -1.5, "first_margin": 2.0, "tokens": 2}
    assert Confidence.from_json(Confidence((-0.5,), None).to_json()) == Confidence((-0.5,), None)


def test_llama_confidence_equals_a_logits_all_reference(smollm2):
    """The logprobs read from each decoding step equal log-softmax of the same steps' logits from a second
    llama.cpp instance that keeps every position's logits (logits_all=True)."""
    from llama_cpp import Llama
    from scipy.special import log_softmax

    out = smollm2.generate_timed([PROMPT], 12)[0]
    confidence = out.confidence
    assert confidence is not None and len(confidence.logprobs) == out.generated_tokens == 12
    reference = Llama(model_path=str(smollm2.model_path), n_ctx=4096, logits_all=True, verbose=False)
    # one token more, so that the 12th is evaluated and stands in input_ids (the last one generated is not)
    response = reference.create_chat_completion(
        messages=[{"role": "user", "content": PROMPT}], temperature=0.0, max_tokens=13
    )
    assert response["choices"][0]["message"]["content"].startswith(out.text)
    first = response["usage"]["prompt_tokens"]
    chosen = reference.input_ids[first : first + 12]
    rows = reference.scores[first - 1 : first + 11].astype(np.float64)  # row i chose token i
    expected = log_softmax(rows, axis=1)[np.arange(12), chosen]
    assert np.allclose(confidence.logprobs, expected, atol=1e-4)
    top = np.sort(rows[0])[-2:]
    assert confidence.first_margin == pytest.approx(top[1] - top[0], abs=1e-4)


class PlainServer:
    """A loopback OpenAI-compatible chat server that answers "Paris" with no logprobs, or (`refuse`) answers
    400 to any request asking for logprobs, as servers without them do; `asked` counts such requests."""

    def __init__(self, refuse: bool = False) -> None:
        owner = self
        self.asked = 0
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:  # the replicas' health check
                self._send(200, {"object": "list", "data": [{"id": "plain", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.requests += 1
                if body.get("logprobs"):
                    owner.asked += 1
                    if refuse:
                        self._send(400, {"error": {"message": "logprobs are not supported by this server"}})
                        return
                choice = {"index": 0, "message": {"role": "assistant", "content": "Paris"}, "finish_reason": "stop"}
                usage = {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}
                self._send(
                    200,
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "plain",
                        "choices": [choice],
                        "usage": usage,
                    },
                )

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("refuse", [False, True])
def test_a_server_without_logprobs_answers_without_confidence(refuse):
    from eor.readers.openai_compat import OpenAIReader

    server = PlainServer(refuse=refuse)
    try:
        reader = OpenAIReader("plain", base_url=server.base, retries=1, concurrency=1)  # one request at a time
        first, second = reader.generate_timed(["capital of france?", "capital of italy?"])
        assert first.text == second.text == "Paris" and first.confidence is None and second.confidence is None
        # a server that refuses logprobs is asked once with them, then never again
        assert (server.asked, server.requests) == ((1, 3) if refuse else (2, 2))
        assert reader.ask_logprobs is not refuse
    finally:
        server.close()


def test_an_openai_compatible_server_with_logprobs():
    """llama-cpp-python's server on 127.0.0.1 sends each token's logprob and its top two alternatives."""
    from eor.readers.openai_compat import OpenAIReader
    from tests.llama_server import LlamaServer

    server = LlamaServer().wait_ready()
    try:
        out = OpenAIReader("smollm2", base_url=server.base).generate_timed([PROMPT], 8)[0]
    finally:
        server.stop()
    confidence = out.confidence
    assert confidence is not None and len(confidence.logprobs) == out.generated_tokens == 8
    assert all(value <= 0 for value in confidence.logprobs) and confidence.first_margin >= 0


class Counting:
    """A reader with an identity (so it is cached) and confidence, counting the prompts it generates."""

    def __new__(cls):
        from eor.readers.base import BatchedReader, Generated

        class _Counting(BatchedReader):
            name = "counting"
            identity = "counting-reader-v1"
            confidence = True

            def __init__(self) -> None:
                super().__init__()
                self.prompts: list[str] = []

            def _generate_batch(self, prompts, max_tokens):
                self.prompts += prompts
                return [Generated("Paris", 0.5, 10, 1, confidence=Confidence((-0.25,), 3.0)) for _ in prompts]

        return _Counting()


def test_a_cache_entry_from_before_confidence(tmp_path):
    """A schema-1 cache file (no meta) is upgraded when opened; its entry is read back as it is, and
    generated once more only when confidence is wanted, after which the entry holds it."""
    from eor.pipeline.stages.generation import GenerationStage
    from eor.runs.generation_cache import GenerationCache
    from eor.runs.generation_cache_file import APPLICATION_ID

    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE generations (key TEXT PRIMARY KEY, reader TEXT NOT NULL, output TEXT NOT NULL, "
        "seconds REAL NOT NULL, created REAL NOT NULL) WITHOUT ROWID"
    )
    old.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    old.execute("PRAGMA user_version = 1")
    reader = Counting()
    stage = GenerationStage(reader, None)
    key = stage.key("the capital of france?")
    old.execute("INSERT INTO generations VALUES (?, ?, ?, ?, ?)", (key, reader.identity, "Paris (old)", 0.7, 0.0))
    old.commit()
    old.close()

    stage = GenerationStage(reader, GenerationCache(path))
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 2
    plain = stage.complete(["the capital of france?"])[0]
    assert plain.cached and plain.text == "Paris (old)" and plain.confidence is None and reader.prompts == []
    wanted = stage.complete(["the capital of france?"], confidence=True)[0]
    assert not wanted.cached and wanted.confidence == Confidence((-0.25,), 3.0) and len(reader.prompts) == 1
    again = stage.complete(["the capital of france?"], confidence=True)[0]
    assert again.cached and again.confidence == Confidence((-0.25,), 3.0) and again.prompt_tokens == 10
    assert len(reader.prompts) == 1  # regenerated once, then read back with it


def test_ask_json_carries_each_members_confidence(tmp_path, isolated_cache, capsys):
    from eor.cli import main
    from tests.test_cli import small_config

    assert main(["ask", "who painted the mona lisa", "--config", str(small_config(tmp_path)), "--json"]) == 0
    members = json.loads(capsys.readouterr().out)["members"]
    for output in members.values():
        confidence = output["confidence"]
        assert set(confidence) == {"mean_logprob", "min_logprob", "first_margin", "tokens"}
        assert confidence["min_logprob"] <= confidence["mean_logprob"] <= 0 and confidence["first_margin"] >= 0
        assert confidence["tokens"] == output["tokens"]["generated"] >= 1


def test_the_selector_learns_from_confidence_and_refuses_to_vote_without_it():
    """Two members always disagree; the right one is the one the reader was surer of. Only the confidence
    features can tell them apart: with them the selector is always right, without them it cannot be."""
    from voters.batch import VoteBatch
    from voters.selector import AnswerSelector

    rng = np.random.default_rng(0)
    answers, golds, passages, confidence = [], [], [], []
    for q in range(80):
        right = int(rng.integers(2))
        pair = [f"wrong {q}", f"right {q}"] if right else [f"right {q}", f"wrong {q}"]
        answers.append(pair)
        golds.append([f"right {q}"])
        passages.append([[], []])
        sure = {"mean_logprob": -0.05, "min_logprob": -0.1, "first_margin": 4.0, "tokens": 2}
        unsure = {"mean_logprob": -2.0, "min_logprob": -3.0, "first_margin": 0.2, "tokens": 2}
        confidence.append([unsure, sure] if right else [sure, unsure])
    questions = ["?"] * 80
    members = ["A", "B"]
    batch = VoteBatch(answers, passages, questions, golds=golds, confidence=confidence)
    plain = AnswerSelector(metrics=("em",), members=members, confidence=False).fit(batch)
    sure = AnswerSelector(metrics=("em",), members=members).fit(batch)
    assert not plain.uses_confidence_ and sure.uses_confidence_
    assert sure.feature_names_[-4:] == ["conf:mean", "conf:min", "conf:margin", "conf:others"]
    truth = np.array([int(row[1].startswith("right")) for row in answers])
    assert (sure.predict(batch) == truth).all()
    assert 0.3 < (plain.predict(batch) == truth).mean() < 0.7
    # without confidence at vote time it refuses, naming what is missing, rather than fill in a value; the plain
    # selector votes
    with pytest.raises(InputError, match=r"fitted with the reader's confidence .* 2 of 2 question\(s\) have none"):
        sure.decision_scores(answers[:2], passages[:2], questions[:2])
    with pytest.raises(InputError, match="eor train --no-confidence"):
        sure.decision_function(VoteBatch(answers[:2], passages[:2], questions[:2]))
    half = [confidence[0], [None, None]]  # one question with it, one without
    with pytest.raises(InputError, match=r"1 of 2 question\(s\)"):
        sure.decision_function(VoteBatch(answers[:2], passages[:2], questions[:2], confidence=half))
    one = [[confidence[0][0], None]]  # an answer without it beside one with it: as in training
    assert np.isfinite(sure.decision_scores(answers[:1], passages[:1], questions[:1], confidence=one)).all()
    assert np.isfinite(plain.decision_scores(answers[:2], passages[:2], questions[:2])).all()
    # the weights file says it was trained with them, and loads so
    from voters.codecs import document_of, voter_from_document

    document = json.loads(json.dumps(document_of(sure)))
    loaded = voter_from_document(document, "test", members=["B", "A"])
    assert loaded.uses_confidence_ and loaded.feature_names_[-4:] == sure.feature_names_[-4:]
    swapped = [[row[1], row[0]] for row in answers]
    swapped_confidence = [[row[1], row[0]] for row in confidence]
    assert (loaded.predict(VoteBatch(swapped, passages, questions, confidence=swapped_confidence)) == 1 - truth).all()


def test_transformers_confidence_equals_a_forward_pass():
    """transformers' `output_logits` of each decoding step against one independent forward pass over the
    prompt and the generated tokens (log-softmax at each generated position)."""
    import torch

    from eor.core.config import ReaderConfig
    from eor.readers import build_reader

    reader = build_reader(ReaderConfig(model="smollm2-135m", backend="transformers", max_tokens=6))
    out = reader.generate_timed([PROMPT])[0]
    confidence = out.confidence
    assert confidence is not None and len(confidence.logprobs) == out.generated_tokens >= 1
    tokenizer, model = reader._tokenizer, reader._model
    prompt = tokenizer(reader._format(PROMPT), return_tensors="pt", add_special_tokens=False)["input_ids"]
    generated = tokenizer(out.text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    sequence = torch.cat([prompt, generated], dim=1)
    with torch.inference_mode():
        logits = model(sequence).logits[0].double()
    start = prompt.shape[1]
    positions = range(start - 1, start - 1 + len(confidence.logprobs))
    expected = [float(torch.log_softmax(logits[p], dim=-1)[sequence[0, p + 1]]) for p in positions]
    assert np.allclose(confidence.logprobs, expected, atol=2e-3)


@pytest.mark.parametrize("informative", [True, False])
def test_eor_train_keeps_the_confidence_features_only_when_cross_validation_says_they_help(
    tmp_path, capsys, informative
):
    """The two-member task above as run records: where the surer member is the right one, `eor train` keeps
    the confidence features (by its 5-fold cross-validation); where every answer is equally sure they cannot
    help (a tie), and it leaves them out."""
    rng = np.random.default_rng(1)
    sure = {"mean_logprob": -0.05, "min_logprob": -0.1, "first_margin": 4.0, "tokens": 2}
    unsure = {"mean_logprob": -2.0, "min_logprob": -3.0, "first_margin": 0.2, "tokens": 2}
    lines = []
    for q in range(60):
        right = int(rng.integers(2))
        names = ["A", "B"] if right else ["B", "A"]  # names[1] answers right
        certainty = {names[0]: unsure, names[1]: sure} if informative else {"A": sure, "B": sure}
        members = {
            name: {"answer": f"{'right' if name == names[1] else 'wrong'} {q}", "passages": [], "confidence": c}
            for name, c in sorted(certainty.items())
        }
        lines.append(json.dumps({"id": f"q{q}", "question": "?", "answers": [f"right {q}"], "members": members}))
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(lines) + "\n")
    out = tmp_path / "w.json"
    from eor.cli import main

    assert main(["train", str(records), "--voter", "selector", "--metrics", "em,f1", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    verdict = "kept" if informative else "left out"
    assert f"reader confidence as selector features: {verdict} by 5-fold cross-validation" in printed
    document = json.loads(out.read_text())
    assert document["meta"]["confidence_features"]["used"] is informative
    assert ("conf:mean" in document["feature_names"]) is informative
