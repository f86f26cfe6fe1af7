"""One member builder and one prompt builder: eRAG labels a document with the very prompt the ensemble sends
for the same member, question and document, cut to `max_document_words` as the ensemble cuts it."""

from __future__ import annotations

import json

import pytest

from eor import Ensemble
from eor.commands.erag_command import prepare, valid_config
from eor.core.config import load_config
from eor.core.prompts import PromptTemplates, templates_for
from eor.evaluation.erag.evaluate import Request, make_generator
from eor.pipeline.members import member_templates, source_pool
from tests.conftest import DEMO

QUESTION = "what do zebra stripes do"
LONG = " ".join(f"zebra stripes word{i}" for i in range(1000))  # 3,000 words: over the cut below


@pytest.fixture
def config_path(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    lines = (DEMO / "corpus.jsonl").read_text().splitlines()
    lines.append(json.dumps({"id": "long-1", "title": "Zebra stripes", "text": LONG}))
    corpus.write_text("\n".join(lines) + "\n")
    path = tmp_path / "members.yaml"
    path.write_text(f"""
name: members
reader: {{model: smollm2-135m, max_tokens: 4, context_tokens: 2048}}
corpus: {{path: {corpus}}}
members: [BM25@1, BM25@2]
voter: {{metrics: [em, f1]}}
max_document_words: 120
""")
    return path


def test_erag_prompts_equal_the_ensembles(config_path, tmp_path, smollm2, isolated_cache):
    ensemble = Ensemble(load_config(config_path), reader=smollm2, cache=False)
    result = ensemble.answer(QUESTION, lazy=False)
    member = result.members["BM25@1"]
    assert member.passages[0]["id"] == "long-1"

    data = tmp_path / "questions.jsonl"
    data.write_text(json.dumps({"question": QUESTION, "answers": ["camouflage"]}) + "\n")
    config = valid_config(config_path, "BM25")
    setup = prepare(config, data, "BM25", depth=2, limit=None, progress=lambda *_: _Bar(), cache=False)
    generator = make_generator(setup.reader, templates=setup.templates)
    documents = setup.documents[next(iter(setup.documents))]
    single = Request(QUESTION, ((documents[0].metadata["title"], documents[0].page_content),))
    both = Request(QUESTION, tuple((d.metadata["title"], d.page_content) for d in documents))
    assert generator.prompt(single) == member.prompt  # eRAG's label prompt for BM25's top document
    assert generator.prompt(both) == result.members["BM25@2"].prompt  # and its end-to-end prompt
    document = member.prompt.split("\n\n", 1)[1].rsplit("\n\n", 1)[0]
    assert len(document.split(" ")) == 120  # cut as the config says, in both


def test_erag_labels_a_prompt_variant_with_its_own_prompt(config_path, tmp_path, smollm2, isolated_cache):
    # BM25@1:fewshot answers with the few-shot variant's prompt; eRAG labels its documents with that prompt,
    # not the config's base prompt
    text = config_path.read_text().replace("members: [BM25@1, BM25@2]", "members: [BM25@1, BM25@1:fewshot]")
    variant = "prompts:\n  variants:\n    fewshot:\n      demonstrations:\n"
    variant += "        - {question: what colour is the sky, answer: blue}\n"
    config_path.write_text(text + variant)
    ensemble = Ensemble(load_config(config_path), reader=smollm2, cache=False)
    member = ensemble.answer(QUESTION, lazy=False).members["BM25@1:fewshot"]
    assert "what colour is the sky" in member.prompt

    data = tmp_path / "questions.jsonl"
    data.write_text(json.dumps({"question": QUESTION, "answers": ["camouflage"]}) + "\n")
    config = valid_config(config_path, "BM25@1:fewshot")
    setup = prepare(config, data, "BM25@1:fewshot", depth=1, limit=None, progress=lambda *_: _Bar(), cache=False)
    assert setup.templates == member_templates(config)["BM25@1:fewshot"] != templates_for(config)
    generator = make_generator(setup.reader, templates=setup.templates)
    (document,) = setup.documents[next(iter(setup.documents))]
    single = Request(QUESTION, ((document.metadata["title"], document.page_content),))
    assert generator.prompt(single) == member.prompt  # eRAG's label prompt: the variant's, as the ensemble sends


def test_the_templates_and_pool_come_from_the_config(config_path):
    config = load_config(config_path)
    templates = templates_for(config)
    assert templates == PromptTemplates(max_document_words=120)
    pool = source_pool(config, None)
    assert pool.context.prompts == templates and pool.context.depth == config.retrieval_depth
    assert pool.build("BM25@2").notation == "BM25@2"
    assert templates.answer_prompt("q", [("T", "a b c d")], max_words=2).startswith(
        "Assuming the following paragraphs are true:\n\nT\na b\n\n"
    )


class _Bar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass
