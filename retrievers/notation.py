"""The EoR retriever notation (paper section 2.1, appendix C.1): names to trees and back.

A retriever name such as ``SE@RR@5&Wiki@5@CP`` describes a tree of knowledge-processing steps over base
sources.  The notation only turns names into trees of frozen dataclasses and back; it builds no retrievers and
does not check source names against a registry (the builder does both).

This module is where the notation is imported from; two modules do the work: `retrievers.notation_tree` (the
tree types, checked when built, the helpers that walk a tree, and the printer `to_name`) and
`retrievers.notation_parser` (`parse` and its `NotationError`). `canonical_name` joins them.

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
    VARIANT := [A-Za-z] [A-Za-z0-9_-]*               the answer prompt's variant (eor.core.prompts), not retrieval

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

from retrievers.notation_parser import MAX_DEPTH, NotationError, parse
from retrievers.notation_tree import (
    MAX_K_DIGITS,
    Apply,
    Compress,
    Concat,
    Fuse,
    Node,
    Pick,
    Prompted,
    Rerank,
    Source,
    TopK,
    children,
    concat,
    retrieval_tree,
    sources,
    to_name,
    variant_of,
    walk,
)

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


def canonical_name(name: str) -> str:
    """The canonical spelling of a retriever name: ``to_name(parse(name))``."""
    return to_name(parse(name))
