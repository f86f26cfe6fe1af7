"""The eRAG evaluation API: labels, metrics, end-to-end scores, baselines, keying by question id, batching and
caching of (question, document) generations through the generation stage (one cache path, one stats type,
one identity rule); a deterministic generator for the bookkeeping, and one small run with the real SmolLM2
reader."""

from __future__ import annotations

import json
import math
import re

import pytest
from scipy import stats

from eor.core.errors import CacheError, InputError, ReaderError
from eor.core.prompts import PromptTemplates
from eor.evaluation.erag import GenerationCache, Request, as_passage, evaluate, generate, make_generator
from eor.pipeline.stages.generation import GenerationStage, GenerationStats
from eor.runs.generation_cache import generation_key

# Three questions; q1 and q3 have the same text (and share two documents) but different gold answers.
CAPITAL = "what is the capital of france"
HAMLET = "who wrote hamlet"
QUESTIONS = {"q1": CAPITAL, "q2": HAMLET, "q3": CAPITAL}
PARIS = {"id": "d-paris", "title": "Paris", "text": "Paris is nice. ANSWER: Paris"}
LYON = {"id": "d-lyon", "title": "", "text": "ANSWER: Lyon"}
NOTHING = {"id": "d-none", "title": "Misc", "text": "no information here"}
RETRIEVAL = {
    "q1": [PARIS, NOTHING, LYON],
    "q2": ["nothing at all", "ANSWER: Shakespeare"],
    "q3": [LYON, PARIS],
}
GOLDS = {"q1": ["Paris"], "q2": ["William Shakespeare", "Shakespeare"], "q3": ["Lyon"]}
METRICS = ["P@2", "Hit@2", "MRR@3", "NDCG@3", "R@1", "MAP@3"]


def answer_from(passages: list[str]) -> str:
    """The generator's rule: the answer named by the LAST passage that names one, else 'unknown'."""
    found = [re.search(r"ANSWER: (\w+)", passage) for passage in passages]
    found = [match.group(1) for match in found if match]
    return found[-1] if found else "unknown"


class RecordingGenerator:
    """A reference-style text_generator: {question text: [passage texts]} -> {question text: answer}."""

    def __init__(self) -> None:
        self.calls: list[dict[str, list[str]]] = []

    def __call__(self, inputs: dict[str, list[str]]) -> dict[str, str]:
        self.calls.append(inputs)
        return {question: answer_from(passages) for question, passages in inputs.items()}


class FakeReader:
    """An eor Reader whose answer follows the same rule on the prompt text."""

    name = "fake-reader"
    default_max_tokens = 8

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        self.calls.append(list(prompts))
        return [f"Answer: {answer_from([prompt])}." for prompt in prompts]  # cleaned to the bare answer


class IdentifiedReader(FakeReader):
    """FakeReader with an identity: the generation stage caches it."""

    identity = "fake-reader:v1"


def run(generator=None, **kwargs):
    generator = generator or RecordingGenerator()
    options = {
        "downstream_metric": "em",
        "retrieval_metrics": METRICS,
        "questions": QUESTIONS,
        "provenance": {"q1": ["d-paris"], "q2": [], "q3": ["d-lyon", "d-x"]},
    }
    return generator, evaluate(RETRIEVAL, GOLDS, generator, **(options | kwargs))


