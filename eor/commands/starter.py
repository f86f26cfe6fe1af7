"""`eor init DIR`: a folder to start from, with an editable config of the default pool, a corpus and
questions (copies of the demo ones, to replace with your own), and what to do next."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from eor.core.atomic import write_text_atomically
from eor.core.config import default_config_path, package_file
from eor.core.errors import InputError
from eor.documents.folder import ImportSummary, import_folder

CORPUS_LINE = re.compile(r"^(\s*path:\s*)eor:demo/corpus\.jsonl.*$", re.M)
VOTER_LINE = re.compile(r"^voter:[ \t]*\n", re.M)
#: the voter a new folder answers with: the shipped default cascade, fitted beyond the corpus (docs/abstention.md),
#: trained on NQ over the Wikipedia sample with questions that sample cannot answer (it installs with eor): one's own
#: documents are asked many questions they do not hold, and its declines say so; its P(right) says it is outside its
#: guarantee on other documents until `eor calibrate` fits it to them
SHIPPED_WEIGHTS = "eor:weights/nq-offline-cascade.json"


def init_folder(
    folder: Path, force: bool = False, documents: Path | None = None, warn: Callable[[str], None] | None = None
) -> str:
    """Write DIR/config.yaml, DIR/corpus.jsonl and DIR/questions.jsonl (none with `documents`: the demo's would ask
    about the demo's passages); return what was written and what to do next.
    An existing config is kept unless `force`; an existing corpus or questions file is always kept, but for
    `documents`: a folder of documents imported as the corpus (eor.documents.folder; imported again, kept current),
    each warning of the import given to `warn` as it happens, the folder named in the config (`corpus.documents`:
    citations link to its files). A failed import leaves nothing behind in a folder it created."""
    config = folder / "config.yaml"
    _check_init(folder, config, force, documents)
    text = _config_text(folder, documents)
    created = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    corpus = folder / "corpus.jsonl"
    try:
        summary = None if documents is None else import_folder(documents, corpus, warn=warn)
        if summary is not None and not summary.passages:
            raise InputError(f"{documents}: no passage could be read from it (each file's reason is above)")
    except BaseException:
        if created:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    write_text_atomically(config, text)
    # the demo's questions ask about the demo's passages: over your documents they would only mislead a run
    for name in ("corpus.jsonl", "questions.jsonl") if documents is None else ():
        if not (folder / name).exists():
            shutil.copyfile(package_file(f"demo/{name}"), folder / name)
    return _report(folder, config, documents, summary)


def _check_init(folder: Path, config: Path, force: bool, documents: Path | None) -> None:
    """InputError, before anything is written: a config there without `force`, documents that are not a folder, or
    a pool folder inside its documents (importing them again would import the pool's own files)."""
    if config.exists() and not force:
        raise InputError(f"{config} exists; --force writes it again")
    if documents is not None and not documents.is_dir():
        raise InputError(f"{documents}: not a folder (eor init --documents takes the folder of your documents)")
    if documents is not None and folder.resolve().is_relative_to(documents.resolve()):
        raise InputError(
            f"{folder} is inside {documents}: importing the documents again would import the pool's own files "
            "(its corpus, config and questions); choose a folder outside them"
        )


def _report(folder: Path, config: Path, documents: Path | None, summary: ImportSummary | None) -> str:
    """What `eor init` wrote (`summary`: the import of `documents`, if any) and what to do next."""
    corpus = folder / "corpus.jsonl"
    if summary is None:
        written = [
            f"  corpus:    {corpus} — the demo passages; put yours there (one JSON object per line:",
            '             {"id": "...", "title": "...", "text": "..."}; passages of about 100 words work best),',
            "             or import a folder of your documents: eor init DIR --documents FOLDER",
        ]
    else:
        files = len(summary.read) + len(summary.kept)
        written = [
            f"  corpus:    {corpus} — your {summary.passages} passages from {files} files of {documents}"
            + (f"; {len(summary.skipped)} skipped:" if summary.skipped else ""),
            *(f"             {path}: {why}" for path, why in summary.skipped.items()),
            f"             after editing your documents: eor import-corpus {documents} --out {corpus} (only new and "
            "changed files are read)",
        ]
    questions = (
        "the demo questions; yours: question, optional id and answers"
        if documents is None
        else "none yet: write yours there, a JSON object a line with question, optional id and answers"
    )
    return "\n".join(
        [
            f"wrote {config} (the default pool: seven members over {corpus}, answering with the shipped cascade)",
            *written,
            f"  questions: {folder / 'questions.jsonl'} — {questions}",
            "next:",
            f'  eor ask "your question" --config {config}',
            f"  eor run --config {config} --data {folder / 'questions.jsonl'} --out runs/{folder.name or 'mine'}",
            f"  --risk 0.3 needs P(right) fitted to your documents: label 50 to 100 questions, eor run them, then "
            f"eor calibrate RUN --weights {SHIPPED_WEIGHTS} --out {folder / 'weights.json'}, then point "
            "voter.weights at it",
            "  docs/guides.md: your own corpus, model, GPU and web search",
        ]
    )


def _config_text(folder: Path, documents: Path | None) -> str:
    """The default config for the new folder: named after it, over its corpus.jsonl (imported from `documents`,
    named as the corpus's folder of documents), answering with the shipped cascade."""
    text = default_config_path().read_text(encoding="utf-8")
    yours = "your passages: JSON Lines with id, title, text" if documents is None else "your documents' passages"
    where = ""
    if documents is not None:
        where = f"\n  documents: {_scalar(str(documents.resolve()))}   # the folder they were imported from"
    text, found = CORPUS_LINE.subn(lambda m: f"{m.group(1)}corpus.jsonl   # {yours}{where}", text, count=1)
    if not found:
        raise InputError(f"{default_config_path()}: no corpus path to point at the new folder")
    what = "the demo corpus copied to corpus.jsonl" if documents is None else "your documents (corpus.jsonl)"
    text = text.replace("the project's demo corpus", what, 1)
    text = re.sub(r"^name: .*$", lambda m: f"name: {_scalar(folder.name or 'mine')}", text, count=1, flags=re.M)
    text, found = VOTER_LINE.subn(
        f"voter:\n  weights: {SHIPPED_WEIGHTS}   # trained on NQ; fit it to your documents: eor calibrate\n",
        text,
        count=1,
    )
    if not found:
        raise InputError(f"{default_config_path()}: no voter section to give the shipped weights")
    return text


def _scalar(value: str) -> str:
    """`value` as a YAML string: as it is where YAML reads it back so (`my-pool`), else quoted (`"2024-06-01"`, a
    date to YAML; a path holding `: ` or ` #`)."""
    try:
        plain = yaml.safe_load(value) == value
    except yaml.YAMLError:
        plain = False
    return value if plain else json.dumps(value, ensure_ascii=False)
