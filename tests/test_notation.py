"""Tests for retrievers.notation: the parser and printer of the EoR retriever notation."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eor.core.errors import EorError, RetrieverError
from retrievers.notation import (
    MAX_DEPTH,
    Apply,
    Compress,
    Concat,
    Fuse,
    Node,
    NotationError,
    Pick,
    Prompted,
    Rerank,
    Source,
    TopK,
    canonical_name,
    children,
    concat,
    parse,
    retrieval_tree,
    sources,
    to_name,
    variant_of,
    walk,
)
from retrievers.operator_type import OperatorType, register_operator, unregister_operator

SE, WIKI, PK, BM25, HB = Source("SE"), Source("Wiki"), Source("PK"), Source("BM25"), Source("HB")

# The retrievers of appendix C.1 and section 2.1 (plus ReFree and a few more), with their expected trees.
EXPECTED: dict[str, Node] = {
    "SE@RR@5&Wiki@5@CP": Compress(Concat((TopK(Rerank(SE), 5), TopK(WIKI, 5)))),
    "HB@RR@10": TopK(Rerank(HB), 10),
    "Wiki@10@CP": Compress(TopK(WIKI, 10)),
    "SE@2&Wiki@5": Concat((TopK(SE, 2), TopK(WIKI, 5))),
    "BM25@2&Wiki@2": Concat((TopK(BM25, 2), TopK(WIKI, 2))),
    "BM25@3": TopK(BM25, 3),
    "Wiki@1": TopK(WIKI, 1),
    "Wiki@10": TopK(WIKI, 10),
    "PK": PK,
    "ReFree": Source("ReFree"),
    "SE@1": TopK(SE, 1),
    "SE@4": TopK(SE, 4),
    "SE@RR@10": TopK(Rerank(SE), 10),
    "SE@RR@5&Wiki@5": Concat((TopK(Rerank(SE), 5), TopK(WIKI, 5))),
    "HB@RR@10@CP": Compress(TopK(Rerank(HB), 10)),
    "SE@4@CP": Compress(TopK(SE, 4)),
    "SE@1@CP": Compress(TopK(SE, 1)),
    "SE@RR@10@CP": Compress(TopK(Rerank(SE), 10)),
    "SE@2&Wiki@5@CP": Compress(Concat((TopK(SE, 2), TopK(WIKI, 5)))),
    # Grouping with parentheses.
    "(BM25@3&Wiki@3)@RR@2": TopK(Rerank(Concat((TopK(BM25, 3), TopK(WIKI, 3)))), 2),
    "(Wiki@10@CP)&PK": Concat((Compress(TopK(WIKI, 10)), PK)),
    "(SE@5)@RR": Rerank(TopK(SE, 5)),
    "(SE@RR)@RR": Rerank(Rerank(SE)),
    "(SE@3)@5": TopK(TopK(SE, 3), 5),
    "(PK@CP)@CP": Compress(Compress(PK)),
    "(SE@CP)@RR@3": TopK(Rerank(Compress(SE)), 3),
    "(SE&Wiki)@4": TopK(Concat((SE, WIKI)), 4),
    "SE@RR&Wiki@RR&PK": Concat((Rerank(SE), Rerank(WIKI), PK)),
    "SE@CP": Compress(SE),
    "SE@RR@CP": Compress(Rerank(SE)),
    "(SE@1&Wiki@1)@RR&PK@CP": Compress(Concat((Rerank(Concat((TopK(SE, 1), TopK(WIKI, 1)))), PK))),
    "my_src-2.v1@RR": Rerank(Source("my_src-2.v1")),
    "RR@RR": Rerank(Source("RR")),
}

# The 15 retrievers of appendix C.1, plus ReFree and the two BM25 ones named in the brief.
PAPER_NAMES = [
    "Wiki@10", "SE@1", "SE@4", "PK", "SE@RR@10", "SE@2&Wiki@5", "SE@RR@5&Wiki@5", "HB@RR@10",
    "Wiki@10@CP", "SE@1@CP", "SE@4@CP", "SE@RR@10@CP", "SE@2&Wiki@5@CP", "SE@RR@5&Wiki@5@CP", "HB@RR@10@CP",
    "ReFree", "BM25@2&Wiki@2", "BM25@3", "Wiki@1",
]  # fmt: skip


@pytest.mark.parametrize("name", list(EXPECTED))
def test_parse_gives_expected_tree(name: str) -> None:
    assert parse(name) == EXPECTED[name]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_canonical_names_round_trip(name: str) -> None:
    assert to_name(parse(name)) == name
    assert to_name(EXPECTED[name]) == name
    assert str(EXPECTED[name]) == name


@pytest.mark.parametrize("name", PAPER_NAMES)
def test_paper_names_parse_and_round_trip(name: str) -> None:
    tree = parse(name)
    assert to_name(tree) == name
    assert parse(to_name(tree)) == tree


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("  SE@RR@5&Wiki@5@CP \n", "SE@RR@5&Wiki@5@CP"),
        ("\tPK", "PK"),
        ("(SE)", "SE"),
        ("((SE@5))", "SE@5"),
        ("(SE@RR)@5", "SE@RR@5"),
        ("(SE&Wiki)&PK", "SE&Wiki&PK"),
        ("SE&(Wiki&(PK))", "SE&Wiki&PK"),
        ("((SE&Wiki@2)@CP)", "SE&Wiki@2@CP"),
        ("(SE@RR@5&Wiki@5)@CP", "SE@RR@5&Wiki@5@CP"),
    ],
)
def test_non_canonical_spellings(name: str, canonical: str) -> None:
    assert canonical_name(name) == canonical
    assert parse(name) == parse(canonical)


EORS_OWN: dict[str, Node] = {
    "Wiki#2": Pick(WIKI, 2),
    "BM25@RR#3": Pick(Rerank(BM25), 3),
    "(Wiki@5)#2": Pick(TopK(WIKI, 5), 2),
    "(Wiki+BM25)@1": TopK(Fuse((WIKI, BM25)), 1),
    "(Wiki+BM25+SE)#2": Pick(Fuse((WIKI, BM25, SE)), 2),
    "Wiki+BM25@3&PK": Concat((Fuse((WIKI, TopK(BM25, 3))), PK)),
    "(Wiki&BM25)+PK": Fuse((Concat((WIKI, BM25)), PK)),
    "Wiki+BM25@CP": Compress(Fuse((WIKI, BM25))),
    "Wiki#2@CP": Compress(Pick(WIKI, 2)),
    "Wiki@1:fewshot": Prompted(TopK(WIKI, 1), "fewshot"),
    "(Wiki+BM25)@1:q-first_2": Prompted(TopK(Fuse((WIKI, BM25)), 1), "q-first_2"),
    "Wiki@3@CP:fs": Prompted(Compress(TopK(WIKI, 3)), "fs"),
    "ReFree:fs": Prompted(Source("ReFree"), "fs"),
}


@pytest.mark.parametrize("name", list(EORS_OWN))
def test_eors_own_operators_parse_and_round_trip(name: str) -> None:
    """`#r` (one passage alone), `+` (reciprocal rank fusion) and `:VARIANT` (the answer prompt's variant)."""
    assert parse(name) == EORS_OWN[name]
    assert to_name(EORS_OWN[name]) == name


def test_fusion_binds_between_topk_and_concat() -> None:
    assert parse("Wiki@1+BM25@1&PK@1") == Concat((Fuse((TopK(WIKI, 1), TopK(BM25, 1))), TopK(PK, 1)))
    # Not flattened: fusing A+B's ranking with C's is not fusing A, B and C.
    assert parse("((Wiki+BM25)+SE)@2") == TopK(Fuse((Fuse((WIKI, BM25)), SE)), 2)
    assert canonical_name("((Wiki+BM25)+SE)@2") == "((Wiki+BM25)+SE)@2"
    assert parse("(Wiki+BM25+SE)@2") == TopK(Fuse((WIKI, BM25, SE)), 2)
    assert canonical_name("((Wiki+BM25))@1") == "(Wiki+BM25)@1"


def test_a_variant_is_the_members_not_retrievals() -> None:
    tree = parse("(Wiki+BM25)@1:fewshot")
    assert variant_of(tree) == "fewshot" and variant_of(parse("Wiki@1")) is None
    assert retrieval_tree(tree) == parse("(Wiki+BM25)@1")
    assert sources(tree) == {"Wiki", "BM25"}
    with pytest.raises(RetrieverError, match="cannot hold a prompt variant"):
        TopK(Prompted(WIKI, "fs"), 1)
    with pytest.raises(RetrieverError, match="cannot hold a prompt variant"):
        Concat((Prompted(WIKI, "fs"), BM25))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Pick(WIKI, 1), "at least 2"),
        (lambda: Pick(WIKI, True), "at least 2"),
        (lambda: Fuse((WIKI,)), "at least 2"),
        (lambda: Prompted(WIKI, "1x"), "invalid prompt variant"),
        (lambda: Prompted(WIKI, "a:b"), "invalid prompt variant"),
    ],
)
def test_new_nodes_validate(make, message: str) -> None:
    with pytest.raises(RetrieverError, match=message):
        make()


