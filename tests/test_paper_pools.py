"""The pools of configs/paper16.yaml (appendix C.1, web search against loopback servers) and
configs/nq-offline16.yaml: all 16 names parse, round-trip and build; every member retrieves; `eor ask`
answers with each config over the demo corpus, with SmolLM2 and small token limits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from eor.cli import main
from eor.core.config import load_config
from retrievers import notation
from retrievers.registry import BuildContext, SourcePool
from tests.conftest import DEMO, ROOT, write_jsonl
from tests.webserver import page_server, serper_server

PAPER = ROOT / "configs" / "paper16.yaml"
OFFLINE = ROOT / "configs" / "nq-offline16.yaml"
KEY = "paper-pool-test-key"
QUESTION = "who designed the bell rock lighthouse"

# Appendix C.1, in its order, and ReFree.
C1_NAMES = [
    "Wiki@10",
    "SE@1",
    "SE@4",
    "PK",
    "SE@RR@10",
    "SE@2&Wiki@5",
    "SE@RR@5&Wiki@5",
    "HB@RR@10",
    "Wiki@10@CP",
    "SE@1@CP",
    "SE@4@CP",
    "SE@RR@10@CP",
    "SE@2&Wiki@5@CP",
    "SE@RR@5&Wiki@5@CP",
    "HB@RR@10@CP",
    "ReFree",
]
OFFLINE_NAMES = [name.replace("SE", "BM25").replace("HB", "HBo") for name in C1_NAMES]


@pytest.fixture(scope="module")
def pages():
    server = page_server()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def serper(pages):
    rows = [
        (f"{pages.url}/lighthouse.html", "Bell Rock Lighthouse", "oldest sea-washed"),
        (f"{pages.url}/tides.html", "Tides", "gravity"),
        (f"{pages.url}/canal.html", "Caledonian Canal", "Telford"),
        (f"{pages.url}/notes.txt", "Tay field notes", "notes"),
        (f"{pages.url}/log.html", "Keeper's log", "1850"),
    ]
    server = serper_server(KEY, {QUESTION: rows})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One eor cache for the module: the demo corpus's indexes are built once."""
    return tmp_path_factory.mktemp("eor-cache")


