"""The cascade (voters.cascade): hand-worked stop decisions, the ensemble running only the members a question
needs, weights files of other pools, training on the shipped records, and stop reasons in --json and the API."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
import requests

from eor.core.errors import ConfigError, InputError
from tests.conftest import DEMO, ROOT
from tests.test_lazy_voting import Scripted
from voters.batch import VoteBatch
from voters.features import feature_names

ORDER = ["BM25@1", "BM25@2", "ReFree"]
POOL = ["ReFree", "BM25@1", "BM25@2"]  # the config's order
QUESTION = "who painted the mona lisa"


def sigmoid(x: float) -> float:
    return 1 / (1 + math.exp(-x))


def selector_document(members: list[str], coefficients: dict[str, float], intercept: float) -> dict:
    """An answer selector over `members` (metric em) whose log-odds are intercept + Σ coefficient · feature."""
    names = feature_names(["em"], members)
    return {
        "format": "eor-voter-weights",
        "format_version": 1,
        "voter": "selector",
        "members": members,
        "metrics": ["em"],
        "feature_names": names,
        "mean": [0.0] * len(names),
        "scale": [1.0] * len(names),
        "coefficients": [coefficients.get(name, 0.0) for name in names],
        "intercept": intercept,
        "params": {"metrics": ["em"], "C": 1.0, "correctness": "em", "metric_params": None},
    }


def hand_cascade_document(threshold: float | None = 0.8, pool: dict | None = None) -> dict:
    """Order BM25@1 > BM25@2 > ReFree; P = σ(z) at every step (a = 0, b = 1, c = 0).

    step 1: z = −2 + 4 · grounded           (the answer is in BM25@1's passage: P = σ(2) = 0.881, else 0.119)
    step 2: z = −1 + 3 · agreement          (BM25@1 and BM25@2 agree: P = 0.881, else σ(−1) = 0.269)
    step 3: z = 2 · member:ReFree           (the last step: ReFree is chosen)
    """
    steps = [
        (ORDER[:1], {"grounded": 4.0}, -2.0),
        (ORDER[:2], {"agreement": 3.0}, -1.0),
        (ORDER, {"member:ReFree": 2.0}, 0.0),
    ]
    point = {"threshold": threshold, "accuracy": 0.5, "loss": 0.0, "cost": 1.0, "cost_p90": 2.0, "members_run": 1.5}
    return {
        "format": "eor-voter-weights",
        "format_version": 1,
        "voter": "cascade",
        "members": POOL,
        "metrics": ["em"],
        "order": ORDER,
        "threshold": threshold,
        "steps": [
            {
                "members": members,
                "calibration": {"intercept": 0.0, "top": 1.0, "margin": 0.0},
                "selector": selector_document(members, coefficients, intercept),
            }
            for members, coefficients, intercept in steps
        ],
        "operating_points": [point],
        "chosen": point,
        "full_accuracy": 0.5,
        "full_cost": 3.0,
        "cost_unit": "seconds",
        "member_costs": {},
        "params": {"metrics": ["em"], "C": 1.0, "correctness": "em", "metric_params": None, "max_loss": 0.005},
        "meta": {"pool": pool} if pool else {},
    }


def hand_cascade(**kwargs):
    from voters.codecs import voter_from_document

    return voter_from_document(hand_cascade_document(**kwargs), "hand")


MONA_LISA = ["The Mona Lisa is a portrait painting by Leonardo da Vinci."]


def test_hand_worked_stop_decisions():
    cascade = hand_cascade()
    assert cascade.order == ORDER and cascade.threshold_ == 0.8
    # q1: BM25@1's answer is in its passage: z = 2, P = 0.881 ≥ 0.8, stop after one member
    first = cascade.decide(0, {"BM25@1": "Leonardo da Vinci"}, {"BM25@1": MONA_LISA}, QUESTION)
    assert first.stop and first.member == "BM25@1" and first.probability == pytest.approx(sigmoid(2))
    assert first.reason() == "stopped after BM25@1: P(full pool agrees) 0.88 ≥ 0.80"
    # q2: not in its passage (P = 0.119): go on; BM25@2 agrees (z = 2 for both, the tie to the first): stop
    alone = cascade.decide(0, {"BM25@1": "Michelangelo"}, {"BM25@1": MONA_LISA}, QUESTION)
    assert not alone.stop and alone.probability == pytest.approx(sigmoid(-2))
    both = cascade.decide(1, {"BM25@1": "Michelangelo", "BM25@2": "michelangelo"}, {}, QUESTION)
    assert both.stop and both.member == "BM25@1" and both.probability == pytest.approx(sigmoid(2))
    assert both.scores == pytest.approx({"BM25@1": 2.0, "BM25@2": 2.0})
    # q3: BM25@2 disagrees (P = 0.269 < 0.8): the last step decides whatever P is, and picks ReFree
    apart = cascade.decide(1, {"BM25@1": "Michelangelo", "BM25@2": "Raphael"}, {}, QUESTION)
    assert not apart.stop and apart.probability == pytest.approx(sigmoid(-1))
    assert apart.reason() == "went on after BM25@1, BM25@2: P(full pool agrees) 0.27 < 0.80"
    answers = {"BM25@1": "Michelangelo", "BM25@2": "Raphael", "ReFree": "Titian"}
    last = cascade.decide(2, answers, {}, QUESTION)
    assert last.stop and last.last and last.member == "ReFree" and last.probability == pytest.approx(sigmoid(2))
    # a member that failed is left out of its step's vote
    assert cascade.decide(1, {"BM25@1": "Michelangelo"}, {"BM25@1": []}, QUESTION).scores == {"BM25@1": -1.0}
    with pytest.raises(InputError, match="steps 0 to 2"):
        cascade.decide(3, answers, {}, QUESTION)


def test_replay_of_recorded_answers_stops_where_decide_does():
    cascade = hand_cascade()
    # members in the pool's order: ReFree, BM25@1, BM25@2
    answers = [["Titian", "Leonardo da Vinci", "Raphael"], ["Titian", "Michelangelo", "michelangelo"]]
    answers.append(["Titian", "Michelangelo", "Raphael"])
    batch = VoteBatch(answers, [[[], MONA_LISA, []] for _ in answers], [QUESTION] * 3)
    chosen, stops = cascade.replay(batch)
    assert stops.tolist() == [0, 1, 2] and chosen.tolist() == [1, 1, 0]
    assert cascade.predict(batch).tolist() == [1, 1, 0]
    scores, groups, picks = cascade.vote_scores(batch)
    assert groups.tolist() == ["early", "early", "last"] and picks.tolist() == [1, 1, 0]
    assert np.isinf(scores[0, [0, 2]]).all() and np.isfinite(scores[2]).all()  # only BM25@1 ran for q1
    costs = np.array([[1.0, 2.0, 4.0]] * 3)  # ReFree, BM25@1, BM25@2 per question
    assert cascade.spent(costs, stops).tolist() == [2.0, 6.0, 7.0]  # BM25@1; + BM25@2; + ReFree
    # at threshold 0 every question stops after BM25@1; never early (inf): every member runs
    assert cascade.replay(batch, 0.0)[1].tolist() == [0, 0, 0]
    assert cascade.replay(batch, math.inf)[1].tolist() == [2, 2, 2]


def cascade_config(tmp_path, weights: str | None = None):
    lines = [f"name: cascade\ncorpus: {{path: {DEMO / 'corpus.jsonl'}}}\nmembers: [{', '.join(POOL)}]"]
    lines.append("voter: {metrics: [em]" + (f", weights: {weights}" if weights else "") + "}")
    path = tmp_path / "cascade.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


class Spy:
    """Records the members the retrieval stage is asked for."""

    def __init__(self, stage) -> None:
        self.stage, self.asked = stage, []

    def retrieve(self, name, *args, **kwargs):
        self.asked.append(name)
        return self.stage.retrieve(name, *args, **kwargs)


def test_members_after_the_stop_never_retrieve_nor_prompt(tmp_path, isolated_cache):
    from eor.core.config import load_config
    from eor.pipeline.ensemble import Ensemble

    reader = Scripted("Leonardo da Vinci")
    ensemble = Ensemble(load_config(cascade_config(tmp_path)), reader=reader, voter=hand_cascade(), cache=False)
    spy = ensemble.runner.retrieval = Spy(ensemble.runner.retrieval)
    result = ensemble.answer(QUESTION)  # grounded in BM25@1's passage (the Mona Lisa): one member
    assert spy.asked == ["BM25@1"] and len(reader.prompts) == 1
    assert result.answer == "Leonardo da Vinci" and list(result.members) == ["BM25@1"]
    assert result.skipped == ["BM25@2", "ReFree"]
    assert result.cascade == {
        "ran": ["BM25@1"],
        "skipped": ["BM25@2", "ReFree"],
        "stopped_after": "BM25@1",
        "probability": round(sigmoid(2), 4),
        "threshold": 0.8,
        "reason": "stopped after BM25@1: P(full pool agrees) 0.88 ≥ 0.80",
    }
    assert result.stages["voting"]["members_run"] == 1 and result.stages["voting"]["members_skipped"] == 2
    assert result.to_dict()["cascade"]["ran"] == ["BM25@1"] and "cascade" not in result.to_record().to_dict()
    # not grounded, but BM25@2 agrees: two members; ReFree never runs
    other = Ensemble(load_config(cascade_config(tmp_path)), reader=Scripted("Michelangelo"), voter=hand_cascade())
    spy = other.runner.retrieval = Spy(other.runner.retrieval)
    result = other.answer(QUESTION)
    assert spy.asked == ["BM25@1", "BM25@2"] and result.skipped == ["ReFree"]
    assert result.members["BM25@1"].score == pytest.approx(2.0) and result.member == "BM25@1"
    # every member (--all-members): the vote of the step that holds them all, the last
    full = other.answer(QUESTION, lazy=False)
    assert set(full.members) == set(POOL) and full.cascade is None and full.member == "ReFree"
    # a subset of members cannot be asked of a cascade, except with every member run
    with pytest.raises(InputError, match="answers with a cascade"):
        other.answer(QUESTION, members=["BM25@1"])
    assert list(other.answer(QUESTION, members=["BM25@1", "BM25@2"], lazy=False).members) == ["BM25@1", "BM25@2"]


def test_a_cascade_of_another_pool_is_refused_and_another_reader_or_corpus_warns(tmp_path, isolated_cache, caplog):
    from eor.pipeline.ensemble import Ensemble

    weights = tmp_path / "cascade.json"
    weights.write_text(json.dumps(hand_cascade_document()).replace("BM25@2", "BM25@3"))  # learned on another pool
    with pytest.raises(ConfigError, match=r"different pool \(missing from the pool: BM25@3; not in the weights file"):
        Ensemble.from_config(cascade_config(tmp_path), weights=weights, reader=Scripted("x"))
    pool = {"members": POOL, "reader": "llama.cpp:other.gguf", "corpus": {"file": "wiki.jsonl", "bytes": 10}}
    weights.write_text(json.dumps(hand_cascade_document(pool=pool)))
    with caplog.at_level(logging.WARNING, logger="eor.pipeline.pool"):
        ensemble = Ensemble.from_config(cascade_config(tmp_path), weights=weights, reader=Scripted("x"))
    warned = [record.getMessage() for record in caplog.records if record.name == "eor.pipeline.pool"]
    assert len(warned) == 2 and ensemble.voter.in_steps
    assert "reader 'llama.cpp:other.gguf', this pool's is 'qwen2.5-0.5b'" in warned[0]
    size = (DEMO / "corpus.jsonl").stat().st_size
    assert f"corpus wiki.jsonl (10 bytes), this pool's is corpus.jsonl ({size:,} bytes)" in warned[1]
    # the same pool: no warning
    caplog.clear()
    same = {"members": POOL, "reader": "qwen2.5-0.5b", "corpus": {"file": "corpus.jsonl", "bytes": size}}
    weights.write_text(json.dumps(hand_cascade_document(pool=same)))
    with caplog.at_level(logging.WARNING, logger="eor.pipeline.pool"):
        Ensemble.from_config(cascade_config(tmp_path), weights=weights, reader=Scripted("x"))
    assert not [record for record in caplog.records if record.name == "eor.pipeline.pool"]


def test_a_config_names_its_default_weights(tmp_path, isolated_cache):
    from eor.core.config import load_config
    from eor.pipeline.ensemble import Ensemble

    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "cascade.json").write_text(json.dumps(hand_cascade_document()))
    config = load_config(cascade_config(tmp_path, "weights/cascade.json"))  # relative to the config's folder
    assert config.default_weights() == tmp_path / "weights" / "cascade.json"
    assert config.to_dict()["voter"]["weights"] == str(tmp_path / "weights" / "cascade.json")
    ensemble = Ensemble.from_config(config, reader=Scripted("Leonardo da Vinci"), cache=False)
    assert ensemble.voter.in_steps and ensemble.answer(QUESTION).skipped == ["BM25@2", "ReFree"]
    missing = load_config(cascade_config(tmp_path, "weights/none.json"))
    with pytest.raises(InputError, match="does not exist"):
        Ensemble(missing, reader=Scripted("x"))


@pytest.mark.parametrize("pool", ["nq-offline", "nq-offline16"])
def test_the_shipped_config_answers_with_the_shipped_cascade(pool):
    from eor.core.config import load_config
    from voters import load_voter

    config = load_config(ROOT / "configs" / f"{pool}.yaml")
    assert config.default_weights() == ROOT / "docs" / "weights" / f"{pool}-cascade.json"
    cascade = load_voter(config.default_weights(), members=config.members)
    assert cascade.kind == "cascade" and sorted(cascade.order) == sorted(config.members)
    pool = cascade.metadata_["pool"]
    assert pool["members"] == config.members and pool["corpus"]["file"] == "wiki-nq.jsonl"
    assert pool["reader"].startswith("llama.cpp:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf@sha256:")


def test_feature_blocks_give_every_subsets_features():
    from voters.features import candidate_blocks, candidate_features
    from voters.similarity import similarity_tensor

    answers = [["Paris", "paris", "Lyon", ""], ["Rome", "Milan", "Rome", "the city of Rome"]]
    passages = [[["Paris is in France"], [], ["Lyon and Paris"], ["x"]], [["Rome"], ["Milan"], [], ["Rome, Italy"]]]
    questions = ["capital of france", "capital of italy"]
    names = ["A", "B", "C", "D"]
    tensor = similarity_tensor(answers, ["em", "f1"])
    blocks = candidate_blocks(tensor, answers, passages, questions, ["em", "f1"])
    for subset in ([0], [1, 3], [0, 2, 3], [3, 1, 0], [0, 1, 2, 3]):
        alone = [[row[m] for m in subset] for row in answers]
        own = [[row[m] for m in subset] for row in passages]
        expected = candidate_features(
            tensor[:, subset][:, :, subset], alone, own, questions, ["em", "f1"], names, subset
        )
        assert np.array_equal(blocks.features(subset, names, subset).matrix, expected.matrix)


def test_token_costs_at_fitted_rates():
    from eor.runs.costs import fit_rates, member_costs
    from eor.runs.run_data import RunData

    prompt = np.array([[100, 400], [250, 50]])
    generated = np.array([[8, 2], [30, 5]])
    seconds = prompt / 500 + generated / 25  # a reader at 500 prompt and 25 generated tokens per second
    tokens = [
        [{"prompt": int(p), "reused": 0, "generated": int(g)} for p, g in zip(rp, rg, strict=True)]
        for rp, rg in zip(prompt, generated, strict=True)
    ]
    rates = fit_rates(np.stack([prompt, generated], axis=-1), seconds)
    assert rates == pytest.approx({"prompt": 500.0, "generated": 25.0})
    data = RunData(
        ["A", "B"],
        ["q1", "q2"],
        [["a", "b"]] * 2,
        [["a"]] * 2,
        [[[], []]] * 2,
        [["", ""]] * 2,
        ["?", "?"],
        seconds.tolist(),
        tokens,
    )
    costs = member_costs(data)
    assert costs.unit == "tokens" and np.allclose(costs.matrix, seconds)
    assert member_costs(data, "seconds").unit == "seconds"
    data.tokens[0][1] = None  # a member read back from the cache: its tokens are unknown
    assert member_costs(data).unit == "seconds"
    with pytest.raises(InputError, match="no token counts"):
        member_costs(data, "tokens")


def test_train_prices_token_counts_at_given_rates(tmp_path, capsys):
    """`eor train --rates P,G`: the weights file's cost model holds the given rates, and each member's mean
    cost is its mean token counts priced at them; records without token counts and `--cost seconds` refuse it."""
    import gzip

    from eor.cli import main
    from eor.core.config import load_config
    from eor.runs.costs import token_counts
    from eor.runs.run_data import load_run

    with gzip.open(ROOT / "docs/records/nq-train.jsonl.gz", "rt", encoding="utf-8") as handle:
        lines = handle.readlines()
    few = tmp_path / "few.jsonl"
    few.write_text("".join(lines[:41]), encoding="utf-8")  # the header and 40 questions
    seven = ROOT / "configs" / "nq-offline.yaml"
    out = tmp_path / "top.json"
    train = ["train", str(few), "--voter", "top", "--metrics", "em", "--config", str(seven), "--out", str(out)]
    assert main([*train, "--rates", "281,60"]) == 0
    costs = json.loads(out.read_text(encoding="utf-8"))["meta"]["costs"]
    assert costs["unit"] == "tokens" and costs["rates"] == {"prompt": 281.0, "generated": 60.0}
    data = load_run(few, load_config(seven).members)
    tokens = token_counts(data)
    assert tokens is not None
    priced = (tokens[..., 0] / 281 + tokens[..., 1] / 60).mean(axis=0)
    assert [costs["members"][name] for name in data.names] == pytest.approx(priced.tolist())
    fitted = json.loads(out.read_text(encoding="utf-8"))["meta"]["costs"]["rates"]
    assert main(train) == 0  # without --rates: fitted to the records' seconds, not the given ones
    assert json.loads(out.read_text(encoding="utf-8"))["meta"]["costs"]["rates"] != fitted
    capsys.readouterr()
    assert main([*train, "--rates", "281,60", "--cost", "seconds"]) == 1
    assert "does not apply to --cost seconds" in capsys.readouterr().err
    old = ["train", str(ROOT / "docs/records/nq16-train.jsonl.gz"), "--voter", "top", "--metrics", "em"]
    assert main([*old, "--out", str(tmp_path / "old.json"), "--rates", "281,60"]) == 1
    assert "--rates prices token counts" in capsys.readouterr().err and not (tmp_path / "old.json").exists()


def test_training_a_cascade_on_the_shipped_records(tmp_path):
    from eor.commands.train_command import TrainOptions, train
    from voters import load_voter

    records = ROOT / "docs" / "records" / "nq-train.jsonl.gz"  # grown beyond the 7-member pool: name its config
    out = tmp_path / "cascade.json"
    seven = ROOT / "configs" / "nq-offline.yaml"
    options = TrainOptions(voter="cascade", metrics=("em", "f1"), max_loss=0.5, pool_config=seven)
    printed = train(records, out, options)
    cascade = load_voter(out)
    assert cascade.kind == "cascade" and sorted(cascade.order) == sorted(cascade.members_)
    assert cascade.order[0] == "Wiki@1"  # the most accurate per recorded second
    chosen = cascade.chosen_point_
    assert chosen.loss <= 0.005 + 1e-12 and chosen.cost < cascade.full_cost_
    thresholds = sorted(point.threshold for point in cascade.operating_points_)
    costs = [p.cost for p in sorted(cascade.operating_points_, key=lambda p: p.threshold)]
    assert thresholds[-1] == math.inf and costs == sorted(costs)  # a higher threshold runs more members
    assert "cascade order: Wiki@1 > " in printed and "held out on train" in printed
    # auto never picks the cascade unless asked about cost; with --budget it stays within it
    from eor.learning.crossval import VoteSettings, auto_names

    assert "cascade" not in auto_names(VoteSettings()) and "cascade" in auto_names(VoteSettings(budget=3.0))
    with pytest.raises(ConfigError, match="not both"):
        train(records, out, TrainOptions(voter="cascade", max_loss=0.5, budget=3.0))


def test_stop_reasons_reach_the_api(tmp_path, isolated_cache):
    from eor.core.config import load_config
    from eor.pipeline.ensemble import Ensemble
    from eor.server import ServerSettings, create_app
    from tests.test_server import LiveServer

    config = load_config(cascade_config(tmp_path))

    def loader() -> Ensemble:
        return Ensemble(config, reader=Scripted("Leonardo da Vinci"), voter=hand_cascade(), cache=False)

    with LiveServer(create_app(config, ServerSettings(), loader=loader)) as server:
        server.wait_ready()
        body = requests.post(f"{server.url}/v1/answer", json={"question": QUESTION}, timeout=60).json()
        assert body["answer"] == "Leonardo da Vinci" and body["skipped"] == ["BM25@2", "ReFree"]
        assert body["cascade"]["reason"] == "stopped after BM25@1: P(full pool agrees) 0.88 ≥ 0.80"
        assert body["cascade"]["ran"] == ["BM25@1"] and body["cascade"]["threshold"] == 0.8
        chat = {"model": "eor", "messages": [{"role": "user", "content": QUESTION}]}
        reply = requests.post(f"{server.url}/v1/chat/completions", json=chat, timeout=60).json()
        assert reply["choices"][0]["message"]["content"] == "Leonardo da Vinci"
        assert reply["eor"]["cascade"]["stopped_after"] == "BM25@1"
        refused = requests.post(
            f"{server.url}/v1/answer", json={"question": QUESTION, "members": ["BM25@1"]}, timeout=60
        )
        assert refused.status_code == 422 and "answers with a cascade" in refused.json()["error"]["message"]


def test_stop_reasons_reach_ask_json(tmp_path, isolated_cache, capsys):
    """The real reader (SmolLM2): threshold 0 stops after the first member whatever it answers."""
    from eor.cli import main
    from tests.test_cli import small_config

    config = small_config(tmp_path)  # ReFree, BM25@1, Wiki@1, BM25@1&Wiki@1
    document = hand_cascade_document(threshold=0.0)
    members = ["ReFree", "BM25@1", "Wiki@1", "BM25@1&Wiki@1"]
    order = ["BM25@1", "Wiki@1", "ReFree", "BM25@1&Wiki@1"]
    document.update(members=members, order=order)
    document["steps"] = [
        {
            "members": order[: j + 1],
            "calibration": {"intercept": 0.0, "top": 1.0, "margin": 0.0},
            "selector": selector_document(order[: j + 1], {"agreement": 1.0}, 0.0),
        }
        for j in range(len(order))
    ]
    weights = tmp_path / "cascade.json"
    weights.write_text(json.dumps(document))
    question = "who painted the mona lisa"
    assert main(["ask", question, "--config", str(config), "--weights", str(weights), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result["members"]) == ["BM25@1"] and result["skipped"] == order[1:]
    assert result["cascade"]["ran"] == ["BM25@1"] and result["cascade"]["reason"].startswith("stopped after BM25@1:")
    assert main(["ask", question, "--config", str(config), "--weights", str(weights)]) == 0
    assert "cascade stopped after BM25@1: P(full pool agrees)" in capsys.readouterr().out
    assert main(["ask", question, "--config", str(config), "--weights", str(weights), "--all-members"]) == 0
    assert "cascade" not in capsys.readouterr().out