def test_labels_metrics_and_e2e_by_hand():
    _, result = run()
    by_id = {entry["id"]: entry for entry in result.questions}
    # q1: documents alone give Paris, unknown, Lyon -> EM against "Paris": 1 0 0
    assert by_id["q1"]["labels"] == [1.0, 0.0, 0.0]
    assert by_id["q1"]["answers"] == ["Paris", "unknown", "Lyon"]
    assert by_id["q1"]["documents"] == ["d-paris", "d-none", "d-lyon"]
    # q3 has q1's text but gold "Lyon": its documents Lyon, Paris -> 1 0 (no collision with q1)
    assert by_id["q3"]["labels"] == [1.0, 0.0]
    # q2: plain strings get content-hash ids; labels 0 1
    assert by_id["q2"]["labels"] == [0.0, 1.0]
    assert all(doc.startswith("sha1:") for doc in by_id["q2"]["documents"])
    # q1 labels 1 0 0: P@2 = 1/2, Hit@2 = 1, MRR@3 = 1, NDCG@3 = 1, R@1 = 1/1, MAP@3 = 1
    assert by_id["q1"]["metrics"] == {"P@2": 0.5, "Hit@2": 1.0, "MRR@3": 1.0, "NDCG@3": 1.0, "R@1": 1.0, "MAP@3": 1.0}
    # q2 labels 0 1: MRR = 1/2, NDCG@3 = (1/log2 3) / 1, R@1 = 0/1, MAP@3 = (1/2)/1
    q2 = by_id["q2"]["metrics"]
    assert (q2["MRR@3"], q2["R@1"], q2["MAP@3"]) == (0.5, 0.0, 0.5)
    assert q2["NDCG@3"] == pytest.approx(1 / math.log2(3))
    # end to end, the last answer-bearing passage wins: q1 -> Lyon (0), q2 -> Shakespeare (1), q3 -> Paris (0)
    assert [by_id[q]["e2e"] for q in ("q1", "q2", "q3")] == [0.0, 1.0, 0.0]
    assert by_id["q1"]["e2e_answer"] == "Lyon"
    assert result.mean["MRR@3"] == pytest.approx((1 + 0.5 + 1) / 3)
    # MRR@3 = 1, 0.5, 1 against e2e = 0, 1, 0: both untied pairs discordant -> tau_b = -1, rho = -1
    assert result.correlation["MRR@3"]["kendall_tau"] == pytest.approx(-1.0)
    assert result.correlation["MRR@3"]["spearman_rho"] == pytest.approx(-1.0)
    assert result.correlation["NDCG@3"]["kendall_tau"] == pytest.approx(
        stats.kendalltau([1, 1 / math.log2(3), 1], [0, 1, 0]).statistic
    )


def test_baselines():
    _, result = run()
    containment = {entry.id: entry for entry in result.baselines["containment"].questions}
    # a gold answer inside the passage (title included), normalised, as a whole token
    assert containment["q1"].labels == [1.0, 0.0, 0.0]
    assert containment["q2"].labels == [0.0, 1.0]  # "Shakespeare" in "ANSWER: Shakespeare"
    assert containment["q3"].labels == [1.0, 0.0]
    provenance = {entry.id: entry for entry in result.baselines["provenance"].questions}
    assert provenance["q1"].labels == [1.0, 0.0, 0.0]
    assert provenance["q2"].labels == [0.0, 0.0]
    assert provenance["q3"].labels == [1.0, 0.0]  # d-lyon is gold, d-x was not retrieved
    assert provenance["q3"].e2e == 0.0
    # provenance labels are the same for q1 and q3 (1 0 ...) and e2e too; q2 has no relevant document
    assert result.baselines["provenance"].mean["Hit@2"] == pytest.approx(2 / 3)
    assert set(result.baselines["provenance"].correlation) == set(METRICS)


def test_duplicate_question_texts_are_generated_once_per_pair_and_kept_apart():
    generator, result = run()
    # 7 (question, document) pairs; (CAPITAL, PARIS) and (CAPITAL, LYON) occur twice -> 5 distinct
    cost = result.cost["erag"]
    assert (cost.requests, cost.unique, cost.generated, cost.cache_hits) == (7, 5, 5, 0)
    # reference-style rounds: a question text at most once per call; CAPITAL has 3 distinct documents
    assert cost.calls == 3
    erag_calls = generator.calls[:3]
    assert sum(len(call) for call in erag_calls) == 5
    assert erag_calls[0] == {CAPITAL: ["Paris\nParis is nice. ANSWER: Paris"], HAMLET: ["nothing at all"]}
    # end to end: 3 distinct (question, all documents) requests, CAPITAL twice -> 2 calls
    assert (result.cost["e2e"].generated, result.cost["e2e"].calls) == (3, 2)
    assert generator.calls[3][CAPITAL] == [
        "Paris\nParis is nice. ANSWER: Paris",
        "Misc\nno information here",
        "ANSWER: Lyon",
    ]


