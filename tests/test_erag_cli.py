"""`eor erag` and `eor utility` end to end with the packaged SmolLM2 over the demo corpus: the files and keys
they document, labels that line up with documents, values recomputed from the saved labels, resumption from
the generation cache, the cost measurement, and one-line errors (exit 1) before any model loads."""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import fields
from pathlib import Path

import pytest

from eor.cli import main
from eor.evaluation.erag.metrics import MetricSpec
from eor.pipeline.stages.generation import GenerationStats
from tests.conftest import DEMO

QUESTIONS = DEMO / "questions.jsonl"
METRICS = ["P@3", "R@3", "MAP@3", "MRR@3", "NDCG@3", "Hit@3"]


def small_config(folder: Path) -> Path:
    path = folder / "config.yaml"
    path.write_text(
        f"""
name: erag-test
reader: {{model: smollm2-135m, max_tokens: 8, context_tokens: 2048}}
corpus: {{path: {DEMO / "corpus.jsonl"}}}
members: [BM25@1]
voter: {{metrics: [em, f1]}}
batch_size: 2
"""
    )
    return path


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("erag-cli")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EOR_CACHE", str(folder / "cache"))  # the BM25 index of the demo corpus is built here
        patch.delenv("EOR_GENERATION_CACHE", raising=False)  # generations in the default file, under $EOR_CACHE
        yield folder, small_config(folder)


@pytest.fixture(scope="module")
def erag_run(workspace):
    folder, config = workspace
    out = folder / "erag"
    args = ["erag", "--config", str(config), "--data", str(QUESTIONS), "--member", "BM25", "--k", "3"]
    assert main([*args, "--limit", "3", "--cutoffs", "1,3", "--cost-questions", "1", "--out", str(out)]) == 0
    return out, args


@pytest.fixture(scope="module")
def utility_run(workspace):
    folder, config = workspace
    out = folder / "utility"
    args = ["utility", "--config", str(config), "--data", str(QUESTIONS), "--member", "BM25", "--ks", "1,3"]
    assert main([*args, "--limit", "3", "--similarity", "f1", "--out", str(out)]) == 0
    return out


def gold_passages() -> dict[str, list[str]]:
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines()[:3]]
    return {row["id"]: row["gold_passages"] for row in rows}


