"""`eor design RECORDS --config CANDIDATES --out DIR`: the pool chosen by cross-validation from training records
of candidate members (eor.learning.design), written as a config with its selector and cascade weights files.

`DIR/design.json` holds the candidate table (each member's exact match, gold passage retrieved, answer in
context, exact match when the answer is in context, reader seconds per question run alone), the path and
the settings; `DIR/pool.yaml` is the candidates' config with the chosen members, in the order chosen, and
the cascade as its voter; `DIR/selector.json` and `DIR/cascade.json` are `eor train`'s weights files of the
chosen members; `DIR/design.png` draws exact match against reader seconds per question: every candidate
alone (training records), every pool the passes evaluated and their frontier, and the path (cross-validated).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from eor.commands.train_command import TrainOptions, train
from eor.core.answers import matches_gold, normalize_answer
from eor.core.atomic import write_text_atomically
from eor.core.config import load_config
from eor.core.errors import ConfigError, InputError
from eor.core.formatting import fixed, pct, signed
from eor.evaluation.writing.figures import plot_design
from eor.learning.crossval import VoteSettings, vote_arrays
from eor.learning.design import DEFAULT_FOLDS, DEFAULT_REPEATS, Design, SplitScores, design_pool
from eor.pipeline.members import demonstration_ids
from eor.pipeline.validation import load_valid_config
from eor.readers import build_reader
from eor.runs.costs import (
    MemberCosts,
    PromptReplay,
    describe_rates,
    fit_rates,
    prompt_replay,
    recorded_seconds,
    token_counts,
)
from eor.runs.records import read_records
from eor.runs.run_data import RunData, load_run
from voters.cascade_fit import SelectorSettings

DESIGN_FILE = "design.json"
DESIGN_FIGURE = "design.png"
POOL_CONFIG = "pool.yaml"


def design(
    records: Path,
    config_path: Path,
    out: Path,
    *,
    folds: int = DEFAULT_FOLDS,
    repeats: int = DEFAULT_REPEATS,
    seed: int = 0,
    rates: dict[str, float] | None = None,
    max_loss: float | None = None,
    budget: float | None = None,
) -> str:
    """Design the pool (eor.learning.design) and write DIR's files; returns what `eor design` prints."""
    config = load_valid_config(config_path)  # the door
    data = load_run(records, config.members).without(demonstration_ids(config))  # the candidates, in order
    reader = build_reader(config.reader)
    if not hasattr(reader, "chat_tokens"):
        raise ConfigError("eor design replays prefix reuse in the reader's own tokens: it needs a llama.cpp reader")
    used = rates or fit_rates(_token_pairs(data), recorded_seconds(data))
    replay = prompt_replay(data, reader.chat_tokens, used, config.reader.llama_cpp.prefix_chunk)
    arrays = vote_arrays(data, VoteSettings(confidence=False))
    labels = arrays.correctness >= 0.5
    scores = SplitScores(arrays.blocks, labels, data.names, SelectorSettings(), folds, repeats, seed)
    result = design_pool(scores, replay, data.names)
    result.settings = {
        "folds": folds,
        "repeats": repeats,
        "seed": seed,
        "rates": used,
        "chunk": replay.chunk,
        "rule": "forward: most CV accuracy per reader second; a step kept when its paired gain ≥ 1 SE; backward:"
        " drop while the loss < 1 SE",
        "cascade": {"budget": budget} if budget is not None else {"max_loss": 0.5 if max_loss is None else max_loss},
    }
    table = candidate_table(records, data, replay)
    if not result.chosen:
        raise InputError("no candidate raises the cross-validated accuracy by one standard error: nothing to design")
    out.mkdir(parents=True, exist_ok=True)
    document = {"candidates": table, **result.to_dict()}
    write_text_atomically(out / DESIGN_FILE, json.dumps(document, indent=2) + "\n")
    plot_design({"design": document}, out / DESIGN_FIGURE)
    _write_config(config_path, out / POOL_CONFIG, result.chosen)
    trained = _train_voters(
        records, out, data, replay, used, result.chosen, seed=seed, max_loss=max_loss, budget=budget
    )
    return "\n".join(
        [
            *format_table(table),
            "",
            *format_path(result),
            _cascade_line(out / "cascade.json"),
            "",
            f"wrote {out / POOL_CONFIG}, " + ", ".join(trained),
        ]
    )


def _train_voters(
    records: Path,
    out: Path,
    data: RunData,
    replay: PromptReplay,
    rates: dict[str, float],
    chosen: list[str],
    *,
    seed: int,
    max_loss: float | None,
    budget: float | None,
) -> list[str]:
    """`eor train`'s selector and cascade of the chosen members (DIR/selector.json, DIR/cascade.json), for the
    pool in DIR/pool.yaml, each member's cost replayed in the order it runs (the pool's, the cascade's own); the
    files written."""
    order = [data.names.index(name) for name in chosen]
    costs = replay.in_order(order, len(data.names))[:, order]
    # the selector runs every member in the pool's order; the cascade is charged in its own (voters.spend)
    member_costs = MemberCosts(costs, "tokens", recorded_seconds(data)[:, order], dict(rates), replay.subset(order))
    trained = []
    # the chosen members of the config validated at the door, with its sources, prompts and reader: not a door
    pool = load_config(out / POOL_CONFIG)
    for voter in ("selector", "cascade"):
        file = out / f"{voter}.json"
        options = TrainOptions(
            voter=voter,
            seed=seed,
            members=chosen,
            costs=member_costs,
            pool_config=out / POOL_CONFIG,
            pool=pool,
            max_loss=max_loss,
            budget=budget if voter == "cascade" else None,
            confidence=False,
        )
        train(records, file, options)
        trained.append(str(file))
    return trained


