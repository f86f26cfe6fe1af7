"""`eor erag` and `eor utility`: one member of a config, evaluated document by document over a question file.

Both commands build the member's retriever and the config's reader exactly as the ensemble does (same sources, same
prompt templates), retrieve the top k for every question, and hand the lists to the library
(`eor.evaluation.erag.evaluate`, `eor.evaluation.erag.utility`). Every generation goes through eor's one generation
cache (the SQLite file that `eor run`, `ask` and `serve` share; `--cache FILE` names another), so an interrupted run
resumes where it stopped, a re-run with other cutoffs only generates what is new, and prompts that `eor run` already
generated with the same reader are read back. Every generation, PK's and @CP's during retrieval and the labels' and
end-to-end answers after it, goes through one generation stage (eor.pipeline.stages.generation) over the config's
reader, built here once. With `--no-cache` the cache lives in memory for the run only. Outputs
(eor.evaluation.writing.writer): JSON (the full result), Markdown (tables), a PNG figure and an HTML page;
eor.commands.erag_summary prints what they hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eor.commands.erag_summary import write_erag, write_utility
from eor.core.config import EnsembleConfig
from eor.core.correctness import CORRECTNESS
from eor.core.data import Question, load_questions
from eor.core.errors import InputError
from eor.core.prompts import templates_for
from eor.evaluation.erag.correlation import correlate
from eor.evaluation.erag.evaluate import as_passage, evaluate, get_downstream_metric
from eor.evaluation.erag.generators import Request, generate, make_generator
from eor.evaluation.erag.metrics import MetricSpec, parse_metric, score
from eor.evaluation.erag.time_and_memory import measure_costs
from eor.evaluation.erag.utility import evaluate_utility
from eor.pipeline.executor import LOCAL
from eor.pipeline.jobs import Executor, batches
from eor.pipeline.members import member_templates, source_pool
from eor.pipeline.stages.generation import GenerationStage
from eor.pipeline.stages.retrieval import RetrievalStage
from eor.pipeline.validation import check_member, load_valid_config
from eor.runs.generation_cache import CacheSetting, GenerationCache, open_cache_or_memory
from eor.runs.run_folder import RunFolder
from retrievers.corpus import load_corpus
from voters.similarity import build_metric

DEFAULT_CUTOFFS = (1, 2, 3, 5, 10)


@dataclass
class Setup:
    """What both commands need: the config, the questions, the reader, the templates, the ranked lists, the
    cache and the generation stage over the reader and that cache (what every generation goes through)."""

    config: EnsembleConfig
    questions: list[Question]
    reader: Any
    templates: Any
    documents: dict[str, list[Any]]  # question id -> ranked LangChain Documents, at most `depth`
    cache: Any  # the GenerationCache of the run (the shared file, or in memory with --no-cache)
    stage: Any  # the GenerationStage of `reader` over `cache`: PK and @CP used it, eRAG and utility use it


def parse_ints(text: str, option: str) -> list[int]:
    """`1,2,5,10` -> [1, 2, 5, 10] (sorted, unique); anything else raises a one-line InputError."""
    message = f"{option} must be positive integers separated by commas, e.g. 1,2,5,10; got {text!r}"
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise InputError(message) from None
    if not values or values[0] < 1:
        raise InputError(message)
    return values


def valid_config(config_path: Path, member: str) -> EnsembleConfig:
    """Both commands' door: the config validated (eor.pipeline.validation) and `--member` checked as its own
    members are, before any model loads."""
    config = load_valid_config(config_path)
    check_member(config, member, "--member")
    return config


def prepare(
    config: EnsembleConfig,
    data: Path,
    member: str,
    depth: int,
    limit: int | None,
    progress: Any,
    cache: CacheSetting = True,
    executor: Executor = LOCAL,
) -> Setup:
    """Load the questions, open the generation cache, build reader and retriever over `config` (`valid_config`'s),
    retrieve `depth` per question (PK and @CP generate through the cache, as in the ensemble). The reader
    is built here, or on Ray's reader workers (`executor`, eor.pipeline.executor)."""

    questions = load_questions(data, limit=limit)
    unanswered = [q.id for q in questions if not q.answers]
    if unanswered:
        raise InputError(f"{data}: question {unanswered[0]!r} has no 'answers'; document labels need gold answers")
    store = open_cache_or_memory(cache)
    # the ensemble's prompts: PK and @CP generate with the config's, and eRAG labels with the member's own answer
    # prompt (its prompt variant's when its name ends with one, eor.pipeline.members.member_templates)
    templates = member_templates(config, [member])[member]
    reader = executor.reader(config.reader)
    stage = GenerationStage(reader, store)
    pool = source_pool(config, stage, templates=templates_for(config), depth=max(config.retrieval_depth, depth))
    retrieval = RetrievalStage({member: pool.build(member)})  # the ensemble's retrieval stage
    documents: dict[str, list[Any]] = {}
    bar = progress("retrieval", len(questions))
    try:
        for batch in batches(questions, config.batch_size):  # the one batching loop
            found = retrieval.retrieve(
                member, [q.question for q in batch], strict=True, withheld=[q.withheld for q in batch]
            )
            for question, docs in zip(batch, found, strict=True):
                assert not isinstance(docs, Exception)  # strict: a failure raises
                documents[question.id] = docs[:depth]
            bar.update(len(batch))
    finally:
        bar.close()
    return Setup(config, questions, reader, templates, documents, store, stage)


def tqdm_progress(label: str, total: int) -> Any:
    from tqdm.auto import tqdm

    return tqdm(desc=label, total=total, unit="prompt" if label not in ("retrieval",) else "q", leave=True)


def gold_passages(questions: Sequence[Question]) -> dict[str, list[str]] | None:
    """Provenance ids per question when every question has a `gold_passages` list, else None."""
    gold = {}
    for question in questions:
        ids = question.extra.get("gold_passages")
        if not isinstance(ids, list):
            return None
        gold[question.id] = [str(pid) for pid in ids]
    return gold


def _save_config(out: Path, setup: Setup) -> None:
    RunFolder(out).write_config(setup.config.to_dict())


# --- eor erag ---------------------------------------------------------------------------------------


def run_erag(
    config_path: Path,
    data: Path,
    member: str,
    out: Path,
    *,
    k: int = 10,
    metric: str = "em",
    limit: int | None = None,
    cutoffs: Sequence[int] | None = None,
    cost_questions: int = 10,
    batch_size: int | None = None,
    cache: CacheSetting = True,
    progress: Any = tqdm_progress,
    executor: Executor = LOCAL,
) -> str:
    """Run eRAG for one member; writes erag.json, erag.md, erag.html, erag.png; returns a short text summary.
    `cache`: the generation cache (eor.runs.generation_cache): True, the shared default file; a file path; False or
    None, in memory for this run only. `batch_size`: questions per reader call (default: the config's)."""

    chosen = _check_erag_options(k, metric, cutoffs, cost_questions, batch_size)
    setup = prepare(valid_config(config_path, member), data, member, k, limit, progress, cache, executor)
    out.mkdir(parents=True, exist_ok=True)
    _save_config(out, setup)
    questions = setup.questions
    generator = make_generator(setup.stage, templates=setup.templates, batch_size=batch_size or setup.config.batch_size)
    prefill = _generate_in_prefix_order(setup, generator, setup.cache, k, chosen, progress)
    result = evaluate(
        {q.id: setup.documents[q.id] for q in questions},
        {q.id: q.answers for q in questions},
        generator,
        metric,
        questions={q.id: q.question for q in questions},
        k=k,
        provenance=gold_passages(questions),
        cache=setup.cache,
        progress=progress,
    )
    data_out = result.to_dict()
    data_out["by_cutoff"] = _by_cutoff(result, setup, generator, setup.cache, chosen, metric, progress)
    data_out["cost"] = {
        "evaluation": {"one_pass": prefill.to_dict()} | {name: value.to_dict() for name, value in result.cost.items()},
        **({"measured": _measure_cost(setup, generator, k, cost_questions, progress)} if cost_questions else {}),
    }
    answers = {q.id: q.answers for q in questions}
    for entry in data_out["questions"]:
        entry["gold_answers"] = answers[entry["id"]]
    data_out["settings"].update(
        config=str(config_path),
        data=str(data),
        member=member,
        limit=limit,
        reader=setup.config.reader.model,
        cache=_cache_setting(setup.cache),
        cutoffs=chosen,
        baselines=list(result.baselines),
        provenance=None if "provenance" in result.baselines else "skipped: not every question has 'gold_passages'",
    )
    return write_erag(out, data_out)


def _check_erag_options(
    k: int, metric: str, cutoffs: Sequence[int] | None, cost_questions: int, batch_size: int | None
) -> list[int]:
    """One-line InputErrors for bad options, before any model loads; the cutoffs of the figure."""

    if k < 1:
        raise InputError(f"--k must be at least 1, got {k}")
    if metric not in CORRECTNESS:
        raise InputError(f"unknown --metric {metric!r}; known: {', '.join(CORRECTNESS)}")
    if cost_questions < 0:
        raise InputError(f"--cost-questions must be 0 (off) or more, got {cost_questions}")
    if batch_size is not None and batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    if cutoffs is not None and any(c > k for c in cutoffs):
        raise InputError(f"--cutoffs must not exceed --k {k}; got {', '.join(map(str, cutoffs))}")
    return sorted({c for c in (cutoffs or DEFAULT_CUTOFFS) if c <= k} | {k})


def _requests(setup: Setup, question: Question, count: int) -> Any:
    passages = [as_passage(doc) for doc in setup.documents[question.id][:count]]
    return Request(question.question, tuple((p.title, p.text) for p in passages))


def _generate_in_prefix_order(
    setup: Setup, generator: Any, cache: Any, k: int, cutoffs: Sequence[int], progress: Any
) -> Any:
    """Generate every prompt of the run once, ahead of `evaluate` (which then reads them from the cache), so
    that a reader with a prefix cache (e.g. an OpenAI-compatible server) can reuse prompts: per question, the
    first document alone, then the end-to-end prompts with the top 2, 3, ... documents (each extends the
    previous one's prefix), then the other documents alone; the generation stage sorts each reader call, which
    keeps prompts that share a prefix back to back. Returns what the stage did (GenerationStats)."""

    requests = []
    for question in setup.questions:
        passages = [as_passage(doc) for doc in setup.documents[question.id][:k]]
        singles = [Request(question.question, ((p.title, p.text),)) for p in passages]
        sizes = sorted({min(c, len(passages)) for c in (*cutoffs, k)})
        chain = [_requests(setup, question, c) for c in sizes if c > 1]
        requests += singles[:1] + chain + singles[1:]
    _, cost = generate(requests, generator, cache, progress=progress, label="reader (eRAG + end-to-end)")
    return cost


def _by_cutoff(
    result: Any, setup: Setup, generator: Any, cache: Any, cutoffs: Sequence[int], metric: str, progress: Any
) -> dict[str, Any]:
    """Figure 1 of the eRAG paper: per cutoff c, each labelling's metrics@c (the first c labels of the same
    lists) against the end-to-end score with the top c documents (one more reader call per question and c;
    c = 1 is the first document's eRAG generation, a cache hit)."""

    questions = setup.questions
    k = result.settings["k"]
    bases = list(dict.fromkeys(parse_metric(name).base for name in result.settings["retrieval_metrics"]))
    downstream = get_downstream_metric(metric)
    labellings = {"erag": {entry["id"]: entry["labels"] for entry in result.questions}}
    for name, labelling in result.baselines.items():
        labellings[name] = {entry.id: entry.labels for entry in labelling.questions}
    e2e_full = {entry["id"]: entry["e2e"] for entry in result.questions}

    table: dict[str, Any] = {"cutoffs": list(cutoffs), "e2e_mean": {}, "correlation": {name: {} for name in labellings}}
    for c in cutoffs:
        if c == k:
            e2e = e2e_full
        else:
            requests = [_requests(setup, q, c) for q in questions]
            outputs, _ = generate(requests, generator, cache, progress=progress, label=f"end-to-end@{c}")
            e2e = {q.id: downstream(output, q.answers) for q, output in zip(questions, outputs, strict=True)}
        target = [e2e[q.id] for q in questions]
        table["e2e_mean"][str(c)] = sum(target) / len(target)
        for name, labels in labellings.items():
            values = {q.id: score(labels[q.id][:c], [MetricSpec(base, c) for base in bases]) for q in questions}
            for base in bases:
                column = [values[q.id][f"{base}@{c}"] for q in questions]
                table["correlation"][name].setdefault(base, {})[str(c)] = correlate(column, target)
    return table


def _measure_cost(setup: Setup, generator: Any, k: int, count: int, progress: Any) -> dict[str, Any]:
    e2e_prompts, erag_prompts = [], []
    for q in setup.questions[:count]:
        passages = [as_passage(doc) for doc in setup.documents[q.id][:k]]
        pairs = [(p.title, p.text) for p in passages]
        e2e_prompts.append(generator.prompt(Request(q.question, tuple(pairs))))
        erag_prompts.append([generator.prompt(Request(q.question, (pair,))) for pair in pairs])
    return measure_costs(
        setup.config.reader,
        e2e_prompts,
        erag_prompts,
        reader=setup.reader,
        max_tokens=setup.config.reader.max_tokens,
        progress=progress,
    )


# --- eor utility ------------------------------------------------------------------------------------


def run_utility(
    config_path: Path,
    data: Path,
    member: str,
    out: Path,
    *,
    ks: Sequence[int] = (1, 2, 5, 10),
    similarity: str = "bertscore",
    references: str = "answers",
    limit: int | None = None,
    epsilon: float | None = None,
    batch_size: int | None = None,
    cache: CacheSetting = True,
    progress: Any = tqdm_progress,
    executor: Executor = LOCAL,
) -> str:
    """Context utility of one member's top-k contexts (ordered, reversed, oracle) and Pearson's r with nDCG@k;
    writes utility.json, utility.md, utility.html, utility.png; returns a short text summary. `cache` as for
    `run_erag`: the ordered contexts are the end-to-end prompts of `eor erag` at the same cutoffs, so with the
    shared cache they are free after an `eor erag` run."""

    ks = _check_utility_options(ks, references, batch_size, epsilon)
    config = valid_config(config_path, member)  # before the reader loads
    similarity_metric = _similarity(similarity)
    setup = prepare(config, data, member, ks[-1], limit, progress, cache, executor)
    out.mkdir(parents=True, exist_ok=True)
    _save_config(out, setup)
    questions = setup.questions
    relevant = gold_passages(questions)
    refs, oracle = _references(setup, relevant, references)
    result = evaluate_utility(
        {q.id: setup.documents[q.id] for q in questions},
        refs,
        make_generator(setup.stage, templates=setup.templates, batch_size=batch_size or setup.config.batch_size),
        questions={q.id: q.question for q in questions},
        similarity=similarity_metric,
        ks=ks,
        relevant=relevant,
        oracle=oracle,
        epsilon=epsilon,
        cache=setup.cache,
        progress=progress,
    )
    data_out = result.to_dict()
    with_gold = None if oracle is None else {"questions_with_gold_in_corpus": sum(map(bool, oracle.values()))}
    data_out["settings"].update(
        config=str(config_path),
        data=str(data),
        member=member,
        limit=limit,
        reader=setup.config.reader.model,
        similarity=similarity,
        references=references,
        cache=_cache_setting(setup.cache),
        oracle=with_gold,
        relevance="provenance" if relevant is not None else None,
    )
    return write_utility(out, data_out)


def _check_utility_options(
    ks: Sequence[int], references: str, batch_size: int | None, epsilon: float | None
) -> list[int]:
    """One-line InputErrors for bad options, before any model loads; the sorted cutoffs."""
    chosen = sorted(set(ks))
    if not chosen or chosen[0] < 1:
        raise InputError("--ks must be positive cutoffs, e.g. 1,2,5,10")
    if references not in ("answers", "passages"):
        raise InputError(f"--references must be 'answers' or 'passages', got {references!r}")
    if batch_size is not None and batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}")
    if epsilon is not None and epsilon <= 0:
        raise InputError(f"--epsilon must be positive, got {epsilon}")
    return chosen