def test_concat_is_flattened() -> None:
    assert parse("(A&B)&C&(D&E)") == Concat((Source("A"), Source("B"), Source("C"), Source("D"), Source("E")))


# name, position, fragment of the first line of the message
MALFORMED: list[tuple[str, int, str]] = [
    ("", 0, "empty"),
    ("   ", 0, "empty"),
    ("SE@@5", 3, "expected RR, CP or a number after '@'"),
    ("SE@", 3, "expected RR, CP or a number after '@'"),
    ("SE@0", 3, "positive integer"),
    ("SE@00", 3, "positive integer"),
    ("SE@05", 3, "leading zeros"),
    ("SE@XY", 3, "unknown operator '@XY'"),
    ("SE@rr", 3, "unknown operator '@rr'"),
    ("SE@cp", 3, "unknown operator '@cp'"),
    ("SE@5x", 3, "unknown operator '@5x'"),
    ("SE@-1", 3, "expected RR, CP or a number"),
    ("SE@" + "9" * 40, 3, "digits"),
    ("SE@" + "9" * 5000, 3, "digits"),
    ("SE&", 3, "expected a source name"),
    ("&SE", 0, "expected a source name"),
    ("SE&&Wiki", 3, "expected a source name"),
    ("SE&@5", 3, "expected a source name"),
    ("@RR", 0, "expected a source name"),
    ("5SE", 0, "must start with a letter"),
    ("_SE", 0, "must start with a letter"),
    ("SE@5@RR", 4, "'@RR' must come before '@5'"),
    ("SE@RR@5&Wiki@5@RR", 14, "'@RR' must come before '@5'"),
    ("SE@RR@RR", 5, "repeated '@RR'"),
    ("SE@3@5", 4, "repeated top-k"),
    ("X@CP@CP", 4, "repeated '@CP'"),
    ("X@CP@RR", 4, "cannot follow '@CP'"),
    ("X@CP@5", 4, "cannot follow '@CP'"),
    ("X@CP&Y", 4, "'&' cannot follow '@CP'"),
    ("SE@2&Wiki@5@CP&PK", 14, "'&' cannot follow '@CP'"),
    ("(SE", 3, "missing ')' to close the '(' at position 0"),
    ("((SE)", 5, "missing ')' to close the '(' at position 0"),
    ("(SE@5&Wiki", 10, "missing ')'"),
    ("SE)", 2, "unmatched ')'"),
    ("(SE))", 4, "unmatched ')'"),
    (")", 0, "expected a source name"),
    ("()", 1, "empty parentheses"),
    ("SE()", 2, "unexpected '('"),
    ("(SE)Wiki", 4, "unexpected 'W'"),
    ("(SE Wiki)", 3, "whitespace"),
    ("SE @5", 2, "whitespace"),
    ("SE@ 5", 3, "whitespace"),
    ("SE@5 & Wiki", 4, "whitespace"),
    ("  SE @5", 4, "whitespace"),
    ("SE\t@5", 2, "whitespace"),
    ("SE#", 3, "expected a rank (2, 3, ...) after '#'"),
    ("SE#1", 2, "'#1' is the first passage alone"),
    ("SE@3#2", 4, "an operand keeps its top k or one rank"),
    ("SE#2@RR", 4, "nothing but '@CP'"),
    ("SE#02", 3, "without leading zeros"),
    ("SE+", 3, "expected a source name"),
    ("SE:", 3, "a prompt variant's name"),
    ("SE:1a", 3, "prompt variants start with a letter"),
    ("SE:a@1", 4, "nothing may follow the prompt variant"),
    ("(SE:a)", 3, "unexpected ':'"),
    ("SE@CP+PK", 5, "unexpected '+'"),
    ("SE#2@CPX", 5, "unknown operator '@CPX'"),
    ("Wikipédia", 5, "unexpected 'é'"),
    ("(PK@CP Wiki)", 6, "whitespace"),
    ("(PK@CP&Wiki)", 6, "'&' cannot follow '@CP'"),
    ("(" * (MAX_DEPTH + 1) + "SE" + ")" * (MAX_DEPTH + 1), MAX_DEPTH, "nested"),
]


