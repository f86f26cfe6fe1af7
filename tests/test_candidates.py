"""The judge's candidates (voters.candidates) from hand-made passages: the members' answers grouped by SQuAD
normalisation, spans by each rule, ranked by their distance (in words) to the question's content words."""

from __future__ import annotations

import pytest

from eor.core.errors import ConfigError, InputError
from voters.candidates import (
    SPAN_RULES,
    Candidate,
    candidates,
    entity_spans,
    ngram_spans,
    phrase_spans,
    pointed_spans,
)

QUESTION = "when is the next deadpool movie being released"
PASSAGES = [
    "Deadpool 2 is scheduled to be released in the United States on May 18, 2018.  A sequel, Deadpool 3, is in "
    "development.",
    "The Battle of Hastings was fought on 14 October 1066; William the Conqueror won.",
]


def test_members_answers_are_grouped_by_normalisation_in_pool_order():
    found = candidates(QUESTION, {"A": "May 18, 2018", "B": "may 18 2018", "C": "", "D": "Deadpool 2"}, PASSAGES)
    assert found == [Candidate("May 18, 2018", ("A", "B")), Candidate("Deadpool 2", ("D",))]


def test_entities_by_hand():
    # question content words: next, deadpool, movie, released (words 0 and 6 of the first passage). "Deadpool 2"
    # and "Deadpool 3" hold one (distance 0); "United States" is 4 words after "released", "May 18, 2018" 7;
    # the second passage has none (distance infinite), its spans in order of occurrence.
    assert entity_spans(QUESTION, PASSAGES) == [
        "Deadpool 2",
        "Deadpool 3",
        "United States",
        "May 18, 2018",
        "Battle of Hastings",
        "14 October 1066",
        "William the Conqueror",
    ]


def test_spans_stay_inside_a_clause_and_skip_the_questions_own_words():
    spans = ngram_spans("who won at hastings", ["Hastings; William won it. The battle of Hastings"])
    assert "Hastings" not in spans and "won" not in spans  # only the question's words
    assert all(";" not in span and "." not in span for span in spans)
    assert "William" in spans and "battle of Hastings" in spans
    assert all(span.split()[0].lower() not in {"the", "of", "it"} for span in spans)
    assert all(span.split()[-1].lower() not in {"the", "of", "it"} for span in spans)


def test_spans_add_at_most_k_new_candidates():
    members = {"A": "Deadpool 3"}
    found = candidates(QUESTION, members, PASSAGES, rule="entities", k=3)
    assert [c.text for c in found] == ["Deadpool 3", "Deadpool 2", "United States", "May 18, 2018"]
    assert [c.rule for c in found] == ["members", "entities", "entities", "entities"]
    assert candidates(QUESTION, members, PASSAGES, rule="entities", k=0) == [Candidate("Deadpool 3", ("A",))]
    with pytest.raises(InputError):
        candidates(QUESTION, members, PASSAGES, rule="entities", k=-1)
    with pytest.raises(ConfigError, match="entities"):
        candidates(QUESTION, members, PASSAGES, rule="nouns", k=3)
    assert list(SPAN_RULES) == ["entities", "ngrams", "phrases", "pointed"]


def test_phrases_reach_common_nouns_and_names_apart_by_a_comma_by_hand():
    question = "where do the optic nerves cross"  # content words: optic, nerves, cross
    passages = [
        "The optic nerves cross at the optic chiasm, where fibres from the nasal half of each retina cross over.",
        "Charles, Prince of Wales visited the middle layer in 1999.",
    ]
    # first passage (words: The0 optic1 nerves2 cross3 at4 the5 optic6 chiasm7 where8 fibres9 from10 the11 nasal12
    # half13 of14 each15 retina16 cross17): "optic chiasm" holds "optic" (distance 0), "nasal half" is 4 words
    # before "cross" (17); "retina" follows "each", no article; the second passage holds no question word: its spans
    # in order of occurrence, the entities first, then the two runs apart by a comma alone, then the noun phrase
    assert phrase_spans(question, passages) == [
        "optic chiasm",
        "nasal half",
        "Charles",
        "Prince of Wales",
        "1999",
        "Charles, Prince of Wales",
        "middle layer",
    ]
    assert "optic chiasm" not in entity_spans(question, passages)
    assert "Charles, Prince of Wales" not in entity_spans(question, passages)
    # a phrase stops at a stop word or a name, and is at most four words long
    assert phrase_spans("what", ["the long green old tree house stands"]) == ["long green old tree"]
    assert phrase_spans("what", ["the old Paris metro"]) == ["Paris", "old"]  # ties: in the order proposed


def test_pointed_leads_with_what_the_members_wrote_by_hand():
    question = "who sings the theme tune to orange is the new black"  # NQ's gold answer: "Spektor"
    answers = {"A": "Regina Spektor", "B": "The theme tune is sung by Regina Spektor, a singer"}
    passages = ["The theme tune, You've Got Time, is written and sung by Regina Spektor. Spektor was born in Moscow."]
    # entities by distance to "theme tune" (words 1-2): You've Got Time (1 word after), Regina Spektor (9),
    # Spektor (11), Moscow (15)
    assert entity_spans(question, passages) == ["You've Got Time", "Regina Spektor", "Spektor", "Moscow"]
    # the members' clauses cut at either end of stop words and the question's words ("The theme tune is" |
    # "sung by Regina Spektor"; "a" | "singer"), then the entities some answer holds, then the others
    assert pointed_spans(question, passages, list(answers.values())) == [
        "Regina Spektor",
        "sung by Regina Spektor",
        "singer",
        "Regina Spektor",
        "Spektor",
        "You've Got Time",
        "Moscow",
    ]
    assert pointed_spans(question, passages) == entity_spans(question, passages)  # no answer: the entities
    found = candidates(question, answers, passages, rule="pointed", k=3)  # what is a candidate already is skipped
    assert [(c.text, c.rule) for c in found[2:]] == [
        ("sung by Regina Spektor", "pointed"),
        ("singer", "pointed"),
        ("Spektor", "pointed"),
    ]
    # the entity rule at the same K reaches the gold answer too, but below a span no member wrote
    assert [c.text for c in candidates(question, answers, passages, rule="entities", k=3)[2:]] == [
        "You've Got Time",
        "Spektor",
        "Moscow",
    ]


def test_pointed_cuts_each_clause_and_keeps_what_the_question_does_not_say():
    question = "when did the fire safety order come into effect"
    spans = pointed_spans(question, [], ["On 1 October 2006; the order came into effect then", "the order"])
    # "the order came into effect then": the, order | came | into, effect, then ("came" is not the question's
    # "come": words compare after SQuAD normalisation, unstemmed); "the order" is only stop and question words
    assert spans == ["1 October 2006", "came"]
