"""P(right) beyond the corpus: the retrieval family of a choice's evidence (voters.relevance, voters.choice_evidence),
P(unanswerable) read at a share (voters.right.UnanswerableFit), the two reasons of a decline
(eor.pipeline.abstention), and the folds of a mix of answerable, ablated and no-corpus questions
(eor.learning.beyond_corpus). Values by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eor.learning.beyond_corpus import ABLATED, ANSWERABLE, NOCORPUS, Mix, mix_folds
from eor.pipeline.abstention import NOT_IN_DOCUMENTS, NOT_SURE, Abstention, abstention
from eor.runs.run_data import RunData
from voters.choice_evidence import FEATURES, RETRIEVAL, WITH_RETRIEVAL, evidence
from voters.folds import folds
from voters.relevance import Relevance, content_words, word_share
from voters.right import Logistic, RightFit, RightModel, UnanswerableFit

QUESTION = "who designed the bell rock lighthouse"


def test_content_words_and_their_share() -> None:
    assert content_words(QUESTION) == {"designed", "bell", "rock", "lighthouse"}  # who, the: stop words
    assert word_share(QUESTION, "The Bell Rock Lighthouse stands off Angus.") == 0.75
    assert word_share(QUESTION, "Tea is a drink.") == 0.0
    assert word_share("who is the", "anything") == 0.0  # no content word


def test_relevance_cosines_are_the_encoders() -> None:
    from sentence_transformers import SentenceTransformer

    from eor.core.models import resolve_model

    passages = ["The Bell Rock Lighthouse was designed by Robert Stevenson.", "Tea is an aromatic beverage."]
    (found,) = Relevance.of([QUESTION], [[passages[:1], passages]])
    model = SentenceTransformer(str(resolve_model("minilm-l6")), device="cpu")
    q, *p = model.encode([QUESTION, *passages], normalize_embeddings=True)
    for text, vector in zip(passages, p, strict=True):
        assert found.by_text[text][0] == pytest.approx(float(vector @ q), abs=1e-5)
        assert found.by_text[text][1] == word_share(QUESTION, text)
    assert found.by_text[passages[0]][0] > 0.5 > found.by_text[passages[1]][0]
    assert Relevance.of([QUESTION], [[[], []]])[0].by_text == {}


def test_the_retrieval_family_by_hand() -> None:
    relevance = Relevance({"a Paris": (0.8, 0.5), "b": (0.5, 1.0), "c Paris": (0.2, 0.0), "d": (0.9, 0.25)})
    # two members vote (the third's score is -inf: dropped); their distinct retrieved passages are a, b, c
    scores = np.array([[1.0, 0.5, -np.inf]])
    answers = [["Paris", "Lyon", "Rome"]]
    retrieved = [[["a Paris", "b"], ["b", "c Paris"], ["d"]]]
    found = evidence(scores, answers, [[["x"], ["y"], ["z"]]], None, retrieved=retrieved, relevance=[relevance])
    row = dict(zip(FEATURES, found.features[0], strict=True))
    assert row["retr:cosine"] == 0.8  # the best of a, b, c (d's member did not vote)
    assert row["retr:margin"] == pytest.approx(0.8 - (0.5 + 0.2) / 2)
    assert row["retr:share"] == 1.0
    assert row["support:passages"] == pytest.approx(2 / 3)  # a and c hold "Paris"
    # no retrieved passage at all (ReFree, PK): nothing matched, all 0; unknown retrieved passages: NaN
    empty = evidence(scores, answers, [[[], [], []]], None, retrieved=[[[], [], []]], relevance=[Relevance({})])
    assert list(empty.features[0, [FEATURES.index(f) for f in RETRIEVAL]]) == [0.0, 0.0, 0.0, 0.0]
    unknown = evidence(scores, answers, [[[], [], []]], None)
    assert np.isnan(unknown.features[0, [FEATURES.index(f) for f in RETRIEVAL]]).all()


def _logistic(features: tuple[str, ...], intercept: float, coef: dict[str, float]) -> Logistic:
    n = len(features)
    return Logistic(intercept, tuple(coef.get(f, 0.0) for f in features), (0.0,) * n, (1.0,) * n, features)


def test_unanswerable_is_read_at_the_share_by_bayes_rule() -> None:
    from voters.choice_evidence import FITS

    features = FITS[WITH_RETRIEVAL]
    fit = UnanswerableFit(_logistic(features, 0.0, {"retr:cosine": -2.0}), 0.5, 0.5, {})
    row = np.zeros((1, len(FEATURES)))
    row[0, FEATURES.index("retr:cosine")] = 0.5  # logit = -1
    assert fit.probability(row)[0] == pytest.approx(1 / (1 + math.e))
    # at a share of 0.2 the odds shrink by (0.2/0.8) / (0.5/0.5) = 1/4: P = σ(-1 - log 4)
    lower = UnanswerableFit(fit.logistic, 0.5, 0.2, {})
    assert lower.probability(row)[0] == pytest.approx(1 / (1 + math.exp(1 + math.log(4))))
    assert UnanswerableFit.from_dict(lower.to_dict()) == lower


def test_the_two_reasons_of_a_decline() -> None:
    fit = RightFit("retrieval", {}, 10, [{"alpha": 0.3, "threshold": 0.7, "coverage": 0.3, "share": 0.33}], "em", 0.1)
    sure = abstention(fit, 0.41, 0.3, unanswerable=0.2)
    assert sure.abstained and sure.kind == NOT_SURE and sure.share == 0.33
    assert sure.reason().startswith("not sure enough: P(right) 0.41 < 0.70")
    assert "for a mix with a share 0.33 of questions the documents cannot answer" in sure.reason()
    absent = abstention(fit, 0.41, 0.3, unanswerable=0.83)
    assert absent.kind == NOT_IN_DOCUMENTS and absent.to_dict()["kind"] == "not_in_documents"
    assert absent.reason().startswith("the passages read do not seem to hold the answer (P(unanswerable) 0.83)")
    assert absent.to_dict()["unanswerable"] == 0.83
    # a P(right) just under the threshold is never printed equal to it
    assert abstention(fit, 0.69984, 0.3).reason().startswith("not sure enough: P(right) 0.6998 < 0.7000")
    assert "(P(unanswerable) 0.90); P(right) 0.69 < 0.70" in abstention(fit, 0.69, 0.3, unanswerable=0.9).reason()
    assert "; P(right) 0.6998 < 0.7000" in abstention(fit, 0.6998, 0.3, unanswerable=0.9).reason()
    answered = abstention(fit, 0.9, 0.3, unanswerable=0.9)
    assert not answered.abstained and answered.kind is None and answered.reason().startswith("answered")
    # a file from before: no share, no P(unanswerable), and the guarantee says what it covers
    old = Abstention(True, 0.3, 0.3, 0.7, 0.41, "em")
    assert old.kind == NOT_SURE and "for answerable questions only" in old.reason()
    assert "unanswerable" not in old.to_dict() and "share" not in old.to_dict()
    # at a risk no threshold was certified for, every question is declined: its reason still agrees with its kind,
    # and says where the guarantee does not hold
    none = RightFit("retrieval", {}, 10, [{"alpha": 0.2, "threshold": None, "coverage": 0.0, "share": 0.33}], "em", 0.1)
    empty = abstention(none, 0.41, 0.25, unanswerable=0.83, outside="certified on the corpus wiki-nq.jsonl")
    assert empty.kind == NOT_IN_DOCUMENTS and empty.reason().startswith(
        "the passages read do not seem to hold the answer (P(unanswerable) 0.83); no threshold kept an error rate of "
        "0.2 on the training questions: every question is declined at this risk; outside its guarantee here: "
        "certified on the corpus wiki-nq.jsonl"
    )
    assert abstention(none, 0.41, 0.25, unanswerable=0.2).reason().startswith("no threshold kept an error rate")
    # an unknown P(right) (a judge with no candidate to choose): said so, and JSON's null, never "nan"
    unknown = abstention(fit, math.nan, 0.3)
    assert unknown.abstained and unknown.reason() == "no answer to stand behind: P(right) unknown"
    assert unknown.to_dict()["probability"] is None


def test_an_old_probability_section_loads_as_fitted_without_unanswerable_questions() -> None:
    import json

    from tests.conftest import ROOT

    document = json.loads((ROOT / "docs" / "weights" / "nq-offline-auto-600.json").read_text())
    model = RightModel.from_dict(document["meta"]["probability"], "auto")
    assert not model.beyond_corpus and not model.reads_retrieval and model.unanswerable is None
    assert set(model.fits) == {"confidence", "no confidence"}


def _run(ids: list[str]) -> RunData:
    n = len(ids)
    return RunData(["A"], ids, [["x"]] * n, [["x"]] * n, [[[]]] * n, [[""]] * n, ["q"] * n)


def test_a_question_and_its_ablated_copy_share_a_fold() -> None:
    answerable = [f"q{i}" for i in range(20)]
    ablated = [f"q{i}/ablated" for i in (3, 7, 11)] + ["elsewhere/ablated"]
    nocorpus = [f"n{i}" for i in range(10)]
    ids = answerable + ablated + nocorpus
    kind = np.array([ANSWERABLE] * 20 + [ABLATED] * 4 + [NOCORPUS] * 10)
    mix = Mix(_run(ids), kind, [i.removesuffix("/ablated") for i in ids])
    parts = mix_folds(mix, 5, seed=0)
    fold_of = {ids[row]: f for f, part in enumerate(parts) for row in part}
    assert sorted(fold_of) == sorted(ids)  # every row once
    for i in (3, 7, 11):
        assert fold_of[f"q{i}/ablated"] == fold_of[f"q{i}"]
    # the answerable questions keep the voter's own folds (voters.folds), the no-corpus ones seeded folds of theirs
    assert [sorted(part[part < 20]) for part in parts] == [sorted(f) for f in folds(20, 5, 0)]
    assert [sorted(p[p >= 24] - 24) for p in parts] == [sorted(f) for f in folds(10, 5, 0)]


# -- both reasons in every interface ------------------------------------------------------------------------------

OUTSIDE = "what is the melting point of zorblaxite crystals"  # no content word of it is in the demo corpus


def beyond_section(thresholds: list[dict], share: float = 0.33) -> dict:
    """A P(right) fitted beyond the corpus, by hand: the fit "retrieval" gives P = σ(−2 + z − alone) (as
    tests.test_probability's, other weights 0), its thresholds hold for `share`; P(unanswerable) = σ(3 − 6 ·
    retr:share) at the share it was trained at: a question whose words the passage read holds is "not sure"
    (σ(−3) = 0.05), one whose words none holds is "not in the documents" (σ(3) = 0.95)."""
    from voters.choice_evidence import ALL, FITS

    features = FITS[WITH_RETRIEVAL]

    def group(intercept: float, coef: dict[str, float]) -> dict:
        return {
            "intercept": intercept,
            "coef": dict.fromkeys(features, 0.0) | coef,
            "mean": dict.fromkeys(features, 0.0),
            "scale": dict.fromkeys(features, 1.0),
        }

    fit = {
        "features": list(features),
        "questions": 600,
        "groups": {ALL: group(-2.0, {"score": 1.0, "alone": -1.0})},
        "risk": {
            "procedure": "learn-then-test",
            "delta": 0.1,
            "thresholds": [t | {"share": share} for t in thresholds],
        },
    }
    unanswerable = {
        "features": list(features),
        "logistic": group(3.0, {"retr:share": -6.0}),
        "trained_share": share,
        "share": share,
        "questions": {"answerable": 600, "ablated": 600, "no corpus": 200},
        "out_of_fold": {"named": 0.3, "precision": 0.9},
    }
    return {
        "correctness": "em",
        "fit": {"questions": 1400, "folds": 5, "seed": 0, "out_of_fold": True},
        "fits": {WITH_RETRIEVAL: fit},
        "unanswerable": unanswerable,
    }


def test_both_reasons_in_every_interface(tmp_path, isolated_cache):
    import json

    import requests
    from openai import OpenAI

    from eor.cli.account import format_account
    from eor.cli.handlers.ask import format_result
    from eor.core.config import load_config
    from eor.pipeline.ensemble import Ensemble
    from eor.server import ServerSettings, create_app
    from tests.test_cascade import QUESTION as INSIDE
    from tests.test_cascade import cascade_config, hand_cascade_document
    from tests.test_lazy_voting import Scripted
    from tests.test_probability import THRESHOLDS
    from tests.test_server import LiveServer
    from voters import load_voter

    document = hand_cascade_document()
    document["meta"]["probability"] = beyond_section(THRESHOLDS)
    weights = tmp_path / "beyond.json"
    weights.write_text(json.dumps(document))
    config = load_config(cascade_config(tmp_path))

    def loader() -> Ensemble:
        voter = load_voter(str(weights), members=config.members)
        return Ensemble(config, reader=Scripted("Leonardo da Vinci"), voter=voter, cache=False)

    ensemble = loader()
    kinds = {INSIDE: "not_sure", OUTSIDE: "not_in_documents"}
    words = {"not_sure": "not sure enough: P(right)", "not_in_documents": "the passages read do not seem to hold"}
    for question, kind in kinds.items():
        result = ensemble.answer(question, risk=0.45)  # α 0.4: P(right) below 0.5 on both
        assert result.abstained and result.abstention["kind"] == kind and result.probability_fit == "retrieval"
        assert result.abstention["reason"].startswith(words[kind]) and result.abstention["share"] == 0.33
        assert result.to_dict()["abstention"]["kind"] == kind  # eor ask --json
        assert f"I don't know: {words[kind]}" in format_result(result)  # eor ask, plain and --explain
        account = format_account(result, ensemble.explain(result))  # --explain: the decline's sources withheld
        assert "evidence:  not shown: the answer was declined" in account and "no passage was read" not in account
    # BM25@1's passage holds 2 of the 3 content words of "who painted the mona lisa": σ(3 − 6 · 2/3) = σ(−1)
    assert ensemble.answer(INSIDE, risk=0.45).abstention["unanswerable"] == pytest.approx(1 / (1 + math.e), abs=1e-4)

    with LiveServer(create_app(config, ServerSettings(), loader=loader)) as server:
        server.wait_ready()
        client = OpenAI(base_url=f"{server.url}/v1", api_key="none", max_retries=0, timeout=60)
        for question, kind in kinds.items():
            body = requests.post(
                f"{server.url}/v1/answer", json={"question": question, "risk": 0.45}, timeout=60
            ).json()
            assert body["abstained"] and body["abstention"]["kind"] == kind
            assert body["abstention"]["reason"].startswith(words[kind])
            messages = [{"role": "user", "content": question}]
            completion = client.chat.completions.create(model="eor", messages=messages, extra_body={"risk": 0.45})
            assert completion.choices[0].message.content == "I don't know."
            assert completion.model_extra["eor"]["abstention"]["kind"] == kind

    # `eor serve --all-members` asks every member, which a cascade's P(right) is not calibrated for: a config's risk
    # is refused when the models load (said by /healthz), never a 422 on every request
    import dataclasses
    import time

    risky = dataclasses.replace(config, voter=dataclasses.replace(config.voter, risk=0.45))

    def risky_loader() -> Ensemble:
        voter = load_voter(str(weights), members=config.members)
        return Ensemble(risky, reader=Scripted("Leonardo da Vinci"), voter=voter, cache=False)

    with LiveServer(create_app(risky, ServerSettings(lazy=False), loader=risky_loader)) as server:
        deadline = time.monotonic() + 120
        while (health := requests.get(f"{server.url}/healthz", timeout=10)).json().get("status") == "loading":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        message = health.json()["error"]["message"]
        assert health.status_code == 503 and "voter.risk 0.45 cannot hold with --all-members (a risk needs" in message


def test_documents_the_reader_wrote_are_not_retrieved_passages_even_in_old_records() -> None:
    from eor.core.results import MemberOutput

    old = MemberOutput(
        "x",
        [
            {"id": "PK:2741730785ca", "title": "", "text": "a document PK wrote", "score": None},  # before the flag
            {"id": "CP:0123456789ab", "title": "", "text": "a summary", "score": None, "generated": True},
            {"id": "w00768", "title": "T", "text": "a passage of the corpus", "score": 21.5},
            {"id": "Foreign:3", "title": "", "text": "a foreign retriever's, unscored", "score": None},
        ],
    )
    assert old.retrieved_texts == ["a passage of the corpus", "a foreign retriever's, unscored"]


# -- eor train with questions the corpus cannot answer ---------------------------------------------------------


def _records(source: str, limit: int, folder, name: str):
    """The first `limit` records of a shipped records file, as a records file of their own."""
    import json

    from eor.runs.records import read_records
    from tests.conftest import ROOT

    path = folder / f"{name}.jsonl"
    lines = [json.dumps(record.to_dict()) for record in read_records(ROOT / "docs" / "records" / source)[:limit]]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_train_with_ablated_and_no_corpus_records_writes_a_model_that_says_so(tmp_path, isolated_cache) -> None:
    """`eor train` on 80 training questions, their 80 ablated copies and 50 no-corpus questions (the selector):
    the voter is the one trained without them, P(right) holds the retrieval fits, P(unanswerable) and thresholds
    for the share asked, and loads again as fitted beyond the corpus."""
    import json

    from eor.commands.train_command import train
    from eor.learning.train_options import TrainOptions
    from tests.conftest import ROOT
    from voters import load_voter

    answerable = _records("nq-train.jsonl.gz", 80, tmp_path, "train")
    ablated = _records("nq-train-ablated.jsonl.gz", 80, tmp_path, "ablated")
    nocorpus = _records("nq-nocorpus-learn200.jsonl.gz", 50, tmp_path, "nocorpus")
    config = ROOT / "configs" / "nq-offline.yaml"
    plain = TrainOptions(voter="selector", confidence=False, pool_config=config)
    beyond = TrainOptions(
        voter="selector",
        confidence=False,
        pool_config=config,
        ablated=ablated,
        nocorpus=nocorpus,
        unanswerable_share=0.2,
    )
    train(answerable, tmp_path / "plain.json", plain)
    report = train(answerable, tmp_path / "beyond.json", beyond)
    assert "thresholds for a mix with a share 0.2 of questions the corpus cannot answer" in report
    assert "  ablated: 80 questions" in report and "  no corpus: 50 questions" in report
    first, second = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("plain", "beyond"))
    assert {k: v for k, v in first.items() if k != "meta"} == {k: v for k, v in second.items() if k != "meta"}
    members = json.loads((tmp_path / "beyond.json").read_text())["members"]
    model = RightModel.from_voter(load_voter(tmp_path / "beyond.json", members=members))
    assert model is not None and model.beyond_corpus and model.reads_retrieval
    assert model.unanswerable is not None and model.unanswerable.share == 0.2
    assert model.unanswerable.questions == {"answerable": 80, "ablated": 80, "no corpus": 50}
    assert {"confidence, retrieval", "retrieval"} & set(model.fits)
    assert all(row["share"] == 0.2 for fit in model.fits.values() for row in fit.thresholds)
    old = RightModel.from_voter(load_voter(tmp_path / "plain.json", members=members))
    assert old is not None and not old.beyond_corpus and set(old.fits) <= {"confidence", "no confidence"}


def test_train_reads_several_runs_of_one_pool_as_one(tmp_path, isolated_cache) -> None:
    """`eor train A B`: the 60 + 60 questions of two runs train the voter that their 120 in one file train; a run
    answered over another corpus is refused, and so is the judge voter on two runs."""
    import json

    from eor.cli import main
    from eor.runs.records import read_header
    from tests.conftest import ROOT

    both = _records("nq-train.jsonl.gz", 120, tmp_path, "both")
    lines = both.read_text().splitlines(keepends=True)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(lines[:60]))
    second.write_text("".join(lines[60:]))
    config = str(ROOT / "configs" / "nq-offline.yaml")
    common = ["--voter", "selector", "--no-confidence", "--metrics", "em,f1", "--config", config]
    assert main(["train", str(first), str(second), *common, "--out", str(tmp_path / "two.json")]) == 0
    assert main(["train", str(both), *common, "--out", str(tmp_path / "one.json")]) == 0
    two, one = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("two", "one"))
    assert two["meta"].pop("records") == [str(first), str(second)] and one["meta"].pop("records") == str(both)
    assert two == one
    # a run over another corpus: its header names it
    header = read_header(ROOT / "docs" / "records" / "nq-train.jsonl.gz")
    header["pool"]["corpus"] = {"file": "other.jsonl", "bytes": 5, "sha256": "0" * 64}
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"eor_records": header}) + "\n" + "".join(lines[60:]))
    packed = tmp_path / "packed.jsonl"
    packed.write_text(
        json.dumps({"eor_records": read_header(ROOT / "docs" / "records" / "nq-train.jsonl.gz")})
        + "\n"
        + "".join(lines[:60])
    )
    assert main(["train", str(packed), str(other), *common, "--out", str(tmp_path / "x.json")]) == 1
    judge = ["--voter", "judge", "--out", str(tmp_path / "j.json")]  # the judge voter reads several runs alike
    assert main(["train", str(packed), str(other), *judge]) == 1 and not (tmp_path / "j.json").exists()


def test_mix_weights_make_the_unanswerable_rows_the_share() -> None:
    from eor.learning.beyond_corpus import mix_weights

    kind = np.array([ANSWERABLE] * 6 + [ABLATED] * 3 + [NOCORPUS])
    weight = mix_weights(kind, 0.33)
    assert weight.mean() == pytest.approx(1.0)
    assert weight[6:].sum() / weight.sum() == pytest.approx(0.33) and len(set(weight[:6])) == len(set(weight[6:])) == 1
    assert (mix_weights(kind[:6], 0.33) == 1).all()


def test_the_judge_voter_beyond_the_corpus(tmp_path) -> None:
    """`eor train --voter judge --nocorpus` on 200 scored training questions and 60 scored no-corpus questions:
    the same choices as the judge trained without them; the level no unanswerable question holds scores for
    (the passages alone) left out; thresholds for the share asked; P(unanswerable) fitted, read at the share by
    Bayes' rule, higher on the no-corpus questions than on the answerable; saved and loaded again; a judge
    file trained before it has none (its declines say "not sure")."""
    import json

    from eor.cli import main
    from eor.commands.train_judge import train_judge
    from eor.learning.judge_training import judged_questions
    from eor.runs.records import read_records
    from tests.conftest import ROOT
    from voters.loading import load_voter

    answerable = _records("nq-train.jsonl.gz", 200, tmp_path, "train")
    nocorpus = _records("nq-nocorpus-learn200.jsonl.gz", 60, tmp_path, "nocorpus")
    config = ROOT / "configs" / "nq-offline.yaml"
    train_judge(answerable, tmp_path / "plain.json", pool_config=config)
    report = train_judge(answerable, tmp_path / "beyond.json", pool_config=config, nocorpus=nocorpus, share=0.25)
    assert "0 ablated and 60 no-corpus questions" in report and "a share 0.25" in report
    # nothing is certified on so few: no threshold, so no line of what one answers of each kind
    assert "α 0.3: abstain on all" in report and "% of the answerable" not in report
    plain, beyond = (load_voter(tmp_path / name, kind="judge") for name in ("plain.json", "beyond.json"))
    assert [sorted(fit.needs) for fit in plain.fits_] == [["passages", "scores"], ["scores"], []]
    assert [sorted(fit.needs) for fit in beyond.fits_] == [["scores"], []]
    for fit in beyond.fits_:
        twin = plain.fit_scoring(fit.needs)
        assert fit.names_ == twin.names_ and np.array_equal(fit.coef_, twin.coef_)  # the same voter
        assert fit.unanswerable_ is not None and fit.unanswerable_["share"] == 0.25
        assert all(row["share"] == 0.25 and (row["threshold"] is None or "bound" in row) for row in fit.thresholds)
        assert twin.unanswerable_ is None
        assert fit.retrieval and not twin.retrieval  # P(right) beyond the corpus reads the retrieval family
    fit = beyond.fit_scoring(frozenset({"scores"}))
    names = beyond.members

    def mean_unanswerable(path) -> float:
        values = []
        for question in judged_questions(read_records(path), names, relevance=True):
            choice = fit.choose(question.features)
            if choice is not None:
                values.append(fit.unanswerable(choice.evidence))
        return float(np.mean(values))

    assert mean_unanswerable(nocorpus) > 0.5 > mean_unanswerable(answerable)
    evidence = fit.choose(judged_questions(read_records(nocorpus), names, relevance=True)[0].features).evidence
    p = fit.unanswerable(evidence)
    fit.unanswerable_["share"] = fit.unanswerable_["trained_share"]  # at the mix it was fitted on: the logistic
    z = (np.asarray(evidence) - fit.unanswerable_["mean"]) / fit.unanswerable_["scale"]
    raw = 1 / (1 + math.exp(-(z @ fit.unanswerable_["coef"] + fit.unanswerable_["intercept"])))
    assert fit.unanswerable(evidence) == pytest.approx(raw)
    trained = fit.unanswerable_["trained_share"]
    odds = raw / (1 - raw) * (0.25 / 0.75) / (trained / (1 - trained))
    assert p == pytest.approx(odds / (1 + odds))  # Bayes' rule from the training mix's share to 0.25
    saved = json.loads((tmp_path / "beyond.json").read_text())
    assert saved["meta"]["unanswerable_share"] == 0.25 and saved["meta"]["nocorpus_records"] == str(nocorpus)
    # a share without questions to bound it is refused
    args = ["train", str(answerable), "--voter", "judge", "--unanswerable-share", "0.3", "--out", str(tmp_path / "x")]
    assert main(args) != 0 and not (tmp_path / "x").exists()


def test_what_a_threshold_answers_of_each_kind_by_hand() -> None:
    from eor.commands.train_report import answered_by_kind

    kind = np.array(["answerable"] * 4 + ["no corpus"] * 2 + ["ablated"] * 2, dtype=object)
    answered = np.array([True, True, True, False, False, True, False, False])
    # in the order of KINDS, each kind present once
    assert answered_by_kind(answered, kind) == "75.0% of the answerable, 0.0% of the ablated, 50.0% of the no corpus"
    assert answered_by_kind(answered[:4], kind[:4]) == "75.0% of the answerable"


def test_ablated_copies_in_several_records_files_are_read_as_one(tmp_path) -> None:
    """`--ablated A B` (ablated copies recorded in two runs, as the 600 and the other 966 training questions'):
    the same questions as one file holding both, and the weights file names both."""
    import json

    from eor.learning.train_options import TrainOptions
    from eor.learning.training import beyond_records
    from eor.runs.records import read_records
    from tests.conftest import ROOT

    whole = _records("nq-train-ablated.jsonl.gz", 60, tmp_path, "whole")
    records = read_records(whole)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    for path, part in ((first, records[:25]), (second, records[25:])):
        path.write_text("".join(json.dumps(record.to_dict()) + "\n" for record in part))
    names = ["ReFree", "PK", "BM25@1", "BM25@3", "Wiki@1", "Wiki@3", "BM25@2&Wiki@2"]
    one, two = beyond_records(whole, names, None), beyond_records((first, second), names, None)
    assert two.ids == one.ids and two.answers == one.answers and two.origin_ids == one.origin_ids
    meta = TrainOptions(ablated=(first, second), pool_config=ROOT / "configs" / "nq-offline.yaml").beyond_meta()
    assert meta["ablated_records"] == [str(first), str(second)]


def test_a_question_on_which_a_member_failed_is_left_out_of_the_run_data(tmp_path, caplog) -> None:
    """A record naming a failed member (`degraded`: the reader's output was empty, again on `--retry-failed`) is
    left out with a warning, as nq-train-0859/ablated is of the ablated copies of the other 966; a record lacking a
    member for another reason is refused."""
    import json
    import logging

    import pytest

    from eor.core.errors import InputError
    from eor.runs.records import read_records
    from eor.runs.run_data import load_run

    whole = _records("nq-train-ablated.jsonl.gz", 3, tmp_path, "whole")
    rows = [record.to_dict() for record in read_records(whole)]
    failed = dict(rows[1], degraded=["BM25@3"], degraded_reasons={"BM25@3": "generation failed: empty output"})
    failed["members"] = {name: out for name, out in failed["members"].items() if name != "BM25@3"}
    path = tmp_path / "degraded.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in (rows[0], failed, rows[2])))
    names = list(rows[0]["members"])
    with caplog.at_level(logging.WARNING):
        data = load_run(path, names)
    assert data.ids == [rows[0]["id"], rows[2]["id"]] and "1 question(s) left out, a member failed" in caplog.text
    lacking = dict(failed, degraded=[], degraded_reasons={})
    path.write_text("".join(json.dumps(row) + "\n" for row in (rows[0], lacking)))
    with pytest.raises(InputError, match="lacks member"):
        load_run(path, names)


def test_every_shipped_nq_voter_is_fitted_beyond_the_corpus() -> None:
    """The files the NQ configs answer with (the default cascade, the judge and the judged cascade) and the selector
    beside them are fitted with questions the corpus cannot answer, holding P(unanswerable); the files of the 600
    answerable questions they replaced are kept as `-600` and say they were not."""
    from eor.core.config import load_config
    from tests.conftest import ROOT
    from voters.loading import load_voter

    weights = ROOT / "docs" / "weights"
    for name in ("nq-offline-cascade", "nq-offline-auto", "nq-offline-judge-cascade"):
        new, old = (RightModel.from_voter(load_voter(weights / f"{name}{end}.json")) for end in ("", "-600"))
        assert new is not None and new.beyond_corpus and new.unanswerable is not None, name
        assert old is not None and not old.beyond_corpus and old.unanswerable is None, name
    judge, old_judge = (load_voter(weights / f"nq-offline-judge{end}.json", kind="judge") for end in ("", "-600"))
    assert judge.reads_retrieval and all(fit.unanswerable_ is not None for fit in judge.fits_)
    assert not old_judge.reads_retrieval and all(fit.unanswerable_ is None for fit in old_judge.fits_)
    named = set()
    for config in ("nq-offline", "nq-judge", "nq-judge-cascade"):
        pool = load_config(ROOT / "configs" / f"{config}.yaml")
        named |= {pool.resolve_path(w).name for w in (pool.voter.weights, pool.judge and pool.judge.weights) if w}
    assert named == {"nq-offline-cascade.json", "nq-offline-judge.json", "nq-offline-judge-cascade.json"}
