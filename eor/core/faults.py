"""Failpoints: named moments at which a test can make the process die, or find its disk full, to prove that
a kill or a full disk at exactly that moment loses nothing.

Off unless the environment variable `EOR_FAILPOINTS` names a point: `EOR_FAILPOINTS=record-write:3` sends
SIGKILL to the process the third time it reaches `failpoint("record-write")`; `record-write:3:enospc` raises
OSError(ENOSPC) there instead, as a write to a full disk would (several points: separated by commas). A
machine that can mount a small tmpfs tests a full disk for real (tests/test_disk_full.py); failpoints cover
the same write points everywhere. The points:

- `retrieval`: a member has its passages for a batch (eor.pipeline.stages.retrieval);
- `generation`: the reader has answered a batch, before the cache stores it (eor.pipeline.stages.generation);
- `cache-write`: inside the cache's transaction, rows inserted but not committed (eor.runs.generation_cache);
- `record-write`: half of a record's line is on disk, the rest not yet (eor.runs.records): a torn line;
- `index-write`: an index's files are being written in its temporary folder (retrievers.index_store);
- `file-write`: a file written whole has its content, not yet synced or renamed (eor.core.atomic: weights,
  reports, configs).
"""

from __future__ import annotations

import errno
import os
import signal
from collections import Counter
from collections.abc import Callable

ENVIRONMENT = "EOR_FAILPOINTS"
_hits: Counter[str] = Counter()


def failpoint(name: str, before: Callable[[], object] | None = None) -> None:
    """Die here (SIGKILL), or raise ENOSPC, when `EOR_FAILPOINTS` asks for this point at this hit; `before`
    runs first (e.g. a flush, so that what a real crash would have left on disk is there)."""
    spec = os.environ.get(ENVIRONMENT)
    if not spec:
        return
    _hits[name] += 1
    for item in spec.split(","):
        point, _, rest = item.strip().partition(":")
        count, _, action = rest.partition(":")
        if point == name and _hits[name] == int(count or 1):
            if before is not None:
                before()
            if action == "enospc":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.kill(os.getpid(), signal.SIGKILL)