@pytest.mark.parametrize(("name", "position", "fragment"), MALFORMED)
def test_malformed_names(name: str, position: int, fragment: str) -> None:
    with pytest.raises(NotationError) as info:
        parse(name)
    err = info.value
    assert err.name == name
    assert err.position == position
    first, *rest = str(err).split("\n")
    assert first.startswith(f"invalid retriever name {name!r} at position {position}: ")
    assert fragment in first
    # The caret sits under the offending character of the displayed name.
    shown, caret = rest[0], rest[1]
    assert caret.strip() == "^"
    if name.isprintable():
        assert shown == "    " + name
        assert caret == " " * (4 + position) + "^"


def test_error_message_example_from_brief() -> None:
    with pytest.raises(NotationError) as info:
        parse("SE@@5")
    first = str(info.value).split("\n")[0]
    assert first.startswith("invalid retriever name 'SE@@5' at position 3:")
    assert first.endswith("expected RR, CP or a number after '@'")


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("SE@5@RR", "(SE@5)@RR"),
        ("SE@RR@5&Wiki@5@RR", "SE@RR@5&(Wiki@5)@RR"),
        ("SE@RR@RR", "(SE@RR)@RR"),
        ("SE@3@5", "(SE@3)@5"),
        ("X@CP@CP", "(X@CP)@CP"),
        ("X@CP&Y", "(X@CP)&Y"),
        (" SE@2&Wiki@5@CP&PK ", "(SE@2&Wiki@5@CP)&PK"),
        ("SE@05", "@5"),
        ("SE@rr", "@RR"),
    ],
)
def test_hints(name: str, hint: str) -> None:
    with pytest.raises(NotationError) as info:
        parse(name)
    assert info.value.hint is not None and hint in info.value.hint
    assert f"hint: {info.value.hint}" in str(info.value)