def test_erag_writes_the_documented_files_and_keys(erag_run, workspace) -> None:
    out, _ = erag_run
    for name in ("erag.json", "erag.md", "erag.png", "config.json"):
        assert (out / name).is_file(), name
    shared = workspace[0] / "cache" / "generations.sqlite"  # the one generation cache, under $EOR_CACHE
    assert json.loads((out / "erag.json").read_text())["settings"]["cache"] == str(shared)
    assert (out / "erag.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((out / "erag.json").read_text())
    assert {"questions", "mean", "correlation", "baselines", "settings", "by_cutoff", "cost"} <= set(data)
    assert [entry["id"] for entry in data["questions"]] == ["demo-q01", "demo-q02", "demo-q03"]
    for entry in data["questions"]:
        assert {"id", "documents", "labels", "metrics", "e2e", "answers", "e2e_answer", "gold_answers"} <= set(entry)
        assert len(entry["documents"]) == len(entry["labels"]) == len(entry["answers"]) == 3
        assert all(label in (0.0, 1.0) for label in entry["labels"])  # em labels are binary
        assert entry["e2e"] in (0.0, 1.0)
        assert list(entry["metrics"]) == METRICS
        for name, value in entry["metrics"].items():  # the saved metrics follow from the saved labels
            base, k = name.split("@")
            assert value == pytest.approx(MetricSpec(base, int(k))(entry["labels"]), abs=1e-12)
    assert list(data["mean"]) == METRICS
    for name in METRICS:
        assert data["mean"][name] == pytest.approx(sum(e["metrics"][name] for e in data["questions"]) / 3)
        assert set(data["correlation"][name]) == {"kendall_tau", "spearman_rho", "n"}
    assert set(data["baselines"]) == {"containment", "provenance"}
    for baseline in data["baselines"].values():
        assert {"questions", "mean", "correlation"} <= set(baseline)
        assert [len(entry["labels"]) for entry in baseline["questions"]] == [3, 3, 3]
        assert set(baseline["correlation"]) == set(METRICS)
    # Provenance labels by hand: 1 exactly where a retrieved id is one of the question's gold passages.
    gold = gold_passages()
    for entry in data["baselines"]["provenance"]["questions"]:
        assert entry["labels"] == [float(doc in gold[entry["id"]]) for doc in entry["documents"]]
    settings = data["settings"]
    assert settings["k"] == 3 and settings["member"] == "BM25" and settings["questions"] == 3
    assert settings["downstream_metric"] == "em" and settings["cutoffs"] == [1, 3]


def test_erag_correlation_against_cutoffs(erag_run) -> None:
    data = json.loads((erag_run[0] / "erag.json").read_text())
    table = data["by_cutoff"]
    assert table["cutoffs"] == [1, 3]
    assert set(table["correlation"]) == {"erag", "containment", "provenance"}
    assert set(table["correlation"]["erag"]) == {"P", "R", "MAP", "MRR", "NDCG", "Hit"}
    # With one document the end-to-end prompt IS the first document's eRAG prompt (a cache hit).
    first_labels = [entry["labels"][0] for entry in data["questions"]]
    assert table["e2e_mean"]["1"] == pytest.approx(sum(first_labels) / 3)
    assert table["e2e_mean"]["3"] == pytest.approx(sum(entry["e2e"] for entry in data["questions"]) / 3)
    assert table["correlation"]["erag"]["NDCG"]["3"] == data["correlation"]["NDCG@3"]
    markdown = (erag_run[0] / "erag.md").read_text()
    headings = ("## Mean retrieval metrics", "## Correlation with the end-to-end score", "## Cost", "## Per question")
    for heading in headings:
        assert heading in markdown


def test_erag_cost_comparison(erag_run) -> None:
    cost = json.loads((erag_run[0] / "erag.json").read_text())["cost"]
    assert set(cost["evaluation"]) == {"one_pass", "erag", "e2e"}
    assert cost["evaluation"]["one_pass"]["unique"] == 9 + 3  # 9 one-document prompts, 3 with all documents
    assert cost["evaluation"]["erag"]["requests"] == 9 and cost["evaluation"]["e2e"]["requests"] == 3
    for phase in cost["evaluation"].values():  # the generation stage's one stats type
        assert list(phase) == [item.name for item in fields(GenerationStats)]
    measured = cost["measured"]
    assert measured["questions"] == 1 and measured["documents"] == 3
    table = measured["configurations"]
    assert list(table) == ["e2e", "erag-query", "erag-document"]
    assert [(table[n]["calls"], table[n]["prompts"], table[n]["batch_size"]) for n in table] == [
        (1, 1, 1),
        (1, 3, 3),
        (3, 3, 1),
    ]
    for row in table.values():
        assert row["seconds"] > 0 and row["peak_rss_mb"] > row["reader_rss_mb"] > 0
        assert row["python_heap_peak_mb"] >= 0 and row["context_tokens"] % 256 == 0
    # End-to-end reads all three documents in one prompt, so it needs the longest context.
    assert table["e2e"]["longest_prompt_tokens"] > table["erag-document"]["longest_prompt_tokens"]
    assert table["e2e"]["context_tokens"] >= table["erag-document"]["context_tokens"]


def test_erag_rerun_resumes_from_the_generation_cache(erag_run, tmp_path, capsys) -> None:
    first, args = erag_run
    out = tmp_path / "copy"
    shutil.copytree(first, out)  # the other tests read the first run's files
    assert main([*args, "--limit", "3", "--cutoffs", "1,3", "--cost-questions", "0", "--out", str(out)]) == 0
    data = json.loads((out / "erag.json").read_text())
    assert data["cost"]["evaluation"]["one_pass"]["generated"] == 0
    assert data["cost"]["evaluation"]["erag"]["generated"] == 0
    assert data["cost"]["evaluation"]["e2e"]["generated"] == 0
    assert all(phase["cache_hits"] == phase["unique"] for phase in data["cost"]["evaluation"].values())
    assert "measured" not in data["cost"]
    assert "eRAG of BM25 over 3 questions" in capsys.readouterr().out


def test_utility_writes_the_documented_files_and_keys(utility_run) -> None:
    out = utility_run
    for name in ("utility.json", "utility.md", "utility.png", "config.json"):
        assert (out / name).is_file(), name
    data = json.loads((out / "utility.json").read_text())
    assert {"questions", "mean", "correlation", "cost", "settings"} <= set(data)
    assert data["settings"]["ks"] == [1, 3] and data["settings"]["similarity"] == "f1"
    assert set(data["mean"]) == {"ordered", "reversed", "oracle"}
    gold = gold_passages()
    for entry in data["questions"]:
        assert {"id", "question", "zero_shot", "contexts"} <= set(entry)
        p_zero = entry["zero_shot"]["p"]
        for setting in ("ordered", "reversed", "oracle"):
            for k in ("1", "3"):
                row = entry["contexts"][setting][k]
                assert {"documents", "answer", "p", "utility", "ndcg"} <= set(row)
                if p_zero == 0:
                    assert row["utility"] is None  # undefined, not 0
                else:
                    assert row["utility"] == pytest.approx((row["p"] - p_zero) / p_zero)
        ordered, reversed_ = entry["contexts"]["ordered"]["3"], entry["contexts"]["reversed"]["3"]
        assert reversed_["documents"] == ordered["documents"][::-1] and len(ordered["documents"]) == 3
        assert entry["contexts"]["oracle"]["1"]["documents"] == gold[entry["id"]][:1]
        assert entry["contexts"]["oracle"]["1"]["ndcg"] == 1.0
    for setting in ("ordered", "reversed", "oracle"):
        assert set(data["correlation"][setting]) == {"1", "3"}
        assert set(data["correlation"][setting]["1"]) == {"pearson_r", "n"}
    assert "## Pearson's r between nDCG@k and U" in (out / "utility.md").read_text()


@pytest.mark.parametrize(
    ("command", "extra", "message"),
    [
        ("erag", ["--member", "Nope"], "unknown source(s) Nope"),
        ("erag", ["--member", "BM25", "--k", "3", "--cutoffs", "1,5"], "--cutoffs must not exceed --k 3"),
        ("erag", ["--member", "BM25", "--metric", "bleu"], "unknown --metric 'bleu'"),
        ("erag", ["--member", "BM25@@"], "invalid retriever name"),
        ("utility", ["--member", "Nope"], "unknown source(s) Nope"),
        ("utility", ["--member", "BM25", "--ks", "0,2"], "--ks must be positive integers"),
        ("utility", ["--member", "BM25", "--similarity", "nonsense"], "unknown similarity metric 'nonsense'"),
    ],
)
def test_bad_input_is_one_line_and_exit_1(workspace, capsys, command, extra, message) -> None:
    folder, config = workspace
    out = folder / f"bad-{command}"
    assert main([command, "--config", str(config), "--data", str(QUESTIONS), *extra, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("eor: error: ") and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()  # nothing written, no model loaded


def test_a_count_below_one_is_refused_by_the_parser(workspace, capsys) -> None:
    folder, config = workspace
    out = folder / "bad-k"
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "erag",
                "--config",
                str(config),
                "--data",
                str(QUESTIONS),
                "--member",
                "BM25",
                "--k",
                "0",
                "--out",
                f"{out}",
            ]
        )
    assert exit_.value.code == 2
    assert "argument --k: expected a whole number ≥ 1, got 0" in capsys.readouterr().err
    assert not out.exists()


def test_utility_scores_are_finite_or_undefined(utility_run) -> None:
    data = json.loads((utility_run / "utility.json").read_text())
    for rows in data["mean"].values():
        for row in rows.values():
            assert row["utility"] is None or math.isfinite(row["utility"])


def test_the_cost_child_imports_the_same_eor(monkeypatch) -> None:
    """The cost measurement's child process finds the eor this process runs, installed or not: the folder holding
    the `eor` package first on its PYTHONPATH, never the package's own folder (whose `core`, `server`... would
    shadow top-level modules)."""
    import eor
    from eor.evaluation.erag.time_and_memory import child_environment

    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    first, *rest = child_environment()["PYTHONPATH"].split(os.pathsep)
    assert Path(first) == Path(eor.__file__).resolve().parents[1]
    assert (Path(first) / "eor" / "__init__.py").is_file() and rest == ["/elsewhere"]
