"""Context utility (the relevance-propagation paper, section 3) and its correlation with nDCG@k.

Definitions of the paper, implemented as written:

- performance of an answer (eq. 1): P(a_q) = max_{r ∈ R_q} σ(a_q, r), the best similarity between the
  generated answer and a reference of the question. The paper takes R_q = the texts of the assessed
  relevant documents and σ = BERTScore F1; here `references` are whatever texts the caller passes (the
  gold passages' texts for the paper's setting, or gold answers) and `similarity` defaults to `bertscore`
  (voters' BERTScore F1 with the packaged MiniLM), any name of the voters similarity registry (`f1`,
  `em`, `cosine`, `nli`, ...), an object with `score_pairs`, or a callable `(answer, reference) -> float`.
  P is a score of the generated text, not a token probability, so no likelihood from the reader is needed:
  the ordinary greedy `Reader` protocol suffices.
- utility (eq. 2): U = (P(A(q; θ(q)_k)) − P(A(q; ∅))) / P(A(q; ∅)), the relative change over the 0-shot
  answer (the retrieval-free prompt). The paper does not say what happens when P(0-shot) = 0 (with
  BERTScore it practically never is); here U is then undefined: NaN (None in JSON), counted in `undefined`
  and left out of means and correlations. Passing `epsilon` divides by max(P(0-shot), epsilon) instead.
- contexts: the top-k documents for k in `ks` (default 1, 2, 5, 10), in retrieval order (`ordered`, the
  top document is "Context 1") and reversed (`reversed`, the paper's BM25-r); with `oracle` contexts
  (e.g. the gold passages) a third setting `oracle`, the first k of them (all when fewer than k; the paper
  samples k at random). A list shorter than k gives the context of all its documents.
- relevance (eq. 3): nDCG@k of the retrieved list (retrieval order, the same value for `ordered` and
  `reversed`: reversing changes the prompt, not the retrieval) with provenance labels (1 when a document's
  id is one of the question's `relevant` ids) and the ideal ranking of all relevant ids, as in IR
  evaluation with qrels; correlated with U across questions by Pearson's r.

The paper averages over 5 sampled generations; eor readers are greedy, so one generation is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eor.core.errors import InputError
from eor.core.json_ready import json_ready
from eor.core.prompts import PromptTemplates
from eor.evaluation.erag.correlation import correlate
from eor.evaluation.erag.evaluate import Passage, as_passage
from eor.evaluation.erag.generators import Generator, Progress, Request, as_cache, generate, make_generator
from eor.evaluation.erag.metrics import MetricSpec
from eor.pipeline.stages.generation import GenerationStats
from eor.runs.generation_cache import GenerationCache

DEFAULT_KS = (1, 2, 5, 10)
ORDERS = ("ordered", "reversed")
Similarity = str | Callable[[str, str], float] | Any


def utility(p_context: float, p_zero_shot: float, epsilon: float | None = None) -> float:
    """(P(context) − P(0-shot)) / P(0-shot); NaN when P(0-shot) is 0 (or NaN) and no `epsilon` is given."""
    if math.isnan(p_context) or math.isnan(p_zero_shot):
        return math.nan
    denominator = p_zero_shot if epsilon is None else max(p_zero_shot, epsilon)
    if denominator <= 0:
        return math.nan
    return (p_context - p_zero_shot) / denominator


def pair_scorer(similarity: Similarity) -> Callable[[Sequence[tuple[str, str]]], list[float]]:
    """A batch scorer of (answer, reference) pairs from a registry name, a metric object or a callable."""
    if isinstance(similarity, str):
        from voters.similarity import build_metric

        similarity = build_metric(similarity)
    if hasattr(similarity, "score_pairs") and callable(similarity.score_pairs):
        metric = similarity
        return lambda pairs: [float(value) for value in metric.score_pairs(list(pairs))] if pairs else []
    if callable(similarity):
        function = similarity
        return lambda pairs: [float(function(answer, reference)) for answer, reference in pairs]
    raise InputError("similarity must be a metric name, an object with score_pairs, or a callable")


def performance_scores(
    answers: Sequence[tuple[str, str]],
    references: Mapping[str, Sequence[str]],
    similarity: Similarity,
) -> dict[tuple[str, str], float]:
    """P for each distinct (question id, answer): the max similarity over the id's references (NaN if none)."""
    unique = list(dict.fromkeys(answers))
    pairs = [(answer, reference) for qid, answer in unique for reference in references[qid]]
    scores = iter(pair_scorer(similarity)(pairs))
    result = {}
    for qid, answer in unique:
        values = [next(scores) for _ in references[qid]]
        result[(qid, answer)] = max(values) if values else math.nan
    return result


