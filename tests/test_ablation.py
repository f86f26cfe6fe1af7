"""Corpus ablation (eor.learning.ablation, retrievers.withheld): a question's gold passages and every passage
holding a gold answer are withheld at retrieval, over indexes built once. On a hand-made corpus: which passages
are withheld (by hand), and for every kind of retriever (BM25 under both engines, dense, hybrid, reranked,
compressed) that no withheld passage reaches a member and every member still gets its k passages, the next
ranked; BM25 ranks them by the whole corpus's statistics, dense as an index built without them; the mask is part
of the per-query memo; a source that cannot withhold refuses; `eor run` on an ablated question file."""

from __future__ import annotations

import json

import numpy as np
import pytest
from langchain_core.documents import Document

from eor.core.data import Question, load_questions
from eor.core.errors import InputError, RetrieverError
from eor.learning.ablation import Ablation, write_ablated
from eor.pipeline.stages.retrieval import RetrievalStage
from retrievers.adapters import LangChainSource
from retrievers.base import SourceRetriever, passage
from retrievers.bm25 import BM25Retriever
from retrievers.corpus import load_corpus
from retrievers.dense import DenseRetriever
from retrievers.registry import BuildContext, SourcePool
from retrievers.withheld import withholding
from tests.conftest import write_jsonl

QUESTION = "who designed the bell rock lighthouse"
ANSWERS = ["Robert Stevenson", "Stevenson"]

# p0 is the gold passage; p1 and p5 hold "Stevenson" (p5 only in its title); p2 holds "stevensons" (not a
# whole-token match) and p3 "Robert" alone; the rest are about lighthouses and other things.
PASSAGES = [
    ("p0", "Bell Rock Lighthouse", "The Bell Rock Lighthouse was designed by Robert Stevenson and built 1807 to 1810."),
    ("p1", "Stevenson family", "Stevenson's lighthouses stand on many Scottish rocks and the bell rock is one."),
    ("p2", "Engineers", "The stevensons were engineers of lighthouse towers on the Scottish coast."),
    ("p3", "Robert", "Robert is a name; a bell rock lighthouse keeper named Robert kept the light."),
    ("p4", "Inchcape", "The Inchcape rock, also called the bell rock, lies off the coast of Angus."),
    ("p5", "Robert Stevenson (engineer)", "A Scottish civil engineer famed for designing lighthouses."),
    ("p6", "Skerryvore", "Skerryvore lighthouse was designed by Alan and built on a rock in the sea."),
    ("p7", "Lighthouse", "A lighthouse is a tower that emits light to guide ships past a dangerous rock."),
    ("p8", "Bell", "A bell is a percussion instrument; a bell on the rock warned sailors before the light."),
    ("p9", "Eddystone", "The Eddystone lighthouse was designed by John Smeaton and stands on the Eddystone rocks."),
    ("p10", "Fastnet", "The Fastnet lighthouse stands on the Fastnet rock, the most southerly point of Ireland."),
    ("p11", "Pharos", "The lighthouse of Alexandria, the Pharos, was designed by Sostratus of Cnidus."),
    ("p12", "Cardiff", "Cardiff is the capital of Wales and its largest city."),
    ("p13", "Tea", "Tea is an aromatic beverage prepared by pouring hot water over cured leaves."),
]
WITHHELD = ("p0", "p1", "p5")


@pytest.fixture
def corpus(tmp_path, isolated_cache):
    return write_jsonl(tmp_path / "corpus.jsonl", [{"id": i, "title": t, "text": x} for i, t, x in PASSAGES])


def _question(**extra) -> Question:
    return Question("q1", QUESTION, list(ANSWERS), {"gold_passages": ["p0"], **extra})


def _ids(documents: list[Document]) -> list[str]:
    return [doc.metadata["id"] for doc in documents]


