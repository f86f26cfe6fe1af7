"""A pool's identity: what a trained voter was trained for, recorded in its weights file (`meta.pool`) and
checked when the weights are loaded into a pool.

    {"members": [names], "reader": the reader's identity (backend, model file and digest, settings; the
     model name when the reader has none), "corpus": {"file": name, "bytes": size} or None}

Member names must match exactly (voters.weights_file refuses other pools); a different reader or corpus
only warns, naming the difference: the weights still load, but were learned from another pool's answers.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from eor.config import EnsembleConfig
from eor.errors import ConfigError
from eor.readers.base import reader_identity
from eor.records import read_header

log = logging.getLogger(__name__)

POOL_FILE = "pool.json"  # beside the records of `eor run`


def pool_identity(config: EnsembleConfig, reader: Any = None) -> dict[str, Any]:
    """The identity of the config's pool; `reader`: the built reader (its identity), else the model name."""

    corpus = None
    if config.corpus is not None and config.corpus.path:
        path = config.resolve_path(config.corpus.path)
        corpus = {"file": path.name, "bytes": path.stat().st_size if path.is_file() else None}
    return {
        "members": list(config.members),
        "reader": (reader_identity(reader) if reader is not None else None) or config.reader.model,
        "corpus": corpus,
    }


def differences(trained: dict[str, Any], pool: dict[str, Any]) -> list[str]:
    """What differs between the pool a voter was trained for and this one (reader, corpus), in words."""
    found = []
    if trained.get("reader") and trained.get("reader") != pool.get("reader"):
        found.append(f"reader {trained['reader']!r}, this pool's is {pool.get('reader')!r}")
    if trained.get("corpus") and trained.get("corpus") != pool.get("corpus"):
        found.append(f"corpus {_corpus(trained['corpus'])}, this pool's is {_corpus(pool.get('corpus'))}")
    return found


def warn_if_foreign(voter: Any, pool: dict[str, Any], source: str = "the weights") -> list[str]:
    """Log a warning naming each difference between the voter's recorded pool and `pool`; returns them."""
    trained = (getattr(voter, "metadata_", None) or {}).get("pool")
    found = differences(trained, pool) if isinstance(trained, dict) else []
    for difference in found:
        log.warning("%s were trained on another pool's records: %s", source, difference)
    return found


def read_pool_file(records: Path) -> dict[str, Any] | None:
    """The pool identity of a run: the header of a packed records file, or the `pool.json` `eor run` wrote
    beside its records; None when neither says."""

    if records.is_file():
        header = read_header(records)
        if header is not None and isinstance(header.get("pool"), dict):
            return header["pool"]
    folder = records if records.is_dir() else records.parent
    path = folder / POOL_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from None


def _corpus(corpus: Any) -> str:
    if not isinstance(corpus, dict):
        return "none"
    size = corpus.get("bytes")
    return f"{corpus.get('file')} ({size:,} bytes)" if isinstance(size, int) else str(corpus.get("file"))
