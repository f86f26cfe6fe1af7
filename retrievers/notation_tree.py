"""The trees of the retriever notation (see retrievers.notation): one frozen dataclass per construct, each
checking its fields when it is built; the helpers that build and walk a tree; and the printer, so that a
node's ``str`` is its canonical name (`to_name`: the fewest parentheses that the parser needs to read it
back).

The notation's characters live here too: the nodes check names against them, and the parser
(retrievers.notation_parser) scans with them.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeAlias

from eor.core.errors import RetrieverError

MAX_K_DIGITS = 18
"""Most digits allowed in the ``k`` of ``@k``."""

# The notation's characters: ASCII letters and digits, and what a source name, an operator word and a prompt
# variant may hold besides (each starts with a letter).
LETTERS = frozenset(string.ascii_letters)
DIGITS = frozenset(string.digits)
NAME_CHARS = LETTERS | DIGITS | frozenset("_.-")
OPERATOR_CHARS = LETTERS | DIGITS
VARIANT_CHARS = LETTERS | DIGITS | frozenset("_-")


def _is_operator_word(word: object) -> bool:
    return (
        isinstance(word, str)
        and word[:1] in LETTERS
        and all(ch in OPERATOR_CHARS for ch in word)
        and word.upper() not in ("RR", "CP")
    )


def _is_source_name(name: object) -> bool:
    return isinstance(name, str) and name != "" and name[0] in LETTERS and all(ch in NAME_CHARS for ch in name)


def is_variant(name: object) -> bool:
    """Whether `name` is a prompt variant's name (``:VARIANT``)."""
    return isinstance(name, str) and name != "" and name[0] in LETTERS and all(ch in VARIANT_CHARS for ch in name)


class _NodeBase:
    """Shared behaviour of the tree nodes: ``str(node)`` is the canonical name."""

    __slots__ = ()

    def __str__(self) -> str:
        return to_name(self)  # type: ignore[arg-type]


def _check_child(owner: str, child: object) -> None:
    if not isinstance(child, _NodeBase):
        raise RetrieverError(f"{owner} needs a retriever tree node as child, got {type(child).__name__}")
    if isinstance(child, Prompted):
        raise RetrieverError(f"{owner} cannot hold a prompt variant: ':{child.variant}' ends a member's name")


def _check_children(owner: str, node: Concat | Fuse, *, flat: bool) -> None:
    """A tuple of at least two children; with `flat`, none of `owner`'s own kind (see `concat`)."""
    if not isinstance(node.children, tuple):
        if isinstance(node.children, str | bytes) or not isinstance(node.children, Iterable):
            raise RetrieverError(f"{owner} needs a tuple of children, got {type(node.children).__name__}")
        object.__setattr__(node, "children", tuple(node.children))
    if len(node.children) < 2:
        raise RetrieverError(f"{owner} needs at least 2 children, got {len(node.children)}")
    for child in node.children:
        _check_child(owner, child)
        if flat and isinstance(child, type(node)):
            raise RetrieverError(f"{owner} children must not be {owner} nodes: flatten them (see {owner.lower()}())")


@dataclass(frozen=True, slots=True)
class Source(_NodeBase):
    """A base knowledge source named in the registry, e.g. ``SE``, ``Wiki``, ``PK``, ``HB``, ``ReFree``."""

    name: str

    def __post_init__(self) -> None:
        if not _is_source_name(self.name):
            raise RetrieverError(
                f"invalid source name {self.name!r}: it must start with an ASCII letter followed by letters, "
                "digits, '_', '-' or '.'"
            )


@dataclass(frozen=True, slots=True)
class Rerank(_NodeBase):
    """``@RR``: rerank the child's chunks against the query."""

    child: Node

    def __post_init__(self) -> None:
        _check_child("Rerank", self.child)


@dataclass(frozen=True, slots=True)
class Apply(_NodeBase):
    """``@WORD``: an operator added by `retrievers.operator_type.register_operator`, over the child."""

    child: Node
    operator: str

    def __post_init__(self) -> None:
        _check_child("Apply", self.child)
        if not _is_operator_word(self.operator):
            raise RetrieverError(
                f"Apply needs an operator word (a letter, then letters or digits; not RR or CP), got {self.operator!r}"
            )


@dataclass(frozen=True, slots=True)
class TopK(_NodeBase):
    """``@k``: keep the child's first ``k`` chunks."""

    child: Node
    k: int

    def __post_init__(self) -> None:
        _check_child("TopK", self.child)
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise RetrieverError(f"TopK needs a positive integer k, got {self.k!r}")
        if self.k >= 10**MAX_K_DIGITS:
            raise RetrieverError(f"TopK k={self.k} has more than {MAX_K_DIGITS} digits")


@dataclass(frozen=True, slots=True)
class Concat(_NodeBase):
    """``&``: concatenate the chunks of two or more children, in order.

    The tree is kept flat: no child is itself a `Concat` (use `concat` to build one from any nodes).
    """

    children: tuple[Node, ...]

    def __post_init__(self) -> None:
        _check_children("Concat", self, flat=True)


@dataclass(frozen=True, slots=True)
class Fuse(_NodeBase):
    """``+``: one ranked list from two or more, by reciprocal rank fusion (retrievers.operators.Fuse).

    Not flattened, unlike `Concat`: fusion is not associative (``(A+B)+C`` fuses A+B's ranking with C's, each
    counted once; ``A+B+C`` counts A, B and C once each), so a parenthesised fusion stays a child."""

    children: tuple[Node, ...]

    def __post_init__(self) -> None:
        _check_children("Fuse", self, flat=False)