def _references(
    setup: Setup, relevant: dict[str, list[str]] | None, references: str
) -> tuple[dict[str, list[str]], dict[str, list[dict[str, str]]] | None]:
    """Per question the references answers are compared with (its gold answers, or its gold passages'
    texts), and the oracle contexts (its gold passages found in the corpus; None without provenance)."""
    questions = setup.questions
    corpus = _gold_texts(setup.config, relevant) if relevant is not None else {}
    oracle = None
    if relevant is not None:
        oracle = {q.id: [corpus[pid] for pid in relevant[q.id] if pid in corpus] for q in questions}
    if references == "answers":
        return {q.id: q.answers for q in questions}, oracle
    if relevant is None:
        raise InputError("--references passages needs 'gold_passages' on every question")
    refs: dict[str, list[str]] = {}
    for q in questions:
        refs[q.id] = [corpus[pid]["text"] for pid in relevant[q.id] if pid in corpus]
        if not refs[q.id]:
            raise InputError(f"question {q.id!r}: none of its gold passages is in the corpus")
    return refs, oracle


def _cache_setting(store: GenerationCache) -> str:
    return str(store.path) if store.path is not None else "off (in memory for this run)"


def _similarity(name: str) -> Any:
    """A voters similarity metric by name (its errors list the available ones), built before the reader."""

    return build_metric(name)


def _gold_texts(config: EnsembleConfig, relevant: dict[str, list[str]]) -> dict[str, dict[str, str]]:
    """The gold passages (id, title, text) found in the config's corpus (retrievers.corpus, the one corpus
    reader), only the ids needed."""
    if not (config.corpus and config.corpus.path):
        return {}
    path = config.resolve_path(config.corpus.path)
    if not path.is_file():
        return {}
    found = load_corpus(path).by_ids(pid for ids in relevant.values() for pid in ids)
    return {pid: {"id": pid, "title": passage.title, "text": passage.text} for pid, passage in found.items()}