def test_hinted_fixes_parse() -> None:
    assert parse("(SE@5)@RR") == Rerank(TopK(SE, 5))
    assert parse("SE@RR@5&(Wiki@5)@RR") == Concat((TopK(Rerank(SE), 5), Rerank(TopK(WIKI, 5))))


def test_error_family_and_pickling() -> None:
    with pytest.raises(NotationError) as info:
        parse("SE@5@RR")
    err = info.value
    assert isinstance(err, RetrieverError) and isinstance(err, EorError)
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.name, copy.position, copy.reason, copy.hint, str(copy)) == (
        err.name,
        err.position,
        err.reason,
        err.hint,
        str(err),
    )


def test_non_string_is_a_notation_error() -> None:
    with pytest.raises(NotationError, match="must be a string"):
        parse(5)  # type: ignore[arg-type]


def test_caret_with_unprintable_characters() -> None:
    with pytest.raises(NotationError) as info:
        parse("SE\x00@5")
    _, shown, caret, *_ = str(info.value).split("\n")
    assert shown == "    SE\\x00@5"
    assert caret == "      ^"


def test_nesting_up_to_the_limit_is_accepted() -> None:
    name = "(" * MAX_DEPTH + "SE" + ")" * MAX_DEPTH
    assert parse(name) == SE


# --- AST ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "1SE", "S E", "SE@", "Wikipédia", "-x", 3])
def test_source_rejects_bad_names(bad: object) -> None:
    with pytest.raises(RetrieverError):
        Source(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [0, -1, True, 2.0, "3", 10**18])
