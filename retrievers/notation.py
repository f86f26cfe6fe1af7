"""Parser and printer for the EoR retriever notation (paper section 2.1, appendix C.1).

A retriever name such as ``SE@RR@5&Wiki@5@CP`` describes a tree of knowledge-processing steps over base
sources.  This module only turns names into trees of frozen dataclasses and back; it builds no retrievers and
does not check source names against a registry (the builder does both).

Grammar (``@RR`` > ``@k`` > ``&`` > ``@CP``: rerank first, then top-k, then concatenation, then compression;
eor adds ``#r`` beside ``@k``, ``+`` between ``@k`` and ``&``, and a member's ``:VARIANT`` after everything)::

    name    := expr [ ":" VARIANT ]                  surrounding whitespace is stripped
    expr    := concat [ "@CP" ]                      @CP compresses the whole concatenation before it
    concat  := fusion { "&" fusion }
    fusion  := operand { "+" operand }               reciprocal rank fusion of the operands' ranked lists
    operand := primary { "@" OP } [ "@" K | "#" R ]  word operators first, then top-k or one rank; each once
    primary := SOURCE | "(" expr ")"                 parentheses group, to build trees the flat form cannot
    OP      := "RR" | WORD                           @RR, or an operator added by `register_operator`
    SOURCE  := [A-Za-z] [A-Za-z0-9_.-]*              ASCII only; case-sensitive
    K       := [1-9] [0-9]*                          a positive integer without leading zeros
    R       := K, at least 2                         ``Wiki#2``: Wiki's 2nd passage alone (``#1`` is ``@1``)
    VARIANT := [A-Za-z] [A-Za-z0-9_-]*               the answer prompt's variant (eor.prompts), not retrieval

``#r`` (`Pick`) gives the reader one passage other than the first, so it sees each strong passage on its own.
``+`` (`Fuse`) merges ranked lists by reciprocal rank fusion (Cormack, Clarke and Büttcher 2009): ``(Wiki+
BM25)@1`` is the passage the two rankings agree on best. ``:VARIANT`` (`Prompted`, only at the root) names
how the evidence reaches the reader: ``Wiki@1:fewshot`` retrieves as ``Wiki@1`` and answers under the
config's prompt variant ``fewshot``.

Operators added through `retrievers.operator_type` (a package's `@DEDUP`, say) bind like ``@RR``: they
apply, in the order written, to the operand right before them, so ``BM25@DEDUP@5`` is
``TopK(Apply(Source("BM25"), "DEDUP"), 5)``.  Words that no operator registers are errors.

Decisions:

* Within one operand the postfix operators must appear in priority order and at most once: ``SE@5@RR``,
  ``SE@RR@RR``, ``SE@3@5`` and ``X@CP@CP`` are rejected (an operator out of order is almost certainly a
  misreading of the priority, and a repeated one is redundant or a typo).  The error points at the offending
  ``@`` and suggests the parenthesised spelling that means "apply it again / afterwards", e.g. ``(SE@5)@RR``.
* Nothing may follow ``@CP`` at its nesting level except the end of the name or ``)``: ``X@CP&Y`` must be
  written ``(X@CP)&Y``.
* Operators are case-sensitive (``@rr`` is an error that suggests ``@RR``); source names are case-sensitive.
* Whitespace around the name is stripped; whitespace inside it is an error.  Error positions are 0-based
  indices into the name exactly as given (before stripping).
* Concatenations are flattened: ``(A&B)&C`` parses to ``Concat((A, B, C))``; redundant parentheses are
  accepted and dropped, so ``to_name`` prints the canonical form with the fewest parentheses.
* Parentheses may nest at most ``MAX_DEPTH`` levels, and ``k`` may have at most ``MAX_K_DIGITS`` digits, so
  that no input can exhaust the stack or the int parser.

Every tree ``t`` satisfies ``parse(to_name(t)) == t`` and every canonical name ``x`` satisfies
``to_name(parse(x)) == x``.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NoReturn, TypeAlias, cast

from eor.errors import RetrieverError
from retrievers.operator_type import operator_types

__all__ = [
    "MAX_DEPTH",
    "MAX_K_DIGITS",
    "Apply",
    "Compress",
    "Concat",
    "Fuse",
    "Node",
    "NotationError",
    "Pick",
    "Prompted",
    "Rerank",
    "Source",
    "TopK",
    "retrieval_tree",
    "variant_of",
    "canonical_name",
    "children",
    "concat",
    "parse",
    "sources",
    "to_name",
    "walk",
]

MAX_DEPTH = 100
"""Deepest nesting of parentheses that `parse` accepts."""

MAX_K_DIGITS = 18
"""Most digits allowed in the ``k`` of ``@k``."""

_LETTERS = frozenset(string.ascii_letters)
_DIGITS = frozenset(string.digits)
_NAME_CHARS = _LETTERS | _DIGITS | frozenset("_.-")
_OPERATOR_CHARS = _LETTERS | _DIGITS
_VARIANT_CHARS = _LETTERS | _DIGITS | frozenset("_-")


def _is_operator_word(word: object) -> bool:
    return (
        isinstance(word, str)
        and word[:1] in _LETTERS
        and all(ch in _OPERATOR_CHARS for ch in word)
        and word.upper() not in ("RR", "CP")
    )


def _is_source_name(name: object) -> bool:
    return isinstance(name, str) and name != "" and name[0] in _LETTERS and all(ch in _NAME_CHARS for ch in name)


def _is_variant(name: object) -> bool:
    return isinstance(name, str) and name != "" and name[0] in _LETTERS and all(ch in _VARIANT_CHARS for ch in name)


# ---------------------------------------------------------------------------------------------------------
# AST
# ---------------------------------------------------------------------------------------------------------


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
    variant `variant` (eor.prompts). Only ever the root of a tree: retrieval is the child's alone."""

    child: Node
    variant: str

    def __post_init__(self) -> None:
        _check_child("Prompted", self.child)
        if not _is_variant(self.variant):
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


