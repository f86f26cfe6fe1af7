"""The one check of a config (eor.pipeline.validation.validate): one ConfigError per kind of mistake, naming the
value's YAML path and the valid choices; the CLI, the server, `eor train` and the ensemble reject a config
with the same message; and the one choice of the voter (weights file, else uniform)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from eor.cli import main
from eor.commands.train_command import TrainOptions, train
from eor.core.config import load_config
from eor.core.errors import ConfigError, InputError
from eor.pipeline.ensemble import Ensemble, config_voter
from eor.pipeline.validation import check_timeout, validate
from eor.server.serving import serve
from tests.conftest import ROOT
from voters import Voter
from voters.codecs import save_voter
from voters.loading import choose_voter

MEMBERS = "members: [ReFree, Wiki@1]\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (  # unknown source
            "members: [ReFree, Wikki@3]\n",
            "members[1] 'Wikki@3': unknown source(s) Wikki; available: BM25, PK, ReFree, Wiki",
        ),
        (  # unknown source type
            MEMBERS + "sources: {ES: {type: elastic}}\n",
            "sources.ES.type: unknown source type 'elastic'; available: bm25, dense, parametric, none, langchain, "
            "hybrid, web",
        ),
        (  # unknown operator
            "members: [BM25@XY]\n",
            "members[0]: invalid retriever name 'BM25@XY' at position 5: unknown operator '@XY': expected RR, CP",
        ),
        (  # unknown similarity metric
            MEMBERS + "voter: {metrics: [em, f2]}\n",
            "voter.metrics: unknown similarity metric(s) f2; available: bertscore, cosine, em, f1, nli",
        ),
        (  # unknown pooling
            MEMBERS + "voter: {pooling: median}\n",
            "voter.pooling: unknown pooling 'median'; available: mean, max, majority, plurality",
        ),
        (  # metric parameters for a metric the voter does not use
            MEMBERS + "voter: {metric_params: {nli: {model: x}}}\n",
            "voter.metric_params names metric(s) not in voter.metrics: nli",
        ),
        (  # bad placeholder of a template
            MEMBERS + "prompts: {reading: 'Read {document} and answer {querry}'}\n",
            "prompts.reading: KeyError('querry'); its placeholders are {query}, {document}",
        ),
        (  # bad placeholder of a variant's template
            "members: [Wiki@1:fs]\nprompts: {variants: {fs: {retrieval_free: '{document} {query}'}}}\n",
            "prompts.variants.fs.retrieval_free: KeyError('document'); its placeholders are {query}, {demonstrations}",
        ),
        (  # unknown answer style
            MEMBERS + "prompts: {style: haiku}\n",
            "prompts.style: unknown answer style 'haiku'; valid: few-words, 15-words",
        ),
        (  # a member's unknown prompt variant
            "members: [Wiki@1:other]\nprompts: {variants: {fs: {}}}\n",
            "members[0] 'Wiki@1:other': unknown prompt variant 'other'; this config's variants: fs",
        ),
        (  # unknown reader backend
            MEMBERS + "reader: {backend: vllm}\n",
            "reader.backend: unknown reader backend 'vllm'; valid: auto, llama.cpp, transformers, openai",
        ),
        (  # an option of another backend than the one named
            MEMBERS + "reader: {backend: openai, llama_cpp: {threads: 2}}\n",
            "reader.llama_cpp is set, but the reader's backend is openai: remove it, or set backend: llama.cpp",
        ),
    ],
)
def test_each_kind_of_mistake_is_a_config_error_naming_its_path_and_the_valid_choices(tmp_path, text, message):
    config = load_config(write(tmp_path, text))
    with pytest.raises(ConfigError) as raised:
        validate(config)
    assert str(raised.value).splitlines()[0].startswith(message)


@pytest.mark.parametrize("value", [0, -1.5, math.nan, math.inf, True, "5"])
def test_a_bad_member_timeout_is_bad_input_at_run_time(value) -> None:
    with pytest.raises(InputError, match="member_timeout must be a positive number of seconds or None"):
        check_timeout(value)


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda path: path.name)
def test_the_shipped_configs_pass(path: Path) -> None:
    validate(load_config(path))


def test_cli_server_train_and_ensemble_reject_a_config_with_the_same_message(tmp_path, capsys) -> None:
    path = write(tmp_path, "members: [ReFree, BM26@1]\n")
    expected = "members[1] 'BM26@1': unknown source(s) BM26; available: BM25, PK, ReFree, Wiki"
    messages = []
    for attempt in (
        lambda: serve(path),
        lambda: train(tmp_path / "no-records", tmp_path / "w.json", TrainOptions(pool_config=path)),
        lambda: Ensemble.from_config(path),
    ):
        with pytest.raises(ConfigError) as raised:
            attempt()
        messages.append(str(raised.value))
    assert main(["ask", "who wrote hamlet", "--config", str(path), "--no-cache"]) == 1
    messages.append(capsys.readouterr().err.strip().removeprefix("eor: error: "))
    assert messages == [expected] * 4


def test_the_voter_is_the_weights_file_s_else_uniform_over_the_config_s_metrics(tmp_path) -> None:
    config = load_config(write(tmp_path, MEMBERS + "voter: {metrics: [em, f1], pooling: max, threshold: 0.4}\n"))
    uniform = config_voter(config)
    assert uniform.members_ == ["ReFree", "Wiki@1"] and uniform.metric_names_ == ["em", "f1"]
    assert (
        uniform.get_params()
        == choose_voter(None, config.members, metrics=("em", "f1"), pooling="max", threshold=0.4).get_params()
    )
    file = save_voter(Voter.uniform(2, metrics=("em",), members=config.members), tmp_path / "w.json")
    config.voter.weights = str(file)
    assert config_voter(config).metric_names_ == ["em"]  # the config's weights file
    other = save_voter(Voter.uniform(2, metrics=("f1",), members=config.members), tmp_path / "other.json")
    assert config_voter(config, other).metric_names_ == ["f1"]  # an explicit file wins
    with pytest.raises(ConfigError):
        config_voter(load_config(write(tmp_path, "members: [ReFree, BM25@1]\n")), other)  # another pool's file
    assert choose_voter(other, ["Wiki@1", "BM25@1", "ReFree"], sub_pool=True).members_ == config.members