def test_topk_rejects_bad_k(k: object) -> None:
    with pytest.raises(RetrieverError):
        TopK(SE, k)  # type: ignore[arg-type]


def test_concat_validation() -> None:
    with pytest.raises(RetrieverError):
        Concat((SE,))
    with pytest.raises(RetrieverError):
        Concat(())
    with pytest.raises(RetrieverError):
        Concat((SE, Concat((WIKI, PK))))
    with pytest.raises(RetrieverError):
        Concat((SE, "Wiki"))  # type: ignore[arg-type]
    with pytest.raises(RetrieverError):
        Rerank("SE")  # type: ignore[arg-type]
    assert Concat([SE, WIKI]) == Concat((SE, WIKI))  # type: ignore[arg-type]


def test_concat_helper_flattens() -> None:
    assert concat(SE) == SE
    assert concat(Concat((SE, WIKI)), PK) == Concat((SE, WIKI, PK))
    assert concat(SE, Concat((WIKI, PK)), HB) == Concat((SE, WIKI, PK, HB))
    with pytest.raises(RetrieverError):
        concat()


def test_nodes_are_frozen_and_hashable() -> None:
    tree = parse("SE@RR@5&Wiki@5@CP")
    with pytest.raises(AttributeError):
        tree.child = SE  # type: ignore[misc]
    assert len({tree, parse("SE@RR@5&Wiki@5@CP"), parse("SE@RR@5&Wiki@5")}) == 2


def test_walk_and_children() -> None:
    tree = parse("SE@RR@5&Wiki@5@CP")
    assert list(walk(tree)) == [
        tree,
        tree.child,
        TopK(Rerank(SE), 5),
        Rerank(SE),
        SE,
        TopK(WIKI, 5),
        WIKI,
    ]
    assert children(SE) == ()
    assert children(tree) == (Concat((TopK(Rerank(SE), 5), TopK(WIKI, 5))),)
    assert list(walk(PK)) == [PK]


def test_sources() -> None:
    assert sources(parse("SE@RR@5&Wiki@5@CP")) == {"SE", "Wiki"}
    assert sources(parse("(SE@2&SE@RR@3@CP)&PK")) == {"SE", "PK"}
    assert sources(parse("ReFree")) == {"ReFree"}


# --- Fuzzing --------------------------------------------------------------------------------------------

NOTATION_ALPHABET = "SEWikPBM25@RC&()0123456789 #+:f"


def _check_text(text: str) -> None:
    try:
        tree = parse(text)
    except NotationError as err:
        assert err.name == text
        assert 0 <= err.position <= len(text)
        assert str(err).startswith(f"invalid retriever name {text!r} at position {err.position}: ")
        return
    name = to_name(tree)
    assert parse(name) == tree
    assert to_name(parse(name)) == name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_fuzz_any_text(text: str) -> None:
    _check_text(text)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=NOTATION_ALPHABET, max_size=40))
def test_fuzz_notation_alphabet(text: str) -> None:
    _check_text(text)


_TOKENS = [
    "SE",
    "Wiki",
    "PK",
    "BM25",
    "@RR",
    "@CP",
    "@5",
    "@10",
    "@0",
    "@",
    "&",
    "(",
    ")",
    " ",
    "#2",
    "#",
    "+",
    ":fs",
    ":",
]


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_TOKENS), max_size=16).map("".join))
def test_fuzz_token_soup(text: str) -> None:
    # Token-level text reaches deeper into the grammar than character-level text does.
    _check_text(text)


_source_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_.\-]{0,6}", fullmatch=True)


def _extend(inner: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    return st.one_of(
        st.builds(Rerank, inner),
        st.builds(TopK, inner, st.integers(min_value=1, max_value=10**6)),
        st.builds(Pick, inner, st.integers(min_value=2, max_value=10**6)),
        st.builds(Compress, inner),
        st.lists(inner, min_size=2, max_size=4).map(lambda parts: concat(*parts)),
        st.lists(inner, min_size=2, max_size=4).map(lambda parts: Fuse(tuple(parts))),
    )


_variants = st.from_regex(r"[A-Za-z][A-Za-z0-9_\-]{0,6}", fullmatch=True)
retrieval_trees: st.SearchStrategy[Node] = st.recursive(st.builds(Source, _source_names), _extend, max_leaves=12)
trees: st.SearchStrategy[Node] = st.one_of(retrieval_trees, st.builds(Prompted, retrieval_trees, _variants))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees)
def test_random_trees_round_trip(tree: Node) -> None:
    name = to_name(tree)
    assert parse(name) == tree
    assert to_name(parse(name)) == name
    # Canonical names carry no whitespace and survive surrounding whitespace.
    assert name == name.strip() and " " not in name
    assert parse(f"  {name}\n") == tree