def test_the_withheld_passages_by_hand(corpus) -> None:
    ablation = Ablation(load_corpus(corpus))
    gold, holding = ablation.withheld(_question())
    assert gold == ["p0"] and holding == ["p1", "p5"]  # p2's "stevensons" and p3's "Robert" are not an answer
    copy = ablation.copy(_question())
    assert copy["id"] == "q1/ablated" and copy["ablated_from"] == "q1"
    assert copy["withheld"] == list(WITHHELD)
    assert copy["withheld_why"] == {"gold_passages": 1, "holding_an_answer": 2}
    with pytest.raises(InputError, match="no gold answers"):
        ablation.copy(Question("q2", QUESTION, []))
    with pytest.raises(InputError, match="already an ablated copy"):
        ablation.copy(_question(withheld=["p0"]))


def test_an_ablated_question_file_round_trips(corpus, tmp_path) -> None:
    questions = write_jsonl(
        tmp_path / "q.jsonl", [{"id": "q1", "question": QUESTION, "answers": ANSWERS, "gold_passages": ["p0"]}]
    )
    out = tmp_path / "ablated.jsonl"
    summary = write_ablated(load_questions(questions), load_corpus(corpus), out)
    assert summary["questions"] == 1 and summary["withheld_max"] == 3
    (copy,) = load_questions(out)
    assert copy.withheld == WITHHELD and copy.extra["ablated_from"] == "q1" and copy.id == "q1/ablated"
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"question": QUESTION, "withheld": "p0"}])
    with pytest.raises(InputError, match="'withheld' must be a list of passage ids"):
        load_questions(bad)


def _retrieve(retriever, withheld=()) -> list[Document]:
    return retriever.invoke(QUESTION, withholding(None, withheld))


@pytest.mark.parametrize("engine", ["bm25s", "rank-bm25"])
def test_bm25_ranks_past_withheld_passages_by_the_whole_corpus_statistics(corpus, tmp_path, engine) -> None:
    full = BM25Retriever(corpus_path=str(corpus), depth=len(PASSAGES), engine=engine)
    ranking = _ids(_retrieve(full))
    assert set(WITHHELD) & set(ranking[:4])  # the withheld passages rank near the top when not withheld
    bm25 = BM25Retriever(corpus_path=str(corpus), depth=4, engine=engine)
    masked = _retrieve(bm25, WITHHELD)
    assert _ids(masked) == [pid for pid in ranking if pid not in WITHHELD][:4]
    # the scores are the full corpus's (idf and mean length of all 14 passages) ...
    scores = {doc.metadata["id"]: doc.metadata["score"] for doc in _retrieve(full)}
    assert [doc.metadata["score"] for doc in masked] == [scores[pid] for pid in _ids(masked)]
    # ... not those of an index built without the withheld passages, which has other statistics
    rest = [{"id": i, "title": t, "text": x} for i, t, x in PASSAGES if i not in WITHHELD]
    rebuilt = BM25Retriever(corpus_path=str(write_jsonl(tmp_path / "rest.jsonl", rest)), depth=4, engine=engine)
    assert not np.allclose([d.metadata["score"] for d in _retrieve(rebuilt)], [d.metadata["score"] for d in masked])


def test_dense_gives_the_list_of_an_index_built_without_the_withheld_passages(corpus, tmp_path) -> None:
    dense = DenseRetriever(corpus_path=str(corpus), depth=5, encoder="minilm-l6")
    assert set(WITHHELD) & set(_ids(_retrieve(dense)))
    rest = [{"id": i, "title": t, "text": x} for i, t, x in PASSAGES if i not in WITHHELD]
    rebuilt = DenseRetriever(corpus_path=str(write_jsonl(tmp_path / "rest.jsonl", rest)), depth=5, encoder="minilm-l6")
    masked, expected = _retrieve(dense, WITHHELD), _retrieve(rebuilt)
    assert _ids(masked) == _ids(expected)
    assert np.allclose([d.metadata["score"] for d in masked], [d.metadata["score"] for d in expected], atol=1e-6)


def _pool(corpus, reader=None) -> SourcePool:
    parts = [{"source": "BM25", "depth": 3}, {"source": "Wiki", "depth": 3}]
    return SourcePool(
        BuildContext(corpus_path=str(corpus), depth=6, reader=reader), {"HBC": ("hybrid", {"parts": parts})}
    )