@pytest.fixture
def env(cache, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("EOR_CACHE", str(cache))
    # A generation cache per test: the tests below count the prompts the reader itself receives.
    monkeypatch.setenv("EOR_GENERATION_CACHE", str(tmp_path / "generations.sqlite"))
    monkeypatch.setenv("SERPER_API_KEY", KEY)


class Reader:
    """A scripted generator for the retrieval tests, whose chunk and word counts are worked out by hand:
    PK's document is 147 words, every @CP summary one sentence. (`eor ask` below uses a real reader.)"""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        self.prompts.extend(prompts)
        return [
            " ".join(["Robert Stevenson designed the Bell Rock Lighthouse."] * 21)
            if prompt.startswith("Generate a background document")
            else "Summary: Robert Stevenson."
            for prompt in prompts
        ]


def local_copy(config: Path, folder: Path, serper=None, pages=None, **changes) -> tuple[Path, dict]:
    """The config with the demo corpus, SE on the loopback servers (if it has SE) and `changes`."""
    data = yaml.safe_load(config.read_text())
    data["corpus"] = {"path": str(DEMO / "corpus.jsonl")}
    data.get("voter", {}).pop("weights", None)  # trained for the shipped reader and corpus, not these
    if "SE" in data.get("sources", {}):
        data["sources"]["SE"]["params"].update(
            base_url=serper.url, allowed_hosts=["127.0.0.1"], cache_path=str(folder / "web"), timeout=2.0
        )
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    path = folder / config.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, data


def pool_of(data: dict, reader: Reader) -> SourcePool:
    sources = {name: (spec["type"], spec.get("params", {})) for name, spec in data.get("sources", {}).items()}
    context = BuildContext(corpus_path=data["corpus"]["path"], reader=reader, depth=data.get("retrieval_depth", 20))
    return SourcePool(context, sources)


@pytest.mark.parametrize("name", C1_NAMES + OFFLINE_NAMES)
def test_names_parse_and_round_trip(name: str) -> None:
    tree = notation.parse(name)
    assert notation.to_name(tree) == name
    assert notation.parse(notation.to_name(tree)) == tree


def test_operator_priority_in_the_paper_names() -> None:
    s = notation.Source
    assert notation.parse("SE@RR@5&Wiki@5@CP") == notation.Compress(
        notation.Concat((notation.TopK(notation.Rerank(s("SE")), 5), notation.TopK(s("Wiki"), 5)))
    )
    assert notation.parse("HB@RR@10@CP") == notation.Compress(notation.TopK(notation.Rerank(s("HB")), 10))


def test_the_configs_list_the_appendix_members() -> None:
    paper, offline = load_config(PAPER), load_config(OFFLINE)
    assert paper.members == C1_NAMES and offline.members == OFFLINE_NAMES
    assert paper.sources["SE"].params["api_key_env"] == "SERPER_API_KEY" and paper.reader.model == "qwen2.5-0.5b"
    assert paper.sources["HB"].params["parts"] == [{"source": "SE"}, {"source": "PK"}, {"source": "Wiki", "depth": 20}]
    assert offline.sources["HBo"].params["parts"][0] == {"source": "BM25"}
    shared = ROOT.parent / "shared" / "data" / "corpus" / "wiki-nq.jsonl"
    assert offline.resolve_path(offline.corpus.path) == shared.resolve()
    if not shared.is_file():
        pytest.skip(f"the shared NQ corpus is not here: {shared}")


def test_paper16_builds_and_every_member_retrieves(pages, serper, env, tmp_path) -> None:
    _, data = local_copy(PAPER, tmp_path, serper, pages)
    reader = Reader()
    sources = pool_of(data, reader)
    members = {name: sources.build(name) for name in data["members"]}
    assert [member.notation for member in members.values()] == C1_NAMES
    got = {name: member.invoke(QUESTION) for name, member in members.items()}

    words = {name: sum(len(d.page_content.split()) for d in docs) for name, docs in got.items()}
    assert len(got["Wiki@10"]) == 10 and got["ReFree"] == []
    assert len(got["SE@1"]) == 1 and got["SE@1"][0].metadata["url"].endswith("/lighthouse.html")
    assert len(got["SE@4"]) == 4 and all(len(d.page_content.split()) <= 250 for d in got["SE@4"])
    assert [d.metadata["id"] for d in got["SE@2&Wiki@5"]] == (
        [d.metadata["id"] for d in got["SE@4"][:2]] + [d.metadata["id"] for d in got["Wiki@10"][:5]]
    )
    assert len(got["SE@RR@10"]) == 10 and max(len(d.page_content.split()) for d in got["SE@RR@10"]) <= 100
    assert len(got["SE@RR@5&Wiki@5"]) == 10 and got["SE@RR@5&Wiki@5"][:5] == got["SE@RR@10"][:5]
    assert len(got["HB@RR@10"]) == 10 and {d.metadata["source"] for d in got["HB@RR@10"]} <= {"SE", "PK", "Wiki"}
    assert words["PK"] == 21 * 7
    for name in C1_NAMES:
        if name.endswith("@CP"):
            assert [d.page_content for d in got[name]] == ["Summary: Robert Stevenson."], name
    # HB's input: all pages in 100-word chunks, PK's 147 words in two chunks, the top 20 Wiki passages.
    hb = sources.build("HB").invoke(QUESTION)
    kinds = [d.metadata["source"] for d in hb]
    assert kinds == sorted(kinds, key=["SE", "PK", "Wiki"].index)
    assert kinds.count("PK") == 2 and kinds.count("Wiki") == 20
    assert [d for d in hb if d.metadata["source"] == "SE"] == sources.source("SE").for_rerank().invoke(QUESTION)


def test_nq_offline16_builds_and_every_member_retrieves(env, tmp_path) -> None:
    _, data = local_copy(OFFLINE, tmp_path)
    sources = pool_of(data, Reader())
    members = {name: sources.build(name) for name in data["members"]}
    assert [member.notation for member in members.values()] == OFFLINE_NAMES
    got = {name: member.invoke(QUESTION) for name, member in members.items()}
    sizes = {name: len(documents) for name, documents in got.items()}
    assert sizes == {
        "Wiki@10": 10,
        "BM25@1": 1,
        "BM25@4": 4,
        "PK": 1,
        "BM25@RR@10": 10,
        "BM25@2&Wiki@5": 7,
        "BM25@RR@5&Wiki@5": 10,
        "HBo@RR@10": 10,
        **{name: 1 for name in OFFLINE_NAMES if name.endswith("@CP")},
        "ReFree": 0,
    }
    bm25, wiki = (sources.source(name).invoke(QUESTION) for name in ("BM25", "Wiki"))
    shared = {d.metadata["id"] for d in bm25} & {d.metadata["id"] for d in wiki[:20]}
    assert len(sources.build("HBo").invoke(QUESTION)) == 20 + 2 + 20 - len(shared)  # a shared passage once


def _ask(config: Path, capsys) -> dict:
    assert main(["ask", QUESTION, "--config", str(config), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# `eor ask` with a real reader: SmolLM2 and small token limits (its answers are poor; the mechanics are tested).
FAST_READER = {
    "reader": {"model": "smollm2-135m", "max_tokens": 8, "context_tokens": 4096},
    "prompts": {"parametric_max_tokens": 24, "compression_max_tokens": 24},
    "max_document_words": 600,
}


class Recording:
    """The configured reader, unchanged, keeping every prompt the ensemble sends it."""

    def __init__(self, reader) -> None:
        self.reader = reader
        self.prompts: list[str] = []

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        self.prompts.extend(prompts)
        return self.reader.generate(prompts, max_tokens)

    def __getattr__(self, name: str):
        return getattr(self.reader, name)


@pytest.fixture
def recorded(monkeypatch) -> list[Recording]:
    """Every reader `eor ask` builds, wrapped in a Recording."""
    from eor import readers

    built: list[Recording] = []
    build = readers.build_reader

    def recording_build(config):
        built.append(Recording(build(config)))
        return built[-1]

    monkeypatch.setattr("eor.pipeline.ensemble.build_reader", recording_build)
    return built


def _check_prompts(prompts: list[str]) -> None:
    """PK's document is generated once per question (PK and HB share it); one summary per @CP member."""
    assert sum(p.startswith("Generate a background document") for p in prompts) == 1
    assert sum(p.startswith("Please truthfully summarize") for p in prompts) == 7


def test_eor_ask_with_paper16_on_the_loopback_search_server(pages, serper, env, tmp_path, capsys, recorded) -> None:
    """`eor ask` end to end (web search over loopback, Wiki, rerank, PK, @CP, the vote) with SmolLM2."""
    config, _ = local_copy(PAPER, tmp_path, serper, pages, **FAST_READER)
    result = _ask(config, capsys)
    members = result["members"]
    assert list(members) == C1_NAMES
    assert result["member"] in C1_NAMES and result["answer"] == members[result["member"]]["answer"]
    assert len(members["SE@RR@10"]["passages"]) == 10 and len(members["HB@RR@10"]["passages"]) == 10
    assert members["SE@1"]["passages"][0]["title"] == "Bell Rock Lighthouse" and members["ReFree"]["passages"] == []
    assert all(len(members[name]["passages"]) == 1 for name in C1_NAMES if name.endswith("@CP"))
    assert any(path == "/search" for _, path in serper.requests)
    [reader] = recorded
    _check_prompts(reader.prompts)


def test_eor_ask_with_nq_offline16(env, tmp_path, capsys, recorded) -> None:
    config, _ = local_copy(OFFLINE, tmp_path, **FAST_READER)
    result = _ask(config, capsys)
    members = result["members"]
    assert list(members) == OFFLINE_NAMES
    assert result["member"] in OFFLINE_NAMES and result["answer"] == members[result["member"]]["answer"]
    assert len(members["HBo@RR@10"]["passages"]) == 10 and len(members["HBo@RR@10@CP"]["passages"]) == 1
    [reader] = recorded
    _check_prompts(reader.prompts)


@pytest.mark.parametrize("pool", ["paper16", "nq-offline16"])
def test_eor_run_records_every_member(pool, pages, serper, env, tmp_path, recorded) -> None:
    """`eor run` with each pool (paper16's web search on the loopback server) records all 16 members."""
    if pool == "paper16":
        config, _ = local_copy(PAPER, tmp_path, serper, pages, **FAST_READER)
        names = C1_NAMES
    else:
        config, _ = local_copy(OFFLINE, tmp_path, **FAST_READER)
        names = OFFLINE_NAMES
    data = write_jsonl(tmp_path / "q.jsonl", [{"id": "q1", "question": QUESTION, "answers": ["Robert Stevenson"]}])
    out = tmp_path / "run"
    assert main(["run", "--config", str(config), "--data", str(data), "--out", str(out)]) == 0
    [record] = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert record["id"] == "q1" and list(record["members"]) == names
    assert all(isinstance(member["answer"], str) for member in record["members"].values())
    [reader] = recorded
    _check_prompts(reader.prompts)
