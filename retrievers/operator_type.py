"""Retriever operators beyond the paper's: a postfix `@WORD` in member names, declared as data.

The notation's own operators (`@RR`, `@k`, `&`, `@CP`) are fixed by the paper. Another package (entry point
group `eor.operators`, each naming an `OperatorType`) or Python code (`register_operator`) may add named
postfix operators: `BM25@DEDUP@5` parses to `TopK(Apply(Source("BM25"), "DEDUP"), 5)` and the pool builds it
with the operator's `build(child, context)`. An added operator binds like `@RR`: to the operand right before
it, before `@k` and `&` (write `(A&B)@DEDUP` to apply it to a concatenation). This module imports nothing of
the notation or the pool, so both may read it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eor.core.errors import ConfigError
from eor.core.registry import Registry

__all__ = ["OperatorType", "operator_types", "register_operator", "unregister_operator"]

log = logging.getLogger(__name__)

RESERVED = ("RR", "CP")  # the paper's word operators (any case: '@rr' is reported as a case mistake)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*\Z")


@dataclass(frozen=True)
class OperatorType:
    """`@word` in member names: `build(child, context)` gets the child's `EorRetriever` and the pool's
    `retrievers.source_type.BuildContext`, and returns the retriever over the child, whose `to_node()` is
    `notation.Apply(child.to_node(), word)` (`retrievers.operators.Applied` does that)."""

    word: str
    build: Callable[[Any, Any], Any]
    summary: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.word, str) or not _WORD.match(self.word):
            raise ConfigError(f"an operator word is an ASCII letter followed by letters or digits, got {self.word!r}")
        if self.word.upper() in RESERVED:
            raise ConfigError(f"operator word {self.word!r} is the paper's own: {', '.join(RESERVED)} are reserved")
        if not callable(self.build):
            raise ConfigError(f"operator {self.word!r}: build must be callable, got {type(self.build).__name__}")


def _under_its_word(word: str, operator: OperatorType) -> tuple[str, OperatorType] | None:
    if operator.word != word:
        log.warning("skipping eor.operators plugin %r: it holds the operator %r of another word", word, operator.word)
        return None
    return word, operator


OPERATORS: Registry[OperatorType] = Registry(
    "operator", group="eor.operators", accept=OperatorType, adapt=_under_its_word
)


def register_operator(operator: OperatorType, *, replace: bool = False) -> OperatorType:
    """Make `@<operator.word>` available in member names (a taken word needs `replace=True`)."""
    if not isinstance(operator, OperatorType):
        raise ConfigError(f"an operator must be a retrievers.operator_type.OperatorType, got {type(operator).__name__}")
    return OPERATORS.register(operator.word, operator, replace=replace)


def unregister_operator(word: str) -> None:
    """Forget a registered operator (for tests and notebooks); unknown words are ignored."""
    OPERATORS.unregister(word)


def operator_types() -> dict[str, OperatorType]:
    """Every added operator by word: those registered in Python, then those of installed packages."""
    return dict(OPERATORS.items())
