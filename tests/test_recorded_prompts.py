"""Every answer prompt recorded in docs/records/ rebuilt byte for byte from its question and passages by
today's prompt builder (eor.core.prompts through eor.pipeline.members.member_templates): a change to how prompts are
built would silently make today's answers incomparable with the recorded ones, and this says so first."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

from eor.core.config import EnsembleConfig, from_dict, load_config
from eor.core.prompts import COMPRESSION, PARAMETRIC, PromptTemplates
from eor.pipeline.members import member_templates
from eor.pipeline.stages.reading import ReadingStage
from eor.runs.records import iter_records, read_header

ROOT = Path(__file__).resolve().parent.parent
RECORDS = sorted((ROOT / "docs" / "records").glob("*.jsonl.gz"))
#: the config of a records file packed without a header (its prompts are those of this pool's config)
HEADERLESS = {"nq16-dev.jsonl.gz": "configs/nq-offline16.yaml", "nq16-train.jsonl.gz": "configs/nq-offline16.yaml"}
#: what of a config decides its answer prompts
PROMPT_KEYS = ("prompts", "max_document_words")


def _prompt_config(file: Path) -> EnsembleConfig:
    header = read_header(file)
    if header is None:
        return load_config(ROOT / HEADERLESS[file.name])
    resolved = header["config"]
    return from_dict(EnsembleConfig, {key: resolved[key] for key in PROMPT_KEYS if key in resolved}, file.name)


def test_every_records_file_is_covered() -> None:
    assert len(RECORDS) >= 5
    assert all(read_header(file) is not None or file.name in HEADERLESS for file in RECORDS)


@pytest.mark.parametrize("file", RECORDS, ids=[file.name for file in RECORDS])
def test_every_recorded_answer_prompt_is_rebuilt_byte_for_byte(file: Path) -> None:
    config = _prompt_config(file)
    reading = ReadingStage(None, {}, config.max_document_words)  # what the ensemble asks for each member
    checked, differing = 0, []
    for record in iter_records(file):
        for name, output in record.members.items():
            assert output.prompt is not None, f"{file.name}: {record.id} {name} has no prompt"
            if name not in reading.prompts:
                reading.prompts.update(member_templates(config, [name]))
            documents = [
                Document(p["text"], metadata={"id": p.get("id"), "title": p.get("title", "")}) for p in output.passages
            ]
            kept = output.document_cut["kept_words"] if output.document_cut else None
            checked += 1
            if reading.prompt(name, record.question, documents, kept) != output.prompt:
                differing.append(f"{record.id} {name}")
    assert checked >= 400 and differing == [], differing[:10]


def test_pk_and_cp_prompts_are_the_papers_templates() -> None:
    """PK's and @CP's prompts come from the same builder, and are the templates of eor.core.prompts filled in."""
    templates = PromptTemplates()
    question, passages = "who wrote hamlet", [("Hamlet", "A tragedy by William Shakespeare."), ("", "Elsinore.")]
    assert templates.parametric_prompt(question) == PARAMETRIC.format(query=question)
    document = "Hamlet\nA tragedy by William Shakespeare.\n\nElsinore."
    assert templates.compression_prompt(question, passages) == COMPRESSION.format(query=question, document=document)
