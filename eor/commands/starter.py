"""`eor init DIR`: a folder to start from, with an editable config of the default pool, a corpus and
questions (copies of the demo ones, to replace with your own), and what to do next."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from eor.core.atomic import write_text_atomically
from eor.core.config import default_config_path, package_file
from eor.core.errors import InputError
from eor.documents.folder import import_folder

CORPUS_LINE = re.compile(r"^(\s*path:\s*)eor:demo/corpus\.jsonl.*$", re.M)
VOTER_LINE = re.compile(r"^voter:[ \t]*\n", re.M)
#: the voter a new folder answers with: the shipped cascade, trained on NQ over the Wikipedia sample (it installs
#: with eor); its P(right) says it is outside its guarantee on other documents until `eor calibrate` fits it to them
SHIPPED_WEIGHTS = "eor:weights/nq-offline-cascade.json"


def init_folder(folder: Path, force: bool = False, documents: Path | None = None) -> str:
    """Write DIR/config.yaml, DIR/corpus.jsonl and DIR/questions.jsonl; return what to do next. An existing
    config is kept unless `force`; an existing corpus or questions file is always kept, but for `documents`:
    a folder of documents imported as the corpus (eor.documents.folder; imported again, kept current)."""
    config = folder / "config.yaml"
    if config.exists() and not force:
        raise InputError(f"{config} exists; --force writes it again")
    text = default_config_path().read_text(encoding="utf-8")
    text, found = CORPUS_LINE.subn(r"\1corpus.jsonl   # your passages: JSON Lines with id, title, text", text, count=1)
    if not found:
        raise InputError(f"{default_config_path()}: no corpus path to point at the new folder")
    text = re.sub(r"^name: .*$", f"name: {folder.name or 'mine'}", text, count=1, flags=re.M)
    text, found = VOTER_LINE.subn(
        f"voter:\n  weights: {SHIPPED_WEIGHTS}   # trained on NQ; fit it to your documents: eor calibrate\n",
        text,
        count=1,
    )
    if not found:
        raise InputError(f"{default_config_path()}: no voter section to give the shipped weights")
    folder.mkdir(parents=True, exist_ok=True)
    imported = []
    if documents is not None:
        summary = import_folder(documents, folder / "corpus.jsonl")
        if not summary.passages:
            raise InputError(f"{documents}: no passage could be read from it (see the warnings above)")
        imported = [*summary.lines(), f"  again after editing {documents}: eor import-corpus {documents} --out "
                    f"{folder / 'corpus.jsonl'} (only new and changed files are read)"]  # fmt: skip
    write_text_atomically(config, text)
    for name in ("corpus.jsonl", "questions.jsonl"):
        if not (folder / name).exists():
            shutil.copyfile(package_file(f"demo/{name}"), folder / name)
    return "\n".join(
        imported
        + [
            f"wrote {config} (the default pool: seven members over {folder / 'corpus.jsonl'}, answering with the "
            "shipped cascade)",
            f"  corpus:    {folder / 'corpus.jsonl'} — the demo passages; put yours there (one JSON object per line:",
            '             {"id": "...", "title": "...", "text": "..."}; passages of about 100 words work best)',
            f"  questions: {folder / 'questions.jsonl'} — the demo questions; yours: question, optional id and answers",
            "next:",
            f'  eor ask "your question" --config {config}',
            f"  eor run --config {config} --data {folder / 'questions.jsonl'} --out runs/{folder.name or 'mine'}",
            f"  --risk 0.3 needs P(right) fitted to your documents: label 50 to 100 questions, eor run them, then "
            f"eor calibrate RUN --weights {SHIPPED_WEIGHTS} --out {folder / 'weights.json'}, then point "
            "voter.weights at it",
            "  docs/guides.md: your own corpus, model, GPU and web search",
        ]
    )
