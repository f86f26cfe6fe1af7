"""Voter weights files: JSON holding the weights and what they are valid for.

The document records the hyper-parameters, the learned weights, the member names (the pool the weights
belong to) and metric names, and metadata: reader, dataset, objective, train/dev scores and the eor
version. Loading into a pool whose members differ fails with a ConfigError naming the missing and extra
members; the same members in another order are accepted (the weights are permuted to that order).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from eor.core.atomic import write_text_atomically
from eor.core.errors import ConfigError, InputError

FORMAT = "eor-voter-weights"
FORMAT_VERSION = 1


def eor_version() -> str:
    try:
        return metadata.version("eor")
    except metadata.PackageNotFoundError:
        return "unknown"


def header(kind: str, members: Sequence[str] | None, metrics: Sequence[str]) -> dict[str, Any]:
    """The fields every weights file starts with: format, version, voter kind, eor version, members, metrics."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "voter": kind,
        "eor_version": eor_version(),
        "members": None if members is None else list(members),
        "metrics": list(metrics),
    }


def write_document(path: str | Path, document: dict[str, Any]) -> Path:
    """Write `document` as indented JSON, atomically (a reader never sees half a file)."""
    target = Path(path).expanduser()
    try:
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    except TypeError as exc:
        raise InputError(f"weights file metadata must be JSON-serialisable: {exc}") from None
    write_text_atomically(target, text)
    return target


def read_document(path: str | Path) -> dict[str, Any]:
    """The weights file's document, checked for the format and its version."""
    return read_signed(path)[0]


def read_signed(path: str | Path) -> tuple[dict[str, Any], str]:
    """The weights file's document (as `read_document`) and the sha256 of the bytes it was read from: what a
    file that names another by digest (a cascade ending with the judge) compares, from the same single read."""
    source = Path(path).expanduser()
    if not source.is_file():
        raise InputError(f"weights file {str(source)!r} does not exist; train one with `eor train` or Voter.fit")
    raw = source.read_bytes()
    try:
        document = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"weights file {str(source)!r} is not valid JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ConfigError(f"{str(source)!r} is not an eor voter weights file (format {FORMAT!r})")
    if document.get("format_version") != FORMAT_VERSION:
        raise ConfigError(
            f"weights file {str(source)!r} has format version {document.get('format_version')!r}; "
            f"this eor reads version {FORMAT_VERSION}"
        )
    return document, hashlib.sha256(raw).hexdigest()


def member_order(
    file_members: Sequence[str] | None, members: Sequence[str] | None, n_members: int, source: str
) -> list[int]:
    """Positions in the file of each member of `members` (identity when either list is absent)."""
    if members is None:
        return list(range(n_members))
    members = list(members)
    if file_members is None:
        if len(members) != n_members:
            raise ConfigError(
                f"weights file {source!r} holds weights for {n_members} unnamed members, the pool has {len(members)}"
            )
        return list(range(n_members))
    missing = [name for name in file_members if name not in members]
    extra = [name for name in members if name not in file_members]
    if missing or extra or len(members) != len(file_members):
        parts = []
        if missing:
            parts.append(f"missing from the pool: {', '.join(missing)}")
        if extra:
            parts.append(f"not in the weights file: {', '.join(extra)}")
        if not parts:
            parts.append("duplicate member names")
        raise ConfigError(
            f"weights file {source!r} was trained for a different pool ({'; '.join(parts)}); "
            "retrain on records of this pool or use the pool the weights were trained for"
        )
    return [list(file_members).index(name) for name in members]


def with_probability(source: str | Path, out: str | Path, probability: dict[str, Any], **meta: Any) -> Path:
    """A copy of the weights file `source` at `out` whose P(right) (`meta.probability`) is `probability` and whose
    meta gains `meta`; every other field as it was (the voter unchanged)."""
    document = read_document(source)
    document.setdefault("meta", {})["probability"] = probability
    document["meta"].update(meta)
    return write_document(out, document)