# passages each member reads; fusion and the hybrid: the distinct passages of their parts' (k each)
MEMBERS = {"BM25@3": 3, "Wiki@3": 3, "BM25@2&Wiki@2": 4, "BM25#2": 1, "BM25+Wiki": ("BM25@6", "Wiki@6"),
           "HBC": ("BM25@3", "Wiki@3"), "BM25@RR@3": 3, "(BM25@2&Wiki@2)@RR@2": 2}  # fmt: skip


@pytest.mark.parametrize("member", sorted(MEMBERS))
def test_no_withheld_passage_reaches_a_member_and_each_still_gets_k(corpus, member) -> None:
    pool = _pool(corpus)
    retriever = pool.build(member)
    plain, masked = _retrieve(retriever), _retrieve(retriever, WITHHELD)
    assert not set(_ids(masked)) & set(WITHHELD)
    expected = MEMBERS[member]
    if isinstance(expected, int):
        assert len(masked) == len(plain) == expected
    else:  # every part still gives its k passages, the next-ranked ones
        parts = [_ids(_retrieve(pool.build(part), WITHHELD)) for part in expected]
        assert all(len(ids) == int(part.split("@")[1]) for ids, part in zip(parts, expected, strict=True))
        assert {pid.split("#")[0] for pid in _ids(masked)} == set(parts[0]) | set(parts[1])
    texts = " ".join(doc.page_content for doc in masked)
    assert "Robert Stevenson" not in texts and "Stevenson's" not in texts  # nor any chunk of one


def test_compression_never_reads_a_withheld_passage(corpus, smollm2) -> None:
    from eor.pipeline.stages.generation import GenerationStage

    stage = GenerationStage(smollm2)
    seen: list[str] = []
    original = stage.generate

    def generate(prompts, **kwargs):
        seen.extend(prompts)
        return original(prompts, **kwargs)

    stage.generate = generate  # type: ignore[method-assign]
    retriever = _pool(corpus, stage).build("BM25@3@CP")
    (summary,) = _retrieve(retriever, WITHHELD)
    assert summary.metadata["generated"] and len(seen) == 1
    for pid, _, text in PASSAGES:
        assert (text in seen[0]) == (pid in _ids(_retrieve(_pool(corpus).build("BM25@3"), WITHHELD)))


def test_the_mask_is_part_of_the_memo_key(corpus) -> None:
    bm25 = BM25Retriever(corpus_path=str(corpus), depth=3)
    plain = _ids(_retrieve(bm25))
    masked = _ids(_retrieve(bm25, WITHHELD))
    assert plain != masked and _ids(_retrieve(bm25)) == plain and _ids(_retrieve(bm25, WITHHELD)) == masked
    other = _ids(_retrieve(bm25, [plain[1]]))
    assert other == [plain[0], plain[2], *[pid for pid in masked if pid not in plain][:1]] and other != masked


class Listed(SourceRetriever):
    """A source of another package that reads its own corpus and knows nothing of masks."""

    def _retrieve_uncached(self, queries, *, run_managers):
        return [[passage(text, id=pid, source=self.source_name) for pid, _, text in PASSAGES[:3]] for _ in queries]


def test_a_source_that_cannot_withhold_refuses(corpus) -> None:
    foreign = LangChainSource(source_name="Foreign", retriever=BM25Retriever(corpus_path=str(corpus), depth=3))
    assert _retrieve(foreign)  # unmasked: served
    with pytest.raises(RetrieverError, match="cannot withhold passages"):
        _retrieve(foreign, WITHHELD)
    plugin = Listed(source_name="Notes")  # a source that does not say it withholds is refused, never trusted
    assert _ids(_retrieve(plugin)) == ["p0", "p1", "p2"]
    with pytest.raises(RetrieverError, match="cannot withhold passages"):
        _retrieve(plugin, WITHHELD)


