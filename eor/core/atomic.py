"""Atomic writes, one way for every file eor writes whole (records, weights files, caches, models): the
content goes to a new file beside the target, is synced, and is renamed over the target, so an
interruption or a concurrent reader sees the old file or the new one, never a mix or half a file; and one way
for every folder eor publishes whole (an index, a model put together from its parts): filled beside the target
and renamed to it once complete, so that a folder there is never half-made (`atomic_folder`). No other module
renames what it wrote (tests/test_architecture.py)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from eor.core.errors import DiskFullError, is_disk_full
from eor.core.faults import failpoint


@contextlib.contextmanager
def atomic_file(path: str | Path, mode: str = "w", encoding: str = "utf-8") -> Iterator[IO[Any]]:
    """A file object (`mode` "w" or "wb") whose content replaces `path` when the block ends without an
    exception; with one, the new file is removed and `path` is left as it was (a full disk: DiskFullError
    naming the path)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(temporary, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
            failpoint("file-write")  # tests: a full disk with the content written
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException as exc:
        temporary.unlink(missing_ok=True)
        if is_disk_full(exc):
            kept = "it was left as it was" if target.exists() else "nothing was written"
            message = f"no space left on the device writing {target} ({kept}); free space and run again"
            raise DiskFullError(message) from None
        raise


def write_text_atomically(path: str | Path, text: str) -> None:
    """`text` as the whole new content of `path`, atomically."""
    with atomic_file(path) as handle:
        handle.write(text)


@contextlib.contextmanager
def atomic_folder(path: str | Path) -> Iterator[Path]:
    """A new, empty folder beside `path` (hidden: its name starts with a dot) to fill; when the block ends
    without an exception it takes the place of `path` (a folder there before is removed first), so `path` is
    the whole new folder or none; with one, it is removed. An OSError (a full disk included) is the caller's to
    name."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield temporary
        if target.exists():
            shutil.rmtree(target)
        temporary.rename(target)
    finally:
        if temporary.exists():
            shutil.rmtree(temporary, ignore_errors=True)
