"""The parser of the retriever notation: a member's name to its tree (retrievers.notation_tree), by recursive
descent over the grammar in retrievers.notation's docstring, or a `NotationError` that points at the problem.

Two layers: `_Scanner` is the cursor over the name (where it is, what comes next, the operator after an
``@``, and errors placed at a position with a suggested fix); `_Parser` follows the grammar, one method per
rule, and enforces the notation's decisions (priority order, nothing after ``@CP`` or a prompt variant).
"""

from __future__ import annotations

from typing import NoReturn, cast

from eor.core.errors import RetrieverError
from retrievers.notation_tree import (
    DIGITS,
    LETTERS,
    MAX_K_DIGITS,
    NAME_CHARS,
    OPERATOR_CHARS,
    VARIANT_CHARS,
    Apply,
    Compress,
    Fuse,
    Node,
    Pick,
    Prompted,
    Rerank,
    Source,
    TopK,
    concat,
    is_variant,
)
from retrievers.operator_type import operator_types

MAX_DEPTH = 100
"""Deepest nesting of parentheses that `parse` accepts."""


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


class _Scanner:
    """A cursor over ``text[start:end]`` (the name without surrounding whitespace); positions are indices into
    the full ``text``, as errors report them."""

    def __init__(self, text: str) -> None:
        self.text = text
        stripped = text.lstrip()
        self.start = len(text) - len(stripped)
        self.end = self.start + len(stripped.rstrip())
        self.pos = self.start
        self.op_end = self.start  # end of the operator last read by read_operator()
        self.operators = set(operator_types())  # words of the operators added to the notation

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
        while i < self.end and self.text[i] in OPERATOR_CHARS:
            i += 1
        word = self.text[at + 1 : i]
        self.op_end = i
        if word == "":
            self.pos = at + 1
            self.unexpected("RR, CP or a number after '@'")
        if word in ("RR", "CP") or word in self.operators:
            return word, None
        if all(ch in DIGITS for ch in word):
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


class _Parser(_Scanner):
    """Recursive descent over the scanned name, one method per rule of the grammar."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.depth = 0
        self.after_cp = False  # whether the expr just parsed ended with @CP

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
        while self.pos < self.end and self.text[self.pos] in VARIANT_CHARS:
            self.pos += 1
        word = self.text[begin : self.pos]
        if not is_variant(word):
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
        while i < self.end and self.text[i] in DIGITS:
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
        if ch in LETTERS:
            begin = self.pos
            while self.pos < self.end and self.text[self.pos] in NAME_CHARS:
                self.pos += 1
            return Source(self.text[begin : self.pos])
        if ch in DIGITS or ch in ("_", ".", "-"):
            self.fail(self.pos, f"source names must start with a letter, got {ch!r}")
        self.unexpected("a source name or '('")


def parse(name: str) -> Node:
    """Parse a member's name into its tree (`Prompted` at the root when it names a prompt variant); raise
    `NotationError` pointing at the problem if malformed."""
    if not isinstance(name, str):
        raise NotationError(repr(name), 0, f"a retriever name must be a string, got {type(name).__name__}")
    return _Parser(name).parse()