@dataclass
class UtilityResult:
    """Per question the 0-shot answer and, per setting and k, the context's answer, P, U and nDCG@k;
    means, Pearson's r between nDCG@k and U, and the generation cost."""

    questions: list[dict[str, Any]]
    mean: dict[str, dict[int, dict[str, float]]]
    correlation: dict[str, dict[int, dict[str, float]]]
    cost: GenerationStats
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN -> None; k keys as strings)."""

        def by_k(table: Mapping[str, Mapping[int, Any]]) -> dict[str, dict[str, Any]]:
            return {setting: {str(k): value for k, value in rows.items()} for setting, rows in table.items()}

        questions = [{**entry, "contexts": by_k(entry["contexts"])} for entry in self.questions]
        return json_ready(
            {
                "questions": questions,
                "mean": by_k(self.mean),
                "correlation": by_k(self.correlation),
                "cost": self.cost.to_dict(),
                "settings": self.settings,
            }
        )


def _contexts(
    passages: Sequence[Passage], oracle: Sequence[Passage] | None, ks: Sequence[int], orders: Sequence[str]
) -> dict[str, dict[int, list[Passage]]]:
    contexts: dict[str, dict[int, list[Passage]]] = {}
    for order in orders:
        contexts[order] = {k: list(passages[:k]) if order == "ordered" else list(passages[:k])[::-1] for k in ks}
    if oracle is not None:
        contexts["oracle"] = {k: list(oracle[:k]) for k in ks}
    return contexts


def evaluate_utility(
    retrieval_results: Mapping[str, Sequence[Any]],
    references: Mapping[str, Sequence[str] | str],
    text_generator: Any,
    *,
    questions: Mapping[str, str] | None = None,
    similarity: Similarity = "bertscore",
    ks: Iterable[int] = DEFAULT_KS,
    orders: Iterable[str] = ORDERS,
    relevant: Mapping[str, Iterable[str]] | None = None,
    oracle: Mapping[str, Sequence[Any]] | None = None,
    epsilon: float | None = None,
    cache: GenerationCache | str | Path | None = None,
    templates: PromptTemplates | None = None,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    namespace: str | None = None,
    progress: Progress | None = None,
) -> UtilityResult:
    """Utility of the top-k contexts per question and its Pearson correlation with nDCG@k.

    retrieval_results: question id -> ranked documents (as for `eor.evaluation.erag.evaluate.evaluate`).
    references: question id -> the texts R_q that answers are compared with (a bare string is one).
    relevant: question id -> relevant (gold passage) ids; needed for nDCG@k and the correlation.
    oracle: question id -> oracle documents (e.g. the gold passages), giving the `oracle` setting.
    The generator, cache and prompt arguments are those of `evaluate` (and so is the rule: every prompt goes
    through the generation stage, and a reader without an identity is not cached); all prompts of the run,
    0-shot included, are de-duplicated and generated in as few calls as the generator allows; `cost` is what
    the stage did (`GenerationStats`); `progress` is `evaluate`'s.
    """
    ks, orders, ids = _check_utility_inputs(retrieval_results, references, questions, relevant, ks, orders)
    texts = {qid: str(qid if questions is None else questions[qid]) for qid in ids}
    refs = {qid: [ref] if isinstance(ref := references[qid], str) else list(ref) for qid in ids}
    passages = {qid: [as_passage(doc) for doc in retrieval_results[qid]] for qid in ids}
    oracles = None if oracle is None else {qid: [as_passage(doc) for doc in oracle.get(qid, [])] for qid in ids}
    contexts = {qid: _contexts(passages[qid], None if oracles is None else oracles[qid], ks, orders) for qid in ids}
    generator = make_generator(
        text_generator, templates=templates, max_tokens=max_tokens, batch_size=batch_size, namespace=namespace
    )
    slots, requests = _context_requests(ids, texts, contexts)
    outputs, cost = generate(requests, generator, as_cache(cache), progress=progress, label="utility contexts")
    answer = dict(zip(slots, outputs, strict=True))
    performance = performance_scores([(qid, text) for (qid, _, _), text in answer.items()], refs, similarity)
    settings = list(contexts[ids[0]]) if ids else []
    result_questions = []
    for qid in ids:
        ranked = {s: oracles[qid] if s == "oracle" and oracles is not None else passages[qid] for s in settings}
        gold_ids = None if relevant is None else {str(pid) for pid in relevant[qid]}
        result_questions.append(
            _question_entry(qid, texts[qid], answer, performance, contexts[qid], ranked, gold_ids, ks, epsilon)
        )
    mean, correlation = _means_and_correlations(result_questions, settings, ks, relevant is not None)
    run_settings = _run_settings(generator, similarity, ks, settings, epsilon, result_questions)
    return UtilityResult(result_questions, mean, correlation, cost, run_settings)


def _run_settings(
    generator: Generator,
    similarity: Similarity,
    ks: list[int],
    settings: list[str],
    epsilon: float | None,
    entries: list[dict[str, Any]],
) -> dict[str, Any]:
    """What a result was computed with, and the questions' mean 0-shot P."""
    return {
        "generator": generator.namespace,
        "similarity": similarity if isinstance(similarity, str) else type(similarity).__name__,
        "ks": ks,
        "settings": settings,
        "epsilon": epsilon,
        "questions": len(entries),
        "zero_shot_p": _mean(entry["zero_shot"]["p"] for entry in entries),
    }


