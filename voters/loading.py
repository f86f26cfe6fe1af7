"""Loading any voter from its weights file: the paper's `Voter` or the learned `AnswerSelector`.

Every weights file is a JSON document of one family (`voters.weights_file`); its `voter` field names the
kind (absent in files written before there was more than one kind: those hold the paper's voter).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eor.errors import ConfigError
from voters.weights_file import read_document


def voter_kinds() -> dict[str, Any]:
    from voters.selector import AnswerSelector
    from voters.voter import Voter

    return {Voter.kind: Voter, AnswerSelector.kind: AnswerSelector}


def load_voter(path: str | Path, members: Sequence[str] | None = None) -> Any:
    """The fitted voter of a weights file; `members` (the pool's names, any order) must be the file's."""
    document = read_document(path)
    kinds = voter_kinds()
    kind = document.get("voter", "paper")
    if not isinstance(kind, str) or kind not in kinds:
        raise ConfigError(f"weights file {str(path)!r} holds an unknown voter {kind!r}; known: {', '.join(kinds)}")
    try:
        return kinds[kind].from_document(document, str(path), members)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # a field missing or mistyped
        raise ConfigError(f"weights file {str(path)!r} is malformed: {type(exc).__name__}: {exc}") from None
