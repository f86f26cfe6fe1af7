"""Extension points of other packages: Python entry points in five groups, each read by an `eor.core.registry.Registry`.

- `eor.sources`: a `retrievers.source_type.SourceType` per entry point (a config's `sources: {X: {type: NAME}}`);
- `eor.operators`: a `retrievers.operator_type.OperatorType` per entry point (`@NAME` in member names);
- `eor.metrics`: a similarity metric factory (usually a `voters.SimilarityMetric` subclass) for `voter.metrics`;
- `eor.voters`: an `eor.learning.crossval.Candidate` subclass with its `voter_class` (`eor train --voter NAME`,
  weights files);
- `eor.readers`: a reader factory `(ReaderConfig) -> Reader` for `reader: {backend: NAME}`.

The entry point's name is the name configs use. A package declares them in its pyproject.toml, e.g.
`[project.entry-points."eor.sources"] wiki-api = "my_package.sources:WIKI_API"`. Each group is loaded once per
process, when eor first needs it; an entry point that cannot be loaded, or that holds the wrong kind of
object, is skipped with a warning naming it (so one broken package does not stop eor), and a plugin whose
name eor or Python code already registered is skipped with a warning too.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable
from typing import Any

from eor.core.cache_policy import KeyedMemo

log = logging.getLogger(__name__)

GROUPS = ("eor.sources", "eor.operators", "eor.metrics", "eor.voters", "eor.readers")
_LOADED: KeyedMemo[str, dict[str, Any]] = KeyedMemo()  # per group, every entry point that loaded, by name


def _loaded(group: str) -> dict[str, Any]:
    """The objects of the entry points of `group`, each loaded once per process (a broken one is skipped
    with a warning)."""
    kept = _LOADED.get(group)
    if kept is not None:
        return kept
    found: dict[str, Any] = {}
    for point in importlib.metadata.entry_points(group=group):
        try:
            found[point.name] = point.load()
        except Exception as exc:  # a broken plugin must not stop eor
            log.warning("skipping %s plugin %r (%s): it cannot be loaded: %s", group, point.name, point.value, exc)
    return _LOADED.keep(group, found)


def entry_point_objects(group: str, accept: type | Callable[[Any], bool], expected: str = "") -> dict[str, Any]:
    """The objects the installed packages declare in entry point `group`, by entry point name; `accept`
    is the type they must have, or a test they must pass (`expected` says what it wants, for the warning).
    Two readers of one group (the voter kinds and the candidates of `eor.voters`) each apply their own."""
    test = (lambda value: isinstance(value, accept)) if isinstance(accept, type) else accept
    wanted = expected or (accept.__name__ if isinstance(accept, type) else "the right kind of object")
    accepted: dict[str, Any] = {}
    for name, value in _loaded(group).items():
        if test(value):
            accepted[name] = value
        else:
            log.warning("skipping %s plugin %r: not %s", group, name, wanted)
    return accepted