def _cascade_line(weights: Path) -> str:
    """The chosen pool's cascade: its order and operating point, held out on the training questions."""
    cascade = json.loads(weights.read_text(encoding="utf-8"))
    point = cascade["chosen"]
    return (
        f"cascade: {' > '.join(cascade['order'])}; held out on train {pct(point['accuracy'])} EM at "
        f"{fixed(point['cost'], 2)} s per question (every member: {pct(cascade['full_accuracy'])} at "
        f"{fixed(cascade['full_cost'], 2)} s)"
    )


def _token_pairs(data: RunData) -> np.ndarray:
    counts = token_counts(data)
    if counts is None:
        raise InputError("eor design needs records with every member's token counts (eor run writes them)")
    return counts


def reading_indicators(records: Path, data: RunData) -> dict[str, np.ndarray]:
    """(Q, M) 0/1 arrays over the records' questions and members, in `data`'s order: `right` (exact match),
    `gold_passage` (a gold passage of the question file's `gold_passages` among its passages) and
    `in_context` (a gold answer, normalised, within one of its passages)."""
    read = read_records(records)
    gold = {record.id: set(record.extra.get("gold_passages") or []) for record in read}
    members = {record.id: record.members for record in read}
    right = [
        [matches_gold(answer, golds) for answer in row] for row, golds in zip(data.answers, data.golds, strict=True)
    ]
    found = [
        [bool(gold[q] & {p.get("id") for p in members[q][name].passages}) for name in data.names] for q in data.ids
    ]
    context = [
        [in_context(passages, golds) for passages in row] for row, golds in zip(data.passages, data.golds, strict=True)
    ]
    return {"right": np.array(right), "gold_passage": np.array(found), "in_context": np.array(context)}


def candidate_table(records: Path, data: RunData, replay: PromptReplay) -> list[dict[str, Any]]:
    """Per candidate over the records' questions: exact match, gold passage retrieved, answer in context and
    exact match when it is (`reading_indicators`), and its reader seconds per question run alone (tokens at
    the replay's rates)."""
    found = reading_indicators(records, data)
    right, context = found["right"], found["in_context"]
    return [
        {
            "member": name,
            "em": float(right[:, m].mean()),
            "gold_passage": float(found["gold_passage"][:, m].mean()),
            "answer_in_context": float(context[:, m].mean()),
            "em_in_context": float(right[context[:, m], m].mean()) if context[:, m].any() else None,
            "seconds": float(replay.after(None, m).mean()),
        }
        for m, name in enumerate(data.names)
    ]


def in_context(passages: list[str], golds: list[str]) -> bool:
    """Whether a gold answer, normalised, occurs as whole words in one of the passages, normalised."""
    wanted = [normalize_answer(gold) for gold in golds if normalize_answer(gold)]
    texts = [f" {normalize_answer(text)} " for text in passages]
    return any(f" {answer} " in text for answer in wanted for text in texts)


def format_table(table: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"{'candidate':<34} {'EM':>6} {'gold':>6} {'in ctx':>7} {'EM|ctx':>7} {'s/q':>6}",
    ]
    for row in table:
        shown = "-" if row["em_in_context"] is None else pct(row["em_in_context"])
        lines.append(
            f"{row['member']:<34} {pct(row['em']):>6} {pct(row['gold_passage']):>6} "
            f"{pct(row['answer_in_context']):>7} {shown:>7} {fixed(row['seconds'], 2):>6}"
        )
    return lines


def format_path(result: Design) -> list[str]:
    settings = result.settings
    lines = [
        f"design path ({settings['repeats']} × {settings['folds']}-fold cross-validation of the selector, seed "
        f"{settings['seed']}; costs at {describe_rates(settings['rates'])}):",
        f"  {'step':<8} {'member':<34} {'CV EM':>6} {'gain':>6} {'SE':>5} {'s/q':>6} {'oracle':>7}",
    ]
    for step in result.steps[1:]:
        lines.append(
            f"  {step.action:<8} {step.member:<34} {pct(step.accuracy):>6} {signed(100 * step.gain, 1):>6} "
            f"{fixed(100 * step.se, 1):>5} {fixed(step.cost, 2):>6} {pct(step.oracle):>7}"
        )
    lines.append(f"chosen: {', '.join(result.chosen)}")
    return lines


def _write_config(candidates: Path, target: Path, members: list[str]) -> None:
    """The candidates' config with the chosen members and the cascade as its voter (its prompt variants all
    kept: their worked examples stay out of whatever the pool trains on); the corpus path is rewritten
    against the new file's folder (other relative paths, such as a source's own files, are not)."""
    import yaml

    raw = yaml.safe_load(candidates.read_text(encoding="utf-8"))
    source, folder = candidates.resolve().parent, target.resolve().parent
    corpus = (raw.get("corpus") or {}).get("path")
    if corpus and not corpus.startswith("eor:") and not Path(corpus).is_absolute():
        raw["corpus"]["path"] = os.path.relpath(source / corpus, folder)
    raw["name"] = f"{raw.get('name', 'eor')}-designed"
    raw["members"] = list(members)
    raw["voter"] = {**(raw.get("voter") or {}), "weights": "cascade.json"}
    header = f"# Designed by `eor design` from {candidates.name}: the members cross-validation chose.\n"
    write_text_atomically(target, header + yaml.safe_dump(raw, sort_keys=False, allow_unicode=True, width=120))
