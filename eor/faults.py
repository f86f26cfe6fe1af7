"""Failpoints: named moments at which a test can make the process die, to prove that a kill at exactly that
moment loses nothing.

Off unless the environment variable `EOR_FAILPOINTS` names a point: `EOR_FAILPOINTS=record-write:3` sends
SIGKILL to the process the third time it reaches `failpoint("record-write")` (several points: separated by
commas). The points:

- `retrieval`: a member has its passages for a batch (eor.stages.retrieval);
- `generation`: the reader has answered a batch, before the cache stores it (eor.stages.generation);
- `cache-write`: inside the cache's transaction, rows inserted but not committed (eor.generation_cache);
- `record-write`: half of a record's line is on disk, the rest not yet (eor.records): a torn line.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable

ENVIRONMENT = "EOR_FAILPOINTS"
_hits: Counter[str] = Counter()


def failpoint(name: str, before: Callable[[], object] | None = None) -> None:
    """Die here (SIGKILL) when `EOR_FAILPOINTS` asks for this point at this hit; `before` runs first (e.g. a
    flush, so that what a real crash would have left on disk is there)."""
    spec = os.environ.get(ENVIRONMENT)
    if not spec:
        return
    _hits[name] += 1
    for item in spec.split(","):
        point, _, count = item.strip().partition(":")
        if point == name and _hits[name] == int(count or 1):
            if before is not None:
                before()
            os.kill(os.getpid(), signal.SIGKILL)
