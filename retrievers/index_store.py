"""Persisted retrieval indexes: one folder per (kind, corpus hash, encoder), written atomically."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eor.models import cache_dir


def index_folder(kind: str, corpus_sha256: str, encoder: str = "") -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", encoder).strip("_")[-60:]
    name = f"{kind}-{corpus_sha256[:16]}" + (f"-{slug}" if slug else "")
    return cache_dir() / "indexes" / name


def load_or_build(folder: Path, meta: dict[str, Any], build: Callable[[Path], None]) -> Path:
    """Return `folder` holding a finished index for `meta`, building it with `build(tmp_folder)` if needed.

    An index whose stored meta differs (another corpus or encoder) is rebuilt; a build that fails or is
    interrupted leaves nothing behind, because the folder only appears by an atomic rename.
    """
    meta_file = folder / "meta.json"
    if meta_file.is_file() and json.loads(meta_file.read_text()) == meta:
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        build(tmp)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        if folder.exists():
            shutil.rmtree(folder)
        tmp.rename(folder)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder
