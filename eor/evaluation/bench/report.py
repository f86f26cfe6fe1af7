"""`build_report`: every number of a retriever-pool benchmark, as one JSON-ready dict.

The report (EoR paper, table 1, figures 1 and 4-6, appendix B) holds, for the questions of a run that have
gold answers:

- `provenance`: the pool's members, reader identity (model digest), corpus and config name, as the records
  say (null where records from before eor kept it do not);
- `members`: per member the mean of each measure (`em`, `f1`, `contains`, and the report's `metric` when it
  is another one), its bootstrap 95% interval (`ci`), and `mrwr`/`mrlr` on the report's metric;
- `eor`: the same for the ensemble (a weights file's voter, or a uniform one), with MRWR/MRLR against the
  members and how often each member's answer was chosen;
- `top_r`: the best member on these records by the report's metric (the paper's Top R; ties go to the
  earliest member); `top_r_train`: the member best on the training records, named by the weights file
  (the fair baseline, since Top R is chosen on the very questions it is scored on), or null;
- `oracle`: the upper bound (right whenever some member is right) and its gap to EoR and Top R;
- `significance`: paired tests of EoR against Top R and Top R (train) (see eor.evaluation.stats);
- `rwr`: `names` and `matrix` with row i, column j = RWR(i, j) (eq. 1);
- `errors`: appendix B's breakdown: per member counts and rates of each error type, a partition of the
  questions for stacked bars, RWR_E matrices, and `filtered` (questions dropped by the >5-word filter);
- `upper_bound`: the oracle of member subsets per pool size (figure 5), summarised per size;
- `weights`: the learned weights (figure 6) when a weights file is given;
- `cost`: what members cost per question and what EoR's voter ran, the accuracy-versus-cost frontier of
  member subsets and a cascade's operating points (eor.evaluation.bench.cost_section); null when the records hold
  no seconds.
- `selective`: the voter's P(right) (voters.right) judged on these questions: reliability bins, ECE beside a
  perfectly calibrated P's, Brier skill, the risk–coverage curve and AURC beside a constant's, selective
  accuracy at 50/80/100% coverage, and the realised error and coverage at each error rate of the weights
  file's thresholds (eor.evaluation.bench.probability); null when the voter has no P(right).

Every measure is a fraction in [0, 1]. An undefined ratio (zero denominator) is null, never 0. The
report's `metric` (em by default) is the correctness indicator of RWR, the oracle, Top R, the error
breakdown and the significance test; for a graded metric (f1) the error breakdown counts a score ≥ 0.5 as
correct.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eor.core.correctness import CORRECTNESS, CorrectnessFunction, correctness_matrix
from eor.core.errors import InputError
from eor.core.json_ready import json_ready
from eor.evaluation.bench.cost_section import cost_section
from eor.evaluation.bench.probability import section as probability_section
from eor.evaluation.bench.vote import Vote, vote
from eor.evaluation.error_breakdown import (
    ERROR_TYPES,
    MAX_ANSWER_WORDS,
    ErrorIndicators,
    error_indicators,
    error_rwr_matrices,
    summarize_errors,
)
from eor.evaluation.inconsistency import mrlr, mrlr_against, mrwr, mrwr_against, rwr_matrix
from eor.evaluation.stats import CONFIDENCE, DEFAULT_RESAMPLES, Bootstrap, paired_test
from eor.evaluation.upper_bound import DEFAULT_MAX_SUBSETS, oracle_accuracy, top_member, upper_bound_by_pool_size
from eor.pipeline.pool import describe_corpus
from eor.runs.costs import ReaderTokens
from eor.runs.run_data import RunData, load_run
from eor.runs.run_folder import recorded_config, recorded_pool
from voters.right import RightModel

REPORT_FORMAT = "eor-bench-report"
REPORT_VERSION = 1
MEASURES: tuple[str, ...] = ("em", "f1", "contains")
EOR = "EoR"
CORRECT_AT = 0.5  # a graded score counts as correct in the error breakdown from here on
# Stacked-bar categories: every (member, question) falls in exactly one.
PARTITION: tuple[str, ...] = (
    "correct",  # right, and not a lucky guess
    "lucky_guess",  # right although neither the gold nor the answer is in the retrieved text
    "extraction_error",  # wrong although the gold and the answer are both in the retrieved text
    "hallucination",  # wrong, gold retrieved, answer not in the retrieved text
    "retriever_error",  # wrong and no gold answer retrieved
)
STAGES = (
    "reading records",
    "scoring answers",
    "voting (EoR)",
    "inconsistency",
    "error breakdown",
    "upper bound",
    "cost",
    "bootstrap",
)


def build_report(
    records_dir: str | Path,
    weights: str | Path | None = None,
    metric: str = "em",
    seed: int = 0,
    max_subsets: int = DEFAULT_MAX_SUBSETS,
    *,
    metrics: Sequence[str] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    progress: bool = False,
    members: Sequence[str] | None = None,
    design: str | Path | None = None,
    frontier: bool = False,
    correctness: CorrectnessFunction | None = None,
    tokens: ReaderTokens | None = None,
) -> dict[str, Any]:
    """Benchmark the members of a run and EoR on its records; a JSON-ready dict (see the module docstring).

    `weights`: a weights file from `eor train`; without one EoR is a uniform voter over `metrics` (default em, f1,
    cosine; `("em", "f1")` loads no sentence encoder). `metric`: the correctness of RWR, oracle, Top R, errors and
    significance (em, f1, contains, semantic, ...). `seed` seeds the bootstrap (`resamples` resamples) and the upper
    bound's subsets (`max_subsets` per pool size at most); `progress`: a tqdm bar of the stages. `members`: these
    members only (records that grew beyond a pool). `design`: `eor design`'s design.json, shown. `frontier`, `tokens`
    (the reader's): the cost section's subset frontier (slow) and a cascade charged in its own order
    (eor.evaluation.bench.cost_section). `correctness`: `metric`'s function (default: registered; --bem-model).
    """
    if metric not in CORRECTNESS:
        raise InputError(f"unknown correctness metric {metric!r}; available: {', '.join(CORRECTNESS)}")
    measures = list(MEASURES) + ([metric] if metric not in MEASURES else [])
    shown_design = read_design(design) if design is not None else None  # before any record is read
    with _stages(progress) as stage:
        stage(0)
        data = load_run(records_dir, list(members) if members else None)
        stage(1)
        scores = _scores(data, measures, metric, correctness)  # scores[measure]: (members, questions)
        stage(2)
        voted = vote(data, weights, metrics)
        questions = np.arange(data.questions)
        eor_scores = {name: scores[name][voted.chosen, questions] for name in measures}
        stage(3)
        matrix = rwr_matrix(scores[metric])
        stage(4)
        errors = _errors(data, voted, scores[metric], metric)
        stage(5)
        upper = _upper_bound(scores[metric], data.names, max_subsets, seed)
        stage(6)
        options: dict[str, Any] = {"frontier": frontier, "progress": progress, "tokens": tokens}
        cost = cost_section(data, voted, scores[metric], metric, seed, **options)
        stage(7)
        scored = Scored(
            data, voted, scores, eor_scores, measures, metric, Bootstrap.draw(data.questions, resamples, seed)
        )
        report = _assemble(records_dir, scored, matrix, errors, upper, seed, max_subsets)
        report["cost"] = cost
        report["selective"] = probability_section(
            voted.probability, eor_scores[metric], metric, RightModel.from_voter(voted.voter), voted.fits
        )
        if shown_design is not None:
            report["design"] = shown_design
    return json_ready(report)


@contextmanager
def _stages(progress: bool) -> Iterator[Callable[[int], None]]:
    """A bar of `build_report`'s STAGES on stderr, shown only with `progress`: `stage(i)` counts the stage before
    i done and names stage i; the last is done when the block ends without an error."""
    from tqdm.auto import tqdm

    with tqdm(total=len(STAGES), desc="bench", unit="stage", disable=not progress, file=sys.stderr) as bar:

        def stage(index: int) -> None:
            if index:
                bar.update(1)  # the previous stage is done
            bar.set_postfix_str(STAGES[index])

        yield stage
        bar.update(1)


def _scores(
    data: RunData, measures: Sequence[str], metric: str, correctness: CorrectnessFunction | None
) -> dict[str, np.ndarray]:
    """Each measure's correctness, shape (members, questions); `correctness` scores `metric` when given."""
    functions = {name: CORRECTNESS[name] for name in measures} | ({metric: correctness} if correctness else {})
    _prime(functions[metric], data)
    return {
        name: correctness_matrix(data.answers, data.golds, name, data.texts, function=functions[name]).T
        for name in measures
    }


def _prime(function: CorrectnessFunction, data: RunData) -> None:
    """Batch-encode every answer and gold once when the metric embeds texts (much faster than one by one)."""

    prime = getattr(function, "prime", None)
    if prime is not None:
        prime([text for row in data.answers for text in row] + [text for row in data.golds for text in row])


def _figures(values: dict[str, np.ndarray], measures: Sequence[str], resampled: Bootstrap) -> dict[str, Any]:
    """Mean and 95% interval of each measure from per-question scores."""
    out: dict[str, Any] = {name: _mean(values[name]) for name in measures}
    out["ci"] = {name: resampled.interval(values[name]) for name in measures}
    return out


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if np.size(values) else float("nan")


def _assemble(
    records_dir: str | Path,
    scored: Scored,
    matrix: np.ndarray,
    errors: dict[str, Any],
    upper: dict[str, Any],
    seed: int,
    max_subsets: int,
) -> dict[str, Any]:
    """The report dict, in the order of the module docstring."""
    data, metric = scored.data, scored.metric
    report = {
        "format": REPORT_FORMAT,
        "version": REPORT_VERSION,
        "records": str(records_dir),
        "provenance": provenance(records_dir),
        "questions": data.questions,
        "metric": metric,
        "measures": scored.measures,
        "seed": seed,
        "bootstrap": {"resamples": scored.resampled.resamples, "confidence": CONFIDENCE, "method": "percentile"},
        "names": list(data.names),
        **_accuracy(scored, matrix),
        "rwr": {"metric": metric, "names": list(data.names), "matrix": matrix},
        "errors": errors,
        "upper_bound": {**upper, "max_subsets": max_subsets},
        "weights": scored.voted.weights(),
    }
    report["upper_bound"]["eor"] = report["eor"][metric]
    return report


def provenance(records: str | Path) -> dict[str, Any]:
    """What the records say of where they come from (a packed file's header, or a run folder's pool.json and
    config.json): the pool's members, the reader's identity (backend, model file and digest, settings), the
    corpus and the config's name; None for what they do not say (records from before eor kept it)."""

    pool = recorded_pool(records) or {}
    config = recorded_config(records) or {}
    corpus = pool.get("corpus") if isinstance(pool.get("corpus"), dict) else None
    return {
        "members": pool.get("members"),
        "reader": pool.get("reader"),
        "corpus": describe_corpus(corpus) if corpus and corpus.get("bytes") else None,  # its version: sha256
        "config": config.get("name"),
    }


@dataclass(frozen=True)
class Scored:
    """A run's records scored: per measure, (members, questions) scores and EoR's per question."""

    data: RunData
    voted: Vote
    scores: dict[str, np.ndarray]
    eor_scores: dict[str, np.ndarray]
    measures: list[str]
    metric: str
    resampled: Bootstrap

    @property
    def indicator(self) -> np.ndarray:
        return self.scores[self.metric]

    def figures(self, values: dict[str, np.ndarray]) -> dict[str, Any]:
        return _figures(values, self.measures, self.resampled)


def _accuracy(scored: Scored, matrix: np.ndarray) -> dict[str, Any]:
    """Table 1: members, Top R (here and on the training records), EoR, the oracle, and the paired tests."""
    names, metric, indicator = scored.data.names, scored.metric, scored.indicator
    member_mrwr, member_mrlr = mrwr(matrix), mrlr(matrix)
    members: dict[str, Any] = {}
    for m, name in enumerate(names):
        figures = scored.figures({k: v[m] for k, v in scored.scores.items()})
        members[name] = {**figures, "mrwr": float(member_mrwr[m]), "mrlr": float(member_mrlr[m])}
    top = top_member(indicator.T)  # ties: earliest member
    top_r = {"member": names[top], **members[names[top]]}
    eor = {
        **scored.voted.describe(),
        **scored.figures(scored.eor_scores),
        "mrwr": mrwr_against(scored.eor_scores[metric], indicator),
        "mrlr": mrlr_against(scored.eor_scores[metric], indicator),
        "chosen": {name: int(np.sum(scored.voted.chosen == m)) for m, name in enumerate(names)},
    }
    top_r_train = _top_r_train(scored, members)
    return {
        "members": members,
        "eor": eor,
        "top_r": top_r,
        "top_r_train": top_r_train,
        "oracle": _oracle(scored, eor, top_r),
        "significance": _significance(scored, names[top], top_r_train),
    }


def _top_r_train(scored: Scored, members: dict[str, Any]) -> dict[str, Any] | None:
    """The member best on the training records, as the weights file names it (None without one)."""
    name = scored.voted.top_r_train
    if name is None:
        return None
    train = scored.voted.voter.metadata_.get("top_r_train", {}).get("train")
    if name in members:
        return {"member": name, **members[name], "train": train}
    return {"member": name, "train": train, "in_records": False}


def _oracle(scored: Scored, eor: dict[str, Any], top_r: dict[str, Any]) -> dict[str, Any]:
    """The upper bound: right whenever some member is right; its gap to EoR and Top R."""
    metric, questions = scored.metric, scored.data.questions
    oracle_scores = {name: scored.scores[name].max(axis=0) if questions else np.zeros(0) for name in scored.measures}
    oracle = scored.figures(oracle_scores)
    oracle[metric] = oracle_accuracy(scored.indicator) if questions else float("nan")
    oracle["gap"] = {"eor": oracle[metric] - eor[metric], "top_r": oracle[metric] - top_r[metric]}
    return oracle


def _significance(scored: Scored, top: str, top_r_train: dict[str, Any] | None) -> dict[str, Any]:
    """Paired tests of EoR against Top R and, when the records hold it, Top R (train)."""
    names, eor = scored.data.names, scored.eor_scores[scored.metric]
    significance: dict[str, Any] = {"metric": scored.metric}
    significance["top_r"] = {**paired_test(eor, scored.indicator[names.index(top)], scored.resampled), "against": top}
    significance["top_r_train"] = None
    if top_r_train is not None and top_r_train["member"] in names:
        against = top_r_train["member"]
        test = paired_test(eor, scored.indicator[names.index(against)], scored.resampled)
        significance["top_r_train"] = {**test, "against": against}
    return significance


def _errors(data: RunData, voted: Vote, indicator: np.ndarray, metric: str) -> dict[str, Any]:
    """Appendix B's error breakdown of every member, plus EoR (its answer read against the passages of the
    member it chose); EoR's answer is one of the members', so it never changes the long-answer filter."""
    answers, passages = data.by_member()
    questions = range(data.questions)
    answers.append([data.answers[q][voted.chosen[q]] for q in questions])
    passages.append([data.passages[q][voted.chosen[q]] for q in questions])
    correct = indicator[voted.chosen, np.arange(data.questions)] if data.questions else np.zeros(0)
    correct = (np.vstack([indicator, correct[np.newaxis, :]]) >= CORRECT_AT).astype(float)
    indicators = error_indicators(answers, passages, data.golds, members=[*data.names, EOR], correct=correct)
    members = _slice(indicators, slice(0, len(data.names)))
    summaries = summarize_errors(indicators)
    per_member = {
        summary.member: {
            "counts": summary.counts,
            "rates": summary.rates,
            "partition": _partition(indicators, m),
        }
        for m, summary in enumerate(summaries)
    }
    return {
        "metric": metric,
        "correct_at": CORRECT_AT,
        "max_answer_words": MAX_ANSWER_WORDS,
        "questions": indicators.questions,
        "filtered": indicators.dropped,
        "types": list(ERROR_TYPES),
        "partition_types": list(PARTITION),
        "names": list(data.names),
        "members": {name: per_member[name] for name in data.names},
        "eor": per_member[EOR],
        "rwr": error_rwr_matrices(members),
    }


def _slice(indicators: ErrorIndicators, rows: slice) -> ErrorIndicators:
    return ErrorIndicators(
        members=indicators.members[rows],
        kept=indicators.kept,
        dropped=indicators.dropped,
        retriever_error=indicators.retriever_error[rows],
        hallucination=indicators.hallucination[rows],
        correct=indicators.correct[rows],
        extraction_error=indicators.extraction_error[rows],
        lucky_guess=indicators.lucky_guess[rows],
    )


def _partition(indicators: ErrorIndicators, m: int) -> dict[str, int]:
    """Counts of the PARTITION categories of member m (they add up to the kept questions)."""
    ok = indicators.correct[m] == 1
    e_r = indicators.retriever_error[m] == 1
    e_h = indicators.hallucination[m] == 1
    lucky = indicators.lucky_guess[m] == 1
    return {
        "correct": int(np.sum(ok & ~lucky)),
        "lucky_guess": int(np.sum(lucky)),
        "extraction_error": int(np.sum(indicators.extraction_error[m] == 1)),
        "hallucination": int(np.sum(~ok & ~e_r & e_h)),
        "retriever_error": int(np.sum(~ok & e_r)),
    }


def _upper_bound(indicator: np.ndarray, names: list[str], max_subsets: int, seed: int) -> dict[str, Any]:
    """Figure 5's numbers, summarised per pool size (every subset's accuracy, the best subset by name)."""
    if indicator.shape[1] == 0:
        return {"by_size": [], "best_single": None, "best_single_accuracy": None}
    bound = upper_bound_by_pool_size(indicator, names, max_subsets_per_size=max_subsets, seed=seed)
    by_size = []
    for size in bound.by_size:
        accuracies = np.asarray(size.accuracies)
        best = int(np.argmax(accuracies))
        quartiles = np.percentile(accuracies, [25, 50, 75])
        by_size.append(
            {
                "size": size.size,
                "total_subsets": size.total_subsets,
                "exhaustive": size.exhaustive,
                "accuracies": accuracies,
                "min": float(accuracies.min()),
                "q1": float(quartiles[0]),
                "median": float(quartiles[1]),
                "q3": float(quartiles[2]),
                "max": float(accuracies.max()),
                "mean": float(accuracies.mean()),
                "best_subset": list(size.subsets[best]),
            }
        )
    return {"by_size": by_size, "best_single": bound.best_single, "best_single_accuracy": bound.best_single_accuracy}


def read_design(path: str | Path) -> dict[str, Any]:
    """`eor design`'s design.json (a folder or the file), checked for what the report shows."""
    file = Path(path)
    file = file / "design.json" if file.is_dir() else file
    try:
        design = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"--design {file}: cannot read a design ({exc})") from None
    missing = [
        key for key in ("candidates", "steps", "chosen", "evaluated", "frontier", "settings") if key not in design
    ]
    if missing:
        raise InputError(f"--design {file}: not eor design's design.json (it lacks {', '.join(missing)})")
    return design