# ---------------------------------------------------------------------------------------------------------
# Printer
# ---------------------------------------------------------------------------------------------------------


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


def canonical_name(name: str) -> str:
    """The canonical spelling of a retriever name: ``to_name(parse(name))``."""
    return to_name(parse(name))


# ---------------------------------------------------------------------------------------------------------
# Parser
# ---------------------------------------------------------------------------------------------------------


def _display(text: str) -> tuple[str, list[int]]:
    """A one-line rendering of ``text`` and, for each index 0..len, the column where that character starts."""
    pieces: list[str] = []
    columns: list[int] = []
    column = 0
    for ch in text:
        columns.append(column)
        shown = ch if ch.isprintable() else repr(ch)[1:-1]
        pieces.append(shown)
        column += len(shown)
    columns.append(column)
    return "".join(pieces), columns


class NotationError(RetrieverError):
    """A retriever name does not follow the notation.

    Attributes: ``name`` (the text as given), ``position`` (0-based index into it), ``reason`` and ``hint``
    (a suggested fix, or None).  The first line of the message is self-contained; the next lines show the
    name with a caret under the position, then the hint.
    """

    def __init__(self, name: str, position: int, reason: str, hint: str | None = None) -> None:
        self.name = name
        self.position = position
        self.reason = reason
        self.hint = hint
        shown, columns = _display(name)
        caret = columns[min(max(position, 0), len(name))]
        lines = [
            f"invalid retriever name {name!r} at position {position}: {reason}",
            f"    {shown}",
            f"    {' ' * caret}^",
        ]
        if hint:
            lines.append(f"hint: {hint}")
        super().__init__("\n".join(lines))

    def __reduce__(self) -> tuple[type[NotationError], tuple[str, int, str, str | None]]:
        return (type(self), (self.name, self.position, self.reason, self.hint))


