"""Loading a JSON Lines corpus (`id`, `title`, `text`) with errors that name the offending line."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from eor.errors import InputError


@dataclass(frozen=True)
class Corpus:
    path: Path
    ids: list[str]
    titles: list[str]
    texts: list[str]
    sha256: str

    def __len__(self) -> int:
        return len(self.ids)


_CACHE: dict[tuple[str, float], Corpus] = {}


def load_corpus(path: str | Path) -> Corpus:
    """Read and validate a corpus file (cached per path and modification time)."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"corpus file not found: {file}")
    key = (str(file.resolve()), file.stat().st_mtime)
    if key in _CACHE:
        return _CACHE[key]
    raw = file.read_bytes()
    ids, titles, texts = [], [], []
    seen: set[str] = set()
    for number, line in enumerate(raw.decode("utf-8", errors="strict").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{file}:{number}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise InputError(f"{file}:{number}: a corpus line needs a string field 'text'")
        pid = str(record.get("id", number))
        if pid in seen:
            raise InputError(f"{file}:{number}: duplicate passage id {pid!r}")
        seen.add(pid)
        ids.append(pid)
        titles.append(str(record.get("title") or ""))
        texts.append(record["text"])
    if not ids:
        raise InputError(f"{file}: the corpus is empty")
    corpus = Corpus(file, ids, titles, texts, hashlib.sha256(raw).hexdigest())
    _CACHE[key] = corpus
    return corpus
