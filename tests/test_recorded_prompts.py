"""Every answer prompt recorded in docs/records/ rebuilt byte for byte from its question and passages by
today's prompt builder (eor.prompts through eor.members.member_templates): a change to how prompts are built
would silently make today's answers incomparable with the recorded ones, and this says so first."""

from __future__ import annotations

from pathlib import Path

import pytest

from eor.config import EnsembleConfig, from_dict, load_config
from eor.members import member_templates
from eor.records import iter_records, read_header

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
    templates: dict = {}
    checked, differing = 0, []
    for record in iter_records(file):
        for name, output in record.members.items():
            assert output.prompt is not None, f"{file.name}: {record.id} {name} has no prompt"
            if name not in templates:
                templates.update(member_templates(config, [name]))
            passages = [(passage.get("title", ""), passage["text"]) for passage in output.passages]
            kept = output.document_cut["kept_words"] if output.document_cut else None
            checked += 1
            if templates[name].answer_prompt(record.question, passages, kept) != output.prompt:
                differing.append(f"{record.id} {name}")
    assert checked >= 400 and differing == [], differing[:10]