def _check_utility_inputs(
    retrieval_results: Mapping[str, Sequence[Any]],
    references: Mapping[str, Any],
    questions: Mapping[str, str] | None,
    relevant: Mapping[str, Iterable[str]] | None,
    ks: Iterable[int],
    orders: Iterable[str],
) -> tuple[list[int], list[str], list[str]]:
    """The sorted cutoffs, the orders and the question ids; InputError for anything missing or unknown."""
    ks = sorted(set(ks))
    orders = list(dict.fromkeys(orders))
    if not ks or ks[0] < 1:
        raise InputError("ks must be positive cutoffs")
    unknown = [order for order in orders if order not in ORDERS]
    if unknown:
        raise InputError(f"unknown context order {unknown[0]!r}; known: {', '.join(ORDERS)}")
    ids = list(retrieval_results)
    if not ids:
        raise InputError("no retrieval results to evaluate")
    for name, mapping in (("references", references), ("questions", questions), ("relevant", relevant)):
        if mapping is not None:
            missing = [qid for qid in ids if qid not in mapping]
            if missing:
                raise InputError(f"no {name} for {len(missing)} question(s), e.g. {missing[0]!r}")
    return ks, orders, ids


Slot = tuple[str, str | None, int | None]  # (question id, setting or None for 0-shot, k)


def _context_requests(
    ids: list[str], texts: dict[str, str], contexts: dict[str, dict[str, dict[int, list[Passage]]]]
) -> tuple[list[Slot], list[Request]]:
    """Every prompt of the run: per question its 0-shot prompt, then one per setting and k."""
    slots: list[Slot] = []
    requests = []
    for qid in ids:
        slots.append((qid, None, None))
        requests.append(Request(texts[qid], ()))
        for setting, rows in contexts[qid].items():
            for k, context in rows.items():
                slots.append((qid, setting, k))
                requests.append(Request(texts[qid], tuple((p.title, p.text) for p in context)))
    return slots, requests


def _question_entry(
    qid: str,
    text: str,
    answer: dict[Slot, str],
    performance: dict[tuple[str, str], float],
    contexts: dict[str, dict[int, list[Passage]]],
    ranked: dict[str, list[Passage]],
    gold_ids: set[str] | None,
    ks: list[int],
    epsilon: float | None,
) -> dict[str, Any]:
    """One question: its 0-shot answer and P, and per setting and k the context's answer, P, U and nDCG."""
    p_zero = performance[(qid, answer[(qid, None, None)])]
    entry: dict[str, Any] = {
        "id": qid,
        "question": text,
        "zero_shot": {"answer": answer[(qid, None, None)], "p": p_zero},
        "contexts": {},
    }
    for setting in contexts:
        entry["contexts"][setting] = {}
        for k in ks:
            output = answer[(qid, setting, k)]
            p = performance[(qid, output)]
            entry["contexts"][setting][k] = {
                "documents": [passage.id for passage in contexts[setting][k]],
                "answer": output,
                "p": p,
                "utility": utility(p, p_zero, epsilon),
                "ndcg": math.nan if gold_ids is None else _ndcg(ranked[setting], gold_ids, k),
            }
    return entry


def _means_and_correlations(
    entries: list[dict[str, Any]], settings: list[str], ks: list[int], correlate_ndcg: bool
) -> tuple[dict[str, dict[int, dict[str, float]]], dict[str, dict[int, dict[str, float]]]]:
    """Per setting and k: mean U, P and nDCG (and how many U are undefined), and Pearson's r(nDCG, U)."""
    mean: dict[str, dict[int, dict[str, float]]] = {}
    correlation: dict[str, dict[int, dict[str, float]]] = {}
    for setting in settings:
        mean[setting], correlation[setting] = {}, {}
        for k in ks:
            rows = [entry["contexts"][setting][k] for entry in entries]
            utilities = [row["utility"] for row in rows]
            mean[setting][k] = {
                "utility": _mean(utilities),
                "p": _mean(row["p"] for row in rows),
                "ndcg": _mean(row["ndcg"] for row in rows),
                "undefined": sum(math.isnan(value) for value in utilities),
            }
            if correlate_ndcg:
                correlation[setting][k] = correlate([row["ndcg"] for row in rows], utilities, ["pearson_r"])
    return mean, correlation


def _ndcg(ranked: Sequence[Passage], gold_ids: set[str], k: int) -> float:
    labels = [float(passage.id in gold_ids) for passage in ranked]
    return MetricSpec("NDCG", k)(labels, judged=[1.0] * len(gold_ids))


def _mean(values: Iterable[float]) -> float:
    finite = [value for value in values if not math.isnan(value)]
    return sum(finite) / len(finite) if finite else math.nan