def test_reader_prompts_are_batched_across_questions():
    reader = FakeReader()
    _, result = run(reader)
    assert len(reader.calls) == 2  # one call for all eRAG prompts, one for all end-to-end prompts
    assert len(reader.calls[0]) == 5 and len(set(reader.calls[0])) == 5
    templates = PromptTemplates()
    expected = templates.answer_prompt(HAMLET, [("", "ANSWER: Shakespeare")])
    assert expected in reader.calls[0]
    assert [entry["labels"] for entry in result.questions] == [[1.0, 0.0, 0.0], [0.0, 1.0], [1.0, 0.0]]
    assert result.questions[0]["answers"][0] == "Paris"  # 'Answer: "Paris".' cleaned
    assert result.settings["generator"].startswith("reader:fake-reader|max_tokens=8|")

    reader = FakeReader()
    _, result = run(reader, batch_size=1, end_to_end=False)  # one question's documents per call
    assert [len(call) for call in reader.calls] == [3, 2]  # CAPITAL's 3 distinct documents, HAMLET's 2
    assert result.cost["erag"].calls == 2 and "e2e" not in result.cost
    assert result.questions[0]["e2e"] is None and result.correlation == {}


def test_cache_in_memory_and_on_disk(tmp_path):
    path = tmp_path / "cache.sqlite"
    generator, first = run(cache=path)
    assert len(GenerationCache(path)) == 5 + 3
    # a new cache object reading the same file: nothing is generated again, results are identical
    generator, second = run(cache=GenerationCache(path))
    assert generator.calls == []
    assert second.cost["erag"].cache_hits == 5 and second.cost["erag"].generated == 0
    assert second.questions == first.questions
    # a second "retriever" sharing documents with the first: only its new pairs are generated
    cache = GenerationCache(path)
    other = {"q1": [PARIS, "ANSWER: Marseille"], "q2": ["ANSWER: Shakespeare"]}
    generator = RecordingGenerator()
    result = evaluate(other, GOLDS, generator, questions=QUESTIONS, cache=cache, end_to_end=False)
    assert (result.cost["erag"].cache_hits, result.cost["erag"].generated) == (2, 1)
    assert generator.calls == [{CAPITAL: ["ANSWER: Marseille"]}]
    assert len(GenerationCache(path)) == 5 + 3 + 1
    # a file that is not a generation cache is an error that says what to do
    path.write_bytes(b"not a database" * 100)
    with pytest.raises(CacheError, match="not a valid eor generation cache"):
        GenerationCache(path)


def test_cache_namespaces_keep_generators_apart():
    cache = GenerationCache()
    request = Request(CAPITAL, (("", "ANSWER: Lyon"),))
    outputs, _ = generate([request], make_generator(lambda inputs: dict.fromkeys(inputs, "a")), cache)
    named, cost = generate([request], make_generator(lambda inputs: dict.fromkeys(inputs, "b"), namespace="b"), cache)
    assert (outputs, named, cost.generated) == (["a"], ["b"], 1)


def test_one_path_a_reader_without_identity_is_not_cached():
    cache = GenerationCache()
    reader = FakeReader()  # no `identity`: the generation stage's rule, for eRAG as for the ensemble
    _, first = run(reader, cache=cache)
    _, again = run(reader, cache=cache)
    assert isinstance(first.cost["erag"], GenerationStats) and len(cache) == 0
    assert (again.cost["erag"].generated, again.cost["erag"].cache_hits) == (5, 0)  # generated again
    assert (again.cost["e2e"].generated, again.cost["e2e"].cache_hits) == (3, 0)
    assert len(reader.calls) == 4 and again.questions == first.questions


def test_one_path_a_reader_with_identity_is_cached_under_the_stages_key():
    cache = GenerationCache()
    reader = IdentifiedReader()
    _, first = run(reader, cache=cache)
    assert (first.cost["erag"].generated, first.cost["e2e"].generated) == (5, 3) and len(cache) == 8
    _, again = run(reader, cache=cache)
    for phase, unique in (("erag", 5), ("e2e", 3)):
        assert (again.cost[phase].unique, again.cost[phase].cache_hits, again.cost[phase].generated) == (
            unique,
            unique,
            0,
        )
        assert again.cost[phase].calls == 0
    assert len(reader.calls) == 2 and again.questions == first.questions
    # The key is the one eRAG always used (reader identity, prompt, the reader's default max_tokens), so cache
    # files written before eRAG went through the stage are still read; the output is stored uncleaned.
    prompt = PromptTemplates().answer_prompt(HAMLET, [("", "ANSWER: Shakespeare")])
    stored = cache.get(generation_key("fake-reader:v1", prompt, {"max_tokens": 8}))
    assert stored is not None and stored.text == "Answer: Shakespeare."
    assert GenerationStage(reader, cache).key(prompt) == stored.key
    _, four = run(reader, cache=cache, max_tokens=4)  # another max_tokens is another key
    assert four.cost["erag"].generated == 5
    assert cache.get(generation_key("fake-reader:v1", prompt, {"max_tokens": 4})) is not None


