"""Extension points of other packages: Python entry points in four groups.

- `eor.sources`: a `retrievers.source_type.SourceType` per entry point (a config's `sources: {X: {type: NAME}}`);
- `eor.metrics`: a similarity metric factory (usually a `voters.SimilarityMetric` subclass) for `voter.metrics`;
- `eor.readers`: a reader factory `(ReaderConfig) -> Reader` for `reader: {backend: NAME}`;
- `eor.operators`: a `retrievers.operator_type.OperatorType` per entry point (`@NAME` in member names).

The entry point's name is the name configs use. A package declares them in its pyproject.toml, e.g.
`[project.entry-points."eor.sources"] wiki-api = "my_package.sources:WIKI_API"`. Each group is read once per
process, when eor first needs it; an entry point that cannot be loaded, or that holds the wrong kind of
object, is skipped with a warning naming it (so one broken package does not stop eor), and eor's own names
always win over a plugin's.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

GROUPS = ("eor.sources", "eor.metrics", "eor.readers", "eor.operators")
_LOADED: dict[str, dict[str, Any]] = {}


def entry_point_objects(group: str, accept: type | Callable[[Any], bool], expected: str = "") -> dict[str, Any]:
    """The objects the installed packages declare in entry point `group`, by entry point name; `accept`
    is the type they must have, or a test they must pass (`expected` says what it wants, for the warning)."""
    if group not in _LOADED:
        test = (lambda value: isinstance(value, accept)) if isinstance(accept, type) else accept
        wanted = expected or (accept.__name__ if isinstance(accept, type) else "the right kind of object")
        found: dict[str, Any] = {}
        for point in importlib.metadata.entry_points(group=group):
            try:
                value = point.load()
            except Exception as exc:  # a broken plugin must not stop eor
                log.warning("skipping %s plugin %r (%s): it cannot be loaded: %s", group, point.name, point.value, exc)
                continue
            if not test(value):
                log.warning("skipping %s plugin %r (%s): not %s", group, point.name, point.value, wanted)
                continue
            found[point.name] = value
        _LOADED[group] = found
    return dict(_LOADED[group])