def test_the_retrieval_stage_withholds_per_question(corpus) -> None:
    pool = _pool(corpus)
    stage = RetrievalStage({"BM25@3": pool.build("BM25@3")})
    plain, masked = stage.retrieve("BM25@3", [QUESTION, QUESTION], withheld=[(), WITHHELD])
    assert set(WITHHELD) & set(_ids(plain)) and not set(WITHHELD) & set(_ids(masked))  # type: ignore[arg-type]
    assert len(plain) == len(masked) == 3  # type: ignore[arg-type]


def test_eor_run_on_an_ablated_file_records_what_was_withheld(corpus, tmp_path, smollm2) -> None:
    from eor.core.config import CorpusConfig, EnsembleConfig, ReaderConfig
    from eor.pipeline.ensemble import Ensemble

    questions = write_jsonl(
        tmp_path / "q.jsonl", [{"id": "q1", "question": QUESTION, "answers": ANSWERS, "gold_passages": ["p0"]}]
    )
    ablated = tmp_path / "ablated.jsonl"
    write_ablated(load_questions(questions), load_corpus(corpus), ablated)
    config = EnsembleConfig(
        members=["ReFree", "BM25@2", "Wiki@1", "BM25@1&Wiki@1"],
        corpus=CorpusConfig(path=str(corpus)),
        reader=ReaderConfig(model="smollm2-135m", max_tokens=8),
    )
    ensemble = Ensemble(config, reader=smollm2)
    plain, copy = (
        json.loads(json.dumps(result.to_record().to_dict()))
        for result in ensemble.answer_batch([*load_questions(questions), *load_questions(ablated)])
    )
    assert copy["withheld"] == list(WITHHELD) and copy["ablated_from"] == "q1"
    read = {p["id"] for member in copy["members"].values() for p in member["passages"]}
    assert read and not read & set(WITHHELD)
    assert {p["id"] for member in plain["members"].values() for p in member["passages"]} & set(WITHHELD)


def test_ablated_records_resume_grow_and_pack_with_their_mask(corpus, tmp_path, capsys) -> None:
    """`eor ablate`, then `eor run` (SmolLM2), grown by a member and packed: no member, the grown one included,
    ever reads a withheld passage, and the packed records keep what was withheld."""
    from eor.cli import main
    from eor.runs.records import read_records

    questions = write_jsonl(
        tmp_path / "q.jsonl", [{"id": "q1", "question": QUESTION, "answers": ANSWERS, "gold_passages": ["p0"]}]
    )
    ablated = tmp_path / "ablated.jsonl"
    assert main(["ablate", "--data", str(questions), "--corpus", str(corpus), "--out", str(ablated)]) == 0
    assert "1 ablated copies" in capsys.readouterr().out

    def config(members: list[str]) -> str:
        path = tmp_path / f"pool{len(members)}.yaml"
        path.write_text(
            "name: ablate\nreader: {model: smollm2-135m, max_tokens: 8, llama_cpp: {context_tokens: 2048}}\n"
            f"corpus: {{path: {corpus}}}\nmembers: {json.dumps(members)}\nvoter: {{metrics: [em]}}\n"
        )
        return str(path)

    out = tmp_path / "run"
    for members in (["ReFree", "BM25@2"], ["ReFree", "BM25@2", "BM25@1&Wiki@3"]):  # then grown by one member
        assert main(["run", "--config", config(members), "--data", str(ablated), "--out", str(out), "--no-cache"]) == 0
    assert main(["records", "pack", str(out), "--out", str(tmp_path / "packed.jsonl.gz")]) == 0
    (record,) = read_records(tmp_path / "packed.jsonl.gz")
    assert record.extra["withheld"] == list(WITHHELD) and record.extra["ablated_from"] == "q1"
    assert set(record.members) == {"ReFree", "BM25@2", "BM25@1&Wiki@3"}
    read = {p["id"] for output in record.members.values() for p in output.passages}
    assert len(record.members["BM25@1&Wiki@3"].passages) == 4 and not read & set(WITHHELD)