def test_erag_reads_back_what_the_ensembles_generation_stage_cached():
    cache = GenerationCache()
    reader = IdentifiedReader()
    prompt = PromptTemplates().answer_prompt(HAMLET, [("", "ANSWER: Shakespeare")])
    # what Ensemble.answer_batch does with a member's prompt: its stage, max_tokens left to the reader
    GenerationStage(reader, cache).complete([prompt], confidence=True)
    assert reader.calls == [[prompt]]
    result = evaluate({"q2": ["ANSWER: Shakespeare"]}, GOLDS, reader, questions=QUESTIONS, cache=cache)
    cost = result.cost["erag"]
    assert (cost.requests, cost.cache_hits, cost.generated, cost.calls) == (1, 1, 0, 0)
    assert result.cost["e2e"].cache_hits == 1  # one document: the end-to-end prompt is the same
    assert len(reader.calls) == 1 and result.questions[0]["answers"] == ["Shakespeare"]  # cleaned when read


def test_a_generation_stage_is_used_as_it_is():
    cache = GenerationCache()
    stage = GenerationStage(IdentifiedReader(), cache)
    _, result = run(stage, cache=cache)  # e.g. the stage `eor erag` built for PK and @CP
    assert stage.stats.generated == 5 + 3 and len(cache) == 8
    assert result.settings["generator"].startswith("reader:fake-reader|max_tokens=8|")  # named as the reader
    _, again = run(stage)  # its own cache
    assert again.cost["erag"].cache_hits == 5 and stage.stats.generated == 8
    with pytest.raises(InputError, match="its own cache"):
        run(stage, cache=GenerationCache())


def test_json_output_and_reference_shape():
    _, result = run(downstream_metric="f1")
    document = json.loads(json.dumps(result.to_dict()))  # no NaN anywhere
    assert set(document) == {"questions", "mean", "correlation", "baselines", "cost", "settings"}
    assert set(document["questions"][0]) >= {"id", "documents", "labels", "metrics", "e2e"}
    assert set(document["baselines"]["provenance"]) == {"questions", "mean", "correlation"}
    # graded labels from token F1: q2's answer "Shakespeare" against "William Shakespeare" and "Shakespeare"
    assert document["questions"][1]["labels"] == [0.0, 1.0]
    reference = result.to_reference()
    assert reference["per_input"]["q3"]["P@2"] == 0.5 and reference["aggregated"] == result.mean


def test_constant_e2e_gives_null_correlations():
    result = evaluate({"a": ["ANSWER: x"], "b": ["ANSWER: y"]}, {"a": ["x"], "b": ["z"]}, RecordingGenerator())
    assert [entry["e2e"] for entry in result.questions] == [1.0, 0.0]
    same = evaluate({"a": ["ANSWER: x"], "b": ["ANSWER: x"]}, {"a": ["z"], "b": ["z"]}, RecordingGenerator())
    assert json.loads(json.dumps(same.to_dict()))["correlation"]["P"] == {
        "kendall_tau": None,
        "spearman_rho": None,
        "n": 2,
    }
    # default metrics without k: the whole list
    assert list(result.mean) == ["P", "R", "MAP", "MRR", "NDCG", "Hit"]


def test_k_truncates_and_names_default_metrics():
    _, result = run(retrieval_metrics=None, k=1)
    assert [len(entry["documents"]) for entry in result.questions] == [1, 1, 1]
    assert list(result.mean) == ["P@1", "R@1", "MAP@1", "MRR@1", "NDCG@1", "Hit@1"]


def test_documents_of_every_shape():
    class Document:  # LangChain-style
        page_content = "text"
        metadata = {"id": "w1", "title": "T"}

    assert as_passage(Document()) == as_passage({"id": "w1", "title": "T", "page_content": "text"})
    assert as_passage({"text": "x"}).id == as_passage("x").id
    assert as_passage({"text": "x", "title": "t"}).id != as_passage("x").id
    with pytest.raises(InputError):
        as_passage(3)
    with pytest.raises(InputError):
        as_passage({"id": "no text"})


