"""Persisted retrieval indexes: one folder per (kind, corpus hash, encoder), written atomically.

The index store lies outside every cache's size bound: its folders are reported by `eor cache stats`, never
evicted. A folder is finished when its `meta.json` exists; the meta names what the index was built from and
the size of every file in the folder, so an index from another version or corpus, or one whose file was
truncated or replaced, is found at load, reported in one line and rebuilt.
"""

from __future__ import annotations

import fcntl
import json
import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eor.core.atomic import atomic_folder, write_text_atomically
from eor.core.errors import DiskFullError, is_disk_full
from eor.core.faults import failpoint
from eor.core.models import cache_dir

log = logging.getLogger(__name__)
FILES = "files"  # the meta's key for {file name: size in bytes}
#: the file in the index store naming, per corpus file and kind of index, its latest index (`_supersede`)
LINEAGE = "lineage.json"


def index_root() -> Path:
    return cache_dir() / "indexes"


def index_folder(kind: str, corpus_sha256: str, encoder: str = "") -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", encoder).strip("_")[-60:]
    name = f"{kind}-{corpus_sha256[:16]}" + (f"-{slug}" if slug else "")
    return index_root() / name


def load_or_build(
    folder: Path, meta: dict[str, Any], build: Callable[[Path], None], source: Path | None = None
) -> Path:
    """Return `folder` holding a finished index for `meta`, building it with `build(tmp_folder)` if needed.
    With `source`, the corpus file it indexes: an index of the same kind and settings built for an earlier
    version of that file (another corpus digest) is superseded, and removed (`supersede`).

    An index whose stored meta differs (another corpus, encoder or version), or whose files' sizes differ
    from those its meta recorded, is rebuilt with a one-line warning; a build that fails or is interrupted
    leaves nothing behind, because the folder only appears by an atomic rename once its meta is written; a
    full disk raises DiskFullError naming the folder. Processes sharing the store build an index once: the
    others wait on a lock beside it, then load what was built.
    """
    if _problem(folder, meta) is None:
        return _supersede(folder, source)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        lock = (folder.parent / f".{folder.name}.lock").open("a")
    except OSError as exc:
        raise _disk_full(folder, exc) if is_disk_full(exc) else exc from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time (Ray workers share a cache); the rest wait
        problem = _problem(folder, meta)  # another process may have built it meanwhile
        if problem is None:
            return _supersede(folder, source)
        if problem:
            log.warning("index %s %s; rebuilding it", folder, problem)
        return _supersede(_build(folder, meta, build), source)


def _supersede(folder: Path, source: Path | None) -> Path:
    """Record `folder` as the index of its kind and settings for the corpus file `source` (LINEAGE: by the
    file's resolved path), and remove the folder recorded before it, an index of an earlier version of that
    file, unless another corpus file's record still names it (two files of the same content share an index);
    `folder` itself. A process still reading the old index keeps what it opened (its files stay readable until
    closed); one building it holds its lock, which the removal waits for. A store that cannot be written (read
    only, shared) is left as it is: pruning is housekeeping, never a reason to fail a load."""
    if source is None:
        return folder
    kind, _, rest = folder.name.partition("-")
    settings = rest.partition("-")[2]  # the name less the corpus digest: `<kind>-<digest>[-<settings>]`
    key = f"{kind}|{settings}|{Path(source).resolve()}"
    record = folder.parent / LINEAGE
    try:
        with (folder.parent / f".{LINEAGE}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                lineage = json.loads(record.read_text()) if record.is_file() else {}
            except (json.JSONDecodeError, UnicodeDecodeError):
                lineage = {}  # a damaged record forgets what it knew; indexes are rebuilt, never lost
            before = lineage.get(key)
            if before == folder.name:
                return folder
            lineage[key] = folder.name
            write_text_atomically(record, json.dumps(lineage, indent=2, sort_keys=True))
            if before and before not in lineage.values() and (folder.parent / before).is_dir():
                with (folder.parent / f".{before}.lock").open("a") as building:
                    fcntl.flock(building, fcntl.LOCK_EX)  # not while another process builds it
                    shutil.rmtree(folder.parent / before, ignore_errors=True)
                (folder.parent / f".{before}.lock").unlink(missing_ok=True)
                log.info("index %s superseded by %s (a new version of %s): removed", before, folder.name, source)
    except OSError as exc:
        log.debug("index store %s: superseded indexes not pruned (%s)", folder.parent, exc)
    return folder


def _build(folder: Path, meta: dict[str, Any], build: Callable[[Path], None]) -> Path:
    try:
        with atomic_folder(folder) as tmp:
            build(tmp)
            failpoint("index-write")  # tests: a full disk with the index's files written
            sizes = {file.name: file.stat().st_size for file in sorted(tmp.iterdir()) if file.is_file()}
            (tmp / "meta.json").write_text(json.dumps({**meta, FILES: sizes}, indent=2, sort_keys=True))
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        raise _disk_full(folder, exc) from None
    return folder


def _disk_full(folder: Path, exc: OSError) -> DiskFullError:
    where = f" ({exc.filename})" if exc.filename else ""
    return DiskFullError(
        f"no space left on the device building the index {folder}{where}; nothing half-built was kept: free "
        "space, or set EOR_CACHE to a folder on a larger disk, and run again"
    )


def _problem(folder: Path, meta: dict[str, Any]) -> str | None:
    """None for a finished index of `meta`; '' for none at all; else what is wrong with the one there."""
    meta_file = folder / "meta.json"
    if not meta_file.is_file():
        return ""
    try:
        stored = json.loads(meta_file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError):
        return "has an unreadable meta.json"
    if not isinstance(stored, dict):
        return "has an unreadable meta.json"
    sizes = stored.pop(FILES, None)
    if stored != meta:
        changed = sorted(key for key in set(stored) | set(meta) if stored.get(key) != meta.get(key))
        return f"was built for another {', '.join(changed)}"
    for name, size in (sizes or {}).items():
        file = folder / name
        found = file.stat().st_size if file.is_file() else None
        if found != size:
            return f"is damaged: {name} has {'no file' if found is None else f'{found} bytes'}, its meta says {size}"
    return None


def report() -> str:
    """The index store's folders, each with its kind and size on disk (as `eor cache stats` prints it)."""
    root = index_root()
    folders = sorted(folder for folder in root.iterdir() if folder.is_dir()) if root.is_dir() else []
    lines = [
        f"index store: {root} (never evicted, but an index of an earlier version of a corpus file is removed once "
        "its new version is indexed; remove a folder to rebuild it)"
    ]
    total = 0
    for folder in folders:
        size = sum(_bytes(file) for file in folder.rglob("*"))
        total += size
        finished = "" if (folder / "meta.json").is_file() else "  (unfinished: a build under way or interrupted)"
        lines.append(f"  {folder.name}  {_size(size)}{finished}")
    lines.append(f"indexes: {len(folders)}, {_size(total)} on disk")
    return "\n".join(lines)


def _bytes(file: Path) -> int:
    """A file's size; 0 for a folder, or a file a build under way removed meanwhile."""
    try:
        return file.stat().st_size if file.is_file() else 0
    except FileNotFoundError:
        return 0


def _size(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return ""
