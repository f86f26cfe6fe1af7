"""The records of a run as the arrays a benchmark needs (members, answers, golds, passages per member)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eor.errors import InputError
from eor.records import read_records
from eor.training import records_matrix


@dataclass(frozen=True)
class RunData:
    """Questions with gold answers, in record order; `answers[q][m]` is member m's answer to question q.

    `passages[q][m]` is member m's retrieved passages (one string each, for the error breakdown, where a
    match must lie within one passage); `joined[q][m]` the same passages joined by spaces, as `eor train`
    gives them to a voter that uses grounding.
    """

    names: list[str]
    ids: list[str]
    answers: list[list[str]]
    golds: list[list[str]]
    passages: list[list[list[str]]]
    joined: list[list[str]]

    @property
    def questions(self) -> int:
        return len(self.ids)

    def by_member(self) -> tuple[list[list[str]], list[list[list[str]]]]:
        """(answers, passages) indexed [member][question], the layout of eor.evaluation.error_breakdown."""
        answers = [[row[m] for row in self.answers] for m in range(len(self.names))]
        passages = [[row[m] for row in self.passages] for m in range(len(self.names))]
        return answers, passages


def load_run(records_dir: str | Path, members: list[str] | None = None) -> RunData:
    """Read a run folder (or records file); questions without gold answers are skipped, as in training."""
    names, answers, golds, joined = records_matrix(records_dir, members)
    records = [record for record in read_records(records_dir) if record.get("answers")]
    if len(records) != len(answers):  # both read the same file; a concurrent append could differ
        raise InputError(f"{records_dir}: the records changed while being read; run the benchmark again")
    ids = [str(record["id"]) for record in records]
    passages = [
        [[str(passage.get("text", "")) for passage in record["members"][name].get("passages") or []] for name in names]
        for record in records
    ]
    if len(set(names)) != len(names):
        raise InputError(f"{records_dir}: member names repeat: {names}")
    return RunData(names=names, ids=ids, answers=answers, golds=golds, passages=passages, joined=joined)