@dataclass(frozen=True, slots=True)
class Pick(_NodeBase):
    """``#r``: the child's r-th passage alone (r ≥ 2; the first alone is ``@1``)."""

    child: Node
    rank: int

    def __post_init__(self) -> None:
        _check_child("Pick", self.child)
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 2:
            raise RetrieverError(f"Pick needs a rank of at least 2 (the first passage alone is @1), got {self.rank!r}")
        if self.rank >= 10**MAX_K_DIGITS:
            raise RetrieverError(f"Pick rank={self.rank} has more than {MAX_K_DIGITS} digits")


@dataclass(frozen=True, slots=True)
class Compress(_NodeBase):
    """``@CP``: have the reader summarise the child's text."""

    child: Node

    def __post_init__(self) -> None:
        _check_child("Compress", self.child)


@dataclass(frozen=True, slots=True)
class Prompted(_NodeBase):
    """``:VARIANT``: a member whose evidence (the child's passages) reaches the reader under the answer-prompt
    variant `variant` (eor.core.prompts). Only ever the root of a tree: retrieval is the child's alone."""

    child: Node
    variant: str

    def __post_init__(self) -> None:
        _check_child("Prompted", self.child)
        if not is_variant(self.variant):
            raise RetrieverError(
                f"invalid prompt variant {self.variant!r}: it must start with an ASCII letter followed by letters, "
                "digits, '_' or '-'"
            )


Node: TypeAlias = Source | Rerank | Apply | TopK | Pick | Fuse | Concat | Compress | Prompted
"""Any node of a retriever tree."""


def concat(*nodes: Node) -> Node:
    """Concatenate nodes, flattening nested `Concat` nodes; a single node is returned unchanged."""
    flat: list[Node] = []
    for node in nodes:
        if isinstance(node, Concat):
            flat.extend(node.children)
        else:
            flat.append(node)
    if not flat:
        raise RetrieverError("concat() needs at least one node")
    return flat[0] if len(flat) == 1 else Concat(tuple(flat))


def children(node: Node) -> tuple[Node, ...]:
    """The direct children of ``node`` (empty for a `Source`)."""
    if isinstance(node, Source):
        return ()
    if isinstance(node, Concat | Fuse):
        return node.children
    return (node.child,)


def retrieval_tree(node: Node) -> Node:
    """The tree that retrieves a member's passages: `node` without its prompt variant."""
    return node.child if isinstance(node, Prompted) else node


def variant_of(node: Node) -> str | None:
    """The member's answer-prompt variant (``Wiki@1:fewshot`` -> ``fewshot``), or None for the default prompt."""
    return node.variant if isinstance(node, Prompted) else None


def walk(node: Node) -> Iterator[Node]:
    """Yield every node of the tree, depth first, parents before children, children left to right."""
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def sources(node: Node) -> set[str]:
    """The names of all base sources used by the tree."""
    return {n.name for n in walk(node) if isinstance(n, Source)}


def to_name(node: Node) -> str:
    """Print the canonical name of a tree, with the fewest parentheses that `parse` needs to read it back."""
    match node:
        case Source(name=name):
            return name
        case Rerank() | Apply():
            # Word operators follow a primary (or one another), each at most once per operand.
            word, words = _word(node), _operand_words(node.child)
            inner = to_name(node.child) if words is not None and word not in words else f"({to_name(node.child)})"
            return f"{inner}@{word}"
        case TopK(child=child, k=k):
            # @k (and #r) may follow a primary or word operators.
            return f"{_selected(child)}@{k}"
        case Pick(child=child, rank=rank):
            return f"{_selected(child)}#{rank}"
        case Fuse(children=parts):
            # Operands print as they are; a concatenation, compression or fusion must be grouped.
            return "+".join(f"({to_name(p)})" if isinstance(p, Concat | Compress | Fuse) else to_name(p) for p in parts)
        case Concat(children=parts):
            # Operands and fusions print as they are; a Compress must be grouped (@CP ends a concat).
            return "&".join(f"({to_name(p)})" if isinstance(p, Compress) else to_name(p) for p in parts)
        case Compress(child=child):
            return (f"({to_name(child)})" if isinstance(child, Compress) else to_name(child)) + "@CP"
        case Prompted(child=child, variant=variant):
            return f"{to_name(child)}:{variant}"
    raise RetrieverError(f"to_name needs a retriever tree node, got {type(node).__name__}")


def _selected(child: Node) -> str:
    """`child` as the operand of ``@k`` or ``#r``: grouped unless it is a primary with word operators."""
    return to_name(child) if isinstance(child, Source | Rerank | Apply) else f"({to_name(child)})"


def _word(node: Rerank | Apply) -> str:
    return "RR" if isinstance(node, Rerank) else node.operator


def _operand_words(node: Node) -> set[str] | None:
    """The word operators already applied to the operand that `node` prints as (None: it is no operand's
    primary-and-words, so a word operator over it needs parentheses)."""
    words: set[str] = set()
    while isinstance(node, Rerank | Apply):
        words.add(_word(node))
        node = node.child
    return words if isinstance(node, Source) else None