def test_input_errors():
    generator = RecordingGenerator()
    with pytest.raises(InputError, match="no expected outputs"):
        evaluate({"q1": ["a"]}, {}, generator)
    with pytest.raises(InputError, match="unknown retrieval metric"):
        evaluate({"q1": ["a"]}, {"q1": ["a"]}, generator, retrieval_metrics=["BLEU@3"])
    with pytest.raises(InputError, match="unknown downstream metric"):
        evaluate({"q1": ["a"]}, {"q1": ["a"]}, generator, "rouge")
    with pytest.raises(InputError, match="no provenance"):
        evaluate({"q1": ["a"]}, {"q1": ["a"]}, generator, provenance={})
    with pytest.raises(InputError, match="no question text"):
        evaluate({"q1": ["a"]}, {"q1": ["a"]}, generator, questions={})
    with pytest.raises(InputError, match="outside"):  # downstream scores are labels in [0, 1]
        evaluate({"q1": ["a"]}, {"q1": ["a"]}, generator, lambda prediction, golds: 2.0)
    with pytest.raises(ReaderError, match="no output"):
        evaluate({"q1": ["a"]}, {"q1": ["a"]}, lambda inputs: {})
    with pytest.raises(InputError):
        evaluate({"q1": ["a"]}, {"q1": ["a"]}, object())


@pytest.fixture(scope="module")
def smollm2_one_thread():
    """SmolLM2-135M through llama.cpp on one thread: steadier than all cores on a shared, busy machine."""
    from eor.core.models import resolve_model
    from eor.readers.llamacpp import LlamaCppReader

    return LlamaCppReader(resolve_model("smollm2-135m"), name="smollm2-135m", context_tokens=2048, threads=1)


class CountingReader:
    """Wraps a real reader (and its identity, so that it is cached), counting generate calls and prompts."""

    def __init__(self, reader) -> None:
        self.reader = reader
        self.name = reader.name
        self.identity = reader.identity
        self.default_max_tokens = 8
        self.prompts: list[list[str]] = []

    def generate(self, prompts: list[str], max_tokens: int | None = None) -> list[str]:
        self.prompts.append(list(prompts))
        return self.reader.generate(prompts, max_tokens=max_tokens)


def test_real_smollm2_reader_batches_and_caches(smollm2_one_thread):
    reader = CountingReader(smollm2_one_thread)
    eiffel = {"id": "p1", "title": "Eiffel Tower", "text": "The Eiffel Tower is in Paris."}
    thames = {"id": "p2", "title": "Thames", "text": "The Thames flows through London."}
    retrieval = {"a": [eiffel, thames], "b": [thames], "c": [eiffel, thames]}
    questions = {"a": "Where is the Eiffel Tower?", "b": "Which river flows through London?"}
    questions["c"] = questions["a"]  # same text as "a": identical pairs
    golds = {"a": ["Paris"], "b": ["Thames"], "c": ["Paris"]}
    cache = GenerationCache()
    options = {"questions": questions, "cache": cache, "max_tokens": 4}
    result = evaluate(retrieval, golds, reader, "contains", ["P@2", "NDCG@2"], **options)
    # eRAG: 5 pairs, 3 distinct, in one reader call; end to end: 3 lists, 2 distinct, of which (b, [thames])
    # is the eRAG pair already generated: one prompt in one more call
    assert [len(call) for call in reader.prompts] == [3, 1]
    assert (result.cost["erag"].requests, result.cost["erag"].generated) == (5, 3)
    assert (result.cost["e2e"].unique, result.cost["e2e"].cache_hits, result.cost["e2e"].generated) == (2, 1, 1)
    assert result.questions[0]["answers"] == result.questions[2]["answers"]
    assert result.questions[1]["e2e_answer"] == result.questions[1]["answers"][0]
    assert all(label in (0.0, 1.0) for entry in result.questions for label in entry["labels"])
    again = evaluate(retrieval, golds, reader, "contains", ["P@2", "NDCG@2"], **options)
    assert len(reader.prompts) == 2 and again.cost["erag"].cache_hits == 3
    assert again.questions == result.questions