# --- Operators added by other code (retrievers.operator_type) -------------------------------------------


@pytest.fixture(scope="module")
def added_operators() -> Iterator[None]:
    def identity(child: object, context: object) -> object:
        return child

    for word in ("DD", "Mx2"):
        register_operator(OperatorType(word, identity, "for the notation tests"))
    yield
    for word in ("DD", "Mx2"):
        unregister_operator(word)


ADDED = {
    "BM25@DD": Apply(Source("BM25"), "DD"),
    "BM25@DD@5": TopK(Apply(Source("BM25"), "DD"), 5),
    "BM25@RR@DD@5": TopK(Apply(Rerank(Source("BM25")), "DD"), 5),
    "BM25@DD@RR": Rerank(Apply(Source("BM25"), "DD")),
    "BM25@DD@Mx2&Wiki@2": Concat((Apply(Apply(Source("BM25"), "DD"), "Mx2"), TopK(Source("Wiki"), 2))),
    "(BM25&Wiki)@DD": Apply(Concat((Source("BM25"), Source("Wiki"))), "DD"),
    "(BM25@DD)@DD": Apply(Apply(Source("BM25"), "DD"), "DD"),
    "(BM25@5)@DD": Apply(TopK(Source("BM25"), 5), "DD"),
    "(BM25@DD@CP)@DD": Apply(Compress(Apply(Source("BM25"), "DD")), "DD"),
}


@pytest.mark.parametrize("name", list(ADDED))
def test_added_operators_parse_and_print(added_operators: None, name: str) -> None:
    assert parse(name) == ADDED[name]
    assert to_name(ADDED[name]) == name


@pytest.mark.parametrize(
    ("name", "position", "fragment"),
    [
        ("BM25@5@DD", 6, "'@DD' must come before '@5'"),
        ("BM25@DD@DD", 7, "repeated '@DD'"),
        ("BM25@dd", 5, "unknown operator '@dd': expected RR, DD, Mx2, CP or a number after '@'"),
        ("BM25@CP@DD", 7, "'@DD' cannot follow '@CP'"),
        ("BM25#2@DD", 6, "nothing but '@CP', '+', '&' or ':' may follow '#2'"),
    ],
)
def test_added_operators_follow_the_grammar(added_operators: None, name: str, position: int, fragment: str) -> None:
    with pytest.raises(NotationError) as info:
        parse(name)
    assert info.value.position == position
    assert fragment in str(info.value).splitlines()[0]


def test_unregistered_words_are_errors() -> None:
    with pytest.raises(NotationError, match="unknown operator '@ZZ'"):
        parse("BM25@ZZ")


@pytest.mark.parametrize("word", ["RR", "cp", "1X", "", "D-D", "DÉ"])
def test_operator_words_are_checked(word: str) -> None:
    with pytest.raises(EorError):
        OperatorType(word, lambda child, context: child)
    with pytest.raises(RetrieverError):
        Apply(Source("BM25"), word)


def _extend_with_added(inner: st.SearchStrategy[Node]) -> st.SearchStrategy[Node]:
    return st.one_of(_extend(inner), st.builds(Apply, inner, st.sampled_from(["DD", "Mx2"])))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.recursive(st.builds(Source, _source_names), _extend_with_added, max_leaves=12))
def test_random_trees_with_added_operators_round_trip(added_operators: None, tree: Node) -> None:
    name = to_name(tree)
    assert parse(name) == tree
    assert to_name(parse(name)) == name


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from([*_TOKENS, "@DD", "@Mx2"]), max_size=16).map("".join))
def test_fuzz_token_soup_with_added_operators(added_operators: None, text: str) -> None:
    _check_text(text)