class _Parser:
    """Recursive descent over ``text[start:end]``; positions are indices into the full ``text``."""

    def __init__(self, text: str) -> None:
        self.text = text
        stripped = text.lstrip()
        self.start = len(text) - len(stripped)
        self.end = self.start + len(stripped.rstrip())
        self.pos = self.start
        self.depth = 0
        self.op_end = self.start  # end of the operator last read by read_operator()
        self.after_cp = False  # whether the expr just parsed ended with @CP
        self.operators = set(operator_types())  # words of the operators added to the notation

    # -- helpers -------------------------------------------------------------------------------------------

    def fail(self, position: int, reason: str, hint: str | None = None) -> NoReturn:
        raise NotationError(self.text, position, reason, hint)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < self.end else ""

    def regrouped(self, group_start: int, group_end: int) -> str:
        """The stripped name with ``text[group_start:group_end]`` wrapped in parentheses."""
        t = self.text
        return f"{t[self.start : group_start]}({t[group_start:group_end]}){t[group_end : self.end]}"

    def unexpected(self, expected: str) -> NoReturn:
        ch = self.peek()
        if ch == "":
            self.fail(self.pos, f"unexpected end of name: expected {expected}")
        if ch.isspace():
            self.fail(self.pos, "whitespace is not allowed inside a retriever name")
        self.fail(self.pos, f"unexpected {ch!r}: expected {expected}")

    def read_operator(self) -> tuple[str, int | None]:
        """Read ``@...`` at the current position without consuming it: ("RR"|"CP"|"K"|an added operator's
        word, k) and its end (in ``op_end``)."""
        at = self.pos
        i = at + 1
        while i < self.end and self.text[i] in _OPERATOR_CHARS:
            i += 1
        word = self.text[at + 1 : i]
        self.op_end = i
        if word == "":
            self.pos = at + 1
            self.unexpected("RR, CP or a number after '@'")
        if word in ("RR", "CP") or word in self.operators:
            return word, None
        if all(ch in _DIGITS for ch in word):
            if word[0] == "0":
                if word.strip("0") == "":
                    self.fail(at + 1, f"top-k must be a positive integer, got '@{word}'")
                self.fail(
                    at + 1,
                    f"leading zeros are not allowed in '@{word}'",
                    f"write '@{word.lstrip('0')}'",
                )
            if len(word) > MAX_K_DIGITS:
                self.fail(at + 1, f"top-k number in '@{word[:8]}...' has more than {MAX_K_DIGITS} digits")
            return "K", int(word)
        if word.upper() in ("RR", "CP"):
            self.fail(
                at + 1,
                f"unknown operator '@{word}'",
                f"operators are case-sensitive: write '@{word.upper()}'",
            )
        known = "".join(f", {w}" for w in sorted(self.operators))
        self.fail(at + 1, f"unknown operator '@{word}': expected RR{known}, CP or a number after '@'")

    # -- grammar -------------------------------------------------------------------------------------------

    def parse(self) -> Node:
        if self.start == self.end:
            self.fail(0, "the name is empty")
        node = self.expr()
        if self.peek() == ":":
            node = self.variant(node)
        if self.pos < self.end:
            if self.peek() == ")":
                self.fail(self.pos, "unmatched ')'")
            self.unexpected(self.follow_set(top=True))
        return node

    def variant(self, node: Node) -> Node:
        """``:VARIANT`` after the whole member (the parser is at the ':')."""
        colon = self.pos
        self.pos += 1
        begin = self.pos
        while self.pos < self.end and self.text[self.pos] in _VARIANT_CHARS:
            self.pos += 1
        word = self.text[begin : self.pos]
        if not _is_variant(word):
            self.pos = begin
            if word:
                self.fail(begin, f"prompt variants start with a letter, got {word[0]!r}")
            self.unexpected("a prompt variant's name after ':'")
        if self.pos < self.end:
            self.fail(
                self.pos,
                f"nothing may follow the prompt variant ':{word}' (it ends the member's name)",
                f"put ':{word}' at the end: '{self.text[self.start : colon]}{self.text[self.pos : self.end]}:{word}'",
            )
        return Prompted(node, word)

    def follow_set(self, *, top: bool) -> str:
        closing = "':' (a prompt variant) or the end of the name" if top else "')'"
        if self.after_cp:
            return closing
        return f"'@', '#', '+', '&'{',' if top else ''} or {closing}"

    def expr(self) -> Node:
        expr_start = self.pos
        node = self.concat()
        self.after_cp = False
        if self.peek() == "@":  # operand() stops at '@' only for @CP
            self.read_operator()
            self.pos = self.op_end
            node = Compress(node)
            self.after_cp = True
            if self.peek() == "@":
                at2 = self.pos
                op, k = self.read_operator()
                shown = "@" + (str(k) if op == "K" else op)
                if op == "CP":
                    self.fail(
                        at2,
                        "repeated '@CP'",
                        f"write it once, or use parentheses to compress twice: '{self.regrouped(expr_start, at2)}'",
                    )
                self.fail(
                    at2,
                    f"'{shown}' cannot follow '@CP' (priority @RR > @k > & > @CP: compression comes last)",
                    f"use parentheses to apply it after compression: '{self.regrouped(expr_start, at2)}'",
                )
            if self.peek() == "&":
                amp = self.pos
                self.fail(
                    amp,
                    "'&' cannot follow '@CP' (priority @RR > @k > & > @CP: @CP compresses the whole "
                    "concatenation before it)",
                    f"use parentheses to concatenate a compressed retriever: '{self.regrouped(expr_start, amp)}'",
                )
        return node

    def concat(self) -> Node:
        parts = [self.fusion()]
        while self.peek() == "&":
            self.pos += 1
            parts.append(self.fusion())
        return concat(*parts)

    def fusion(self) -> Node:
        parts = [self.operand()]
        while self.peek() == "+":
            self.pos += 1
            parts.append(self.operand())
        return parts[0] if len(parts) == 1 else Fuse(tuple(parts))

    def operand(self) -> Node:
        operand_start = self.pos
        node = self.primary()
        applied: set[str] = set()  # word operators of this operand
        topk_text = ""
        while self.peek() == "@":
            at = self.pos
            op, k = self.read_operator()
            if op == "CP":
                break  # handled by expr(), which owns the whole concatenation
            regrouped = self.regrouped(operand_start, at)
            if op == "K":
                if topk_text:
                    self.fail(
                        at,
                        f"repeated top-k: '@{k}' after '{topk_text}'",
                        f"keep one '@k', or use parentheses to truncate twice: '{regrouped}'",
                    )
                topk_text = f"@{k}"
                node = TopK(node, cast(int, k))  # read_operator gives "K" with its number
            else:
                verb = "rerank" if op == "RR" else f"apply @{op}"
                if op in applied:
                    hint = f"write it once, or use parentheses to {verb} twice: '{regrouped}'"
                    self.fail(at, f"repeated '@{op}'", hint)
                if topk_text:
                    self.fail(
                        at,
                        f"'@{op}' must come before '{topk_text}' (priority @RR > @k > & > @CP)",
                        f"use parentheses to {verb} after truncating: '{regrouped}'",
                    )
                applied.add(op)
                node = Rerank(node) if op == "RR" else Apply(node, op)
            self.pos = self.op_end
        if self.peek() == "#":
            node = self.pick(node, operand_start, topk_text)
        return node

    def pick(self, node: Node, operand_start: int, topk_text: str) -> Node:
        """``#r`` at the end of an operand (the parser is at the '#')."""
        hash_at = self.pos
        if topk_text:
            self.fail(
                hash_at,
                f"'#' after '{topk_text}': an operand keeps its top k or one rank, not both",
                f"use parentheses to pick from the top k: '{self.regrouped(operand_start, hash_at)}'",
            )
        i = hash_at + 1
        while i < self.end and self.text[i] in _DIGITS:
            i += 1
        digits = self.text[hash_at + 1 : i]
        if not digits:
            self.pos = hash_at + 1
            self.unexpected("a rank (2, 3, ...) after '#'")
        if digits[0] == "0":
            self.fail(hash_at + 1, f"a rank must be a positive integer without leading zeros, got '#{digits}'")
        if len(digits) > MAX_K_DIGITS:
            self.fail(hash_at + 1, f"rank in '#{digits[:8]}...' has more than {MAX_K_DIGITS} digits")
        if digits == "1":
            self.fail(hash_at, "'#1' is the first passage alone, which is '@1'", "write '@1'")
        self.pos = i
        if self.peek() == "#" or (self.peek() == "@" and self.read_operator()[0] != "CP"):
            self.fail(
                self.pos,
                f"nothing but '@CP', '+', '&' or ':' may follow '#{digits}' in its operand",
                f"use parentheses to go on from the picked passage: '{self.regrouped(operand_start, self.pos)}'",
            )
        return Pick(node, int(digits))

    def primary(self) -> Node:
        ch = self.peek()
        if ch == "(":
            open_at = self.pos
            if self.depth >= MAX_DEPTH:
                self.fail(open_at, f"parentheses nested more than {MAX_DEPTH} levels deep")
            self.depth += 1
            self.pos += 1
            if self.peek() == ")":
                self.fail(self.pos, "empty parentheses: expected a source name or '('")
            node = self.expr()
            if self.peek() != ")":
                if self.pos >= self.end:
                    self.fail(self.pos, f"missing ')' to close the '(' at position {open_at}")
                self.unexpected(self.follow_set(top=False))
            self.pos += 1
            self.depth -= 1
            self.after_cp = False
            return node
        if ch in _LETTERS:
            begin = self.pos
            while self.pos < self.end and self.text[self.pos] in _NAME_CHARS:
                self.pos += 1
            return Source(self.text[begin : self.pos])
        if ch in _DIGITS or ch in ("_", ".", "-"):
            self.fail(self.pos, f"source names must start with a letter, got {ch!r}")
        self.unexpected("a source name or '('")


def parse(name: str) -> Node:
    """Parse a member's name into its tree (`Prompted` at the root when it names a prompt variant); raise
    `NotationError` pointing at the problem if malformed."""
    if not isinstance(name, str):
        raise NotationError(repr(name), 0, f"a retriever name must be a string, got {type(name).__name__}")
    return _Parser(name).parse()
