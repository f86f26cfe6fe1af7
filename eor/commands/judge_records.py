"""`eor run` with a `judge:` section: the records grow by the reader's scores of each question's candidates
(eor.pipeline.judging), without generating anything again.

Every record that lacks scores gets them, `batch_size` questions at a time, and the records are rewritten
atomically after each batch, so an interruption loses at most the batch in flight and the next run goes on
from there. A record's members, answers, prompts and vote stay as they were, byte for byte: the scores go in
a field of their own (`judge`, last on the line). With `judge.null_candidate` the null candidate is scored too
(`judge["null"]`, eor.pipeline.judging.null_scores): with the candidates, in the same pass, or alone for records
scored before. Scores made differently (another reader, span rule, K,
reading template or pool) are refused, naming the difference: records hold the scores of one judge.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from eor.core.config import EnsembleConfig
from eor.core.errors import InputError
from eor.core.formatting import fixed
from eor.core.prompts import templates_for
from eor.pipeline.jobs import batches
from eor.pipeline.judging import NULL_ANSWERS, judge, judge_identity, judged_members, null_scores
from eor.pipeline.stages.generation import GenerationStage
from eor.runs.run_folder import RunFolder
from voters.candidates import SPAN_RULES


def scores_identity(config: EnsembleConfig, stage: GenerationStage) -> dict[str, Any]:
    """The identity a record's scores are checked against: the judge's (eor.pipeline.judging) and the members
    it weighs, whose answers are candidates and whose prompts score them."""
    if config.judge is None:
        raise InputError("the config has no `judge:` section")
    if config.judge.rule is not None:
        SPAN_RULES[config.judge.rule]  # ConfigError naming the rules there are
    if config.judge.k < 0:
        raise InputError(f"judge.k must be 0 or more, not {config.judge.k}")
    if not config.judge.score:
        raise InputError("judge.score is false: records grow by the reader's scores, so `eor run` needs it true")
    return {**judge_identity(config, config.judge, stage.identity), "members": judged_members(config)}


def grow_by_scores(folder: RunFolder, config: EnsembleConfig, stage: GenerationStage, batch_size: int) -> str:
    """Score the candidates of every record that lacks scores (see the module); what was done, in a line."""
    from tqdm.auto import tqdm

    assert config.judge is not None  # scores_identity refuses a config without one
    identity = scores_identity(config, stage)
    records = folder.read_records()
    for record in records:
        made = (record.judge or {}).get("identity")
        if record.judge is not None and made != identity:
            found = [
                f"{key}: {(made or {}).get(key)!r} → {value!r}"
                for key, value in identity.items()
                if (made or {}).get(key) != value
            ]
            raise InputError(
                f"question {record.id} holds the judge's scores made differently from this config's "
                f"({'; '.join(found)}): records hold the scores of one judge, so run this config into another --out"
            )
        null = (record.judge or {}).get("null")
        if config.judge.null_candidate and null is not None and null.get("texts") != list(NULL_ANSWERS):
            raise InputError(
                f"question {record.id} holds the null candidate's scores in other phrasings ({null.get('texts')!r}, "
                f"not {list(NULL_ANSWERS)!r}): run this config into another --out"
            )
    todo = [
        record
        for record in records
        if record.judge is None or (config.judge.null_candidate and "null" not in record.judge)
    ]
    if not todo:
        return f"the records hold the judge's scores ({len(records)} questions)"
    templates = templates_for(config)
    before = dataclasses.replace(stage.score_stats)
    fresh = sum(record.judge is None for record in todo)
    with tqdm(total=len(todo), desc="judging", unit="q") as progress:
        for batch in batches(todo, batch_size):
            for record in batch:
                outputs = {name: record.members[name] for name in identity["members"] if name in record.members}
                if record.judge is None:
                    judged = judge(stage, record.question, outputs, config.judge, templates)
                    record.judge = {"identity": identity, "candidates": [one.to_dict() for one in judged]}
                if config.judge.null_candidate:  # behind the prompts just scored: none is evaluated again
                    record.judge["null"] = null_scores(stage, outputs)
            folder.replace_records(records)
            progress.update(len(batch))
    done = stage.score_stats.since(before)
    what = f"the candidates of {fresh} questions" if fresh else ""
    if config.judge.null_candidate:
        what = (
            f"{what} and the null candidate of {len(todo)}" if fresh else f"the null candidate of {len(todo)} questions"
        )
    return (
        f"scored {what}: {done.unique} continuations ({done.cache_hits} read back "
        f"from the cache), {done.tokens} tokens scored in {fixed(done.seconds, 1)} s of reader time"
    )
