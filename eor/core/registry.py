"""`Registry`: the one kind of name → object registry that every extension point of eor uses (sources,
operators, similarity metrics, poolings, correctness metrics, voter kinds and candidates, readers).

One policy for all of them:
- a registry's module registers eor's own entries where it is defined, so they are there whatever was
  imported before;
- registering a name that another object holds raises ConfigError unless `replace=True` is asked for;
- other packages add entries through an entry point group (eor.core.plugins), read once, the first time the
  registry is looked at; a plugin whose name is taken is skipped with a warning that names both;
- looking up an unknown name raises ConfigError listing the names there are.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from eor.core.errors import ConfigError
from eor.core.plugins import entry_point_objects

log = logging.getLogger(__name__)

T = TypeVar("T")

#: (entry point name, loaded object) -> (registered name, registered object), or None to skip it (having
#: said why); e.g. a voter candidate entry point registers its voter class under the class's `kind`.
Adapt = Callable[[str, Any], tuple[str, Any] | None]


class Registry(Generic[T]):
    """Names → objects of one `kind` (e.g. "pooling"), in registration order: eor's own, those Python code
    registered, then those of installed packages (entry point `group`; `accept` is the type or test their
    objects must pass, `expected` says what that is for the warning)."""

    def __init__(
        self,
        kind: str,
        *,
        group: str | None = None,
        accept: type | Callable[[Any], bool] | None = None,
        expected: str = "",
        adapt: Adapt | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self.accept = accept
        self.expected = expected
        self.adapt = adapt
        self._entries: dict[str, T] = {}
        self._plugins_read = group is None
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"

    # -- registering -------------------------------------------------------------------------------------

    def register(self, name: str, value: T, *, replace: bool = False) -> T:
        """Register `value` under `name`; a name taken by another object raises ConfigError unless `replace`
        (registering the same object again changes nothing)."""
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a {self.kind} needs a non-empty string name, got {name!r}")
        with self._lock:
            if name in self._entries and self._entries[name] is not value and not replace:
                raise ConfigError(f"{self.kind} {name!r} is already registered (pass replace=True to replace it)")
            self._entries = {**self._entries, name: value}
        return value

    def update(self, name: str, change: Callable[[T], T]) -> T:
        """Replace the entry `name` by `change(entry)`, read and replaced under the registry's lock (two threads
        changing one entry never lose a change); ConfigError for an unknown name."""
        with self._lock:
            value = change(self[name])
            self._entries = {**self._entries, name: value}
        return value

    def add(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        """`register` as a decorator: `@POOLINGS.add("mean")`."""

        def decorate(value: T) -> T:
            return self.register(name, value, replace=replace)

        return decorate

    def unregister(self, name: str) -> None:
        """Remove `name` (tests that register an entry take it away again); an unknown name is ignored."""
        with self._lock:
            self._entries = {key: value for key, value in self._entries.items() if key != name}

    @contextlib.contextmanager
    def scoped(self) -> Iterator[Registry[T]]:
        """Entries registered or removed inside the block are as before after it (tests, notebooks)."""
        saved, read = self._entries, self._plugins_read
        try:
            yield self
        finally:
            with self._lock:
                self._entries, self._plugins_read = saved, read

    # -- looking up --------------------------------------------------------------------------------------

    def _entries_with_plugins(self) -> dict[str, T]:
        if not self._plugins_read:
            with self._lock:  # reentrant: loading a plugin may register entries of its own
                if not self._plugins_read:
                    self._add_plugins()
                    self._plugins_read = True
        return self._entries

    def _add_plugins(self) -> None:
        assert self.group is not None  # a registry without a group has no plugins: they count as read (__init__)
        accept = self.accept if self.accept is not None else (lambda value: True)
        found: dict[str, T] = {}
        for point, loaded in entry_point_objects(self.group, accept, self.expected).items():
            adapted = self.adapt(point, loaded) if self.adapt is not None else (point, loaded)
            if adapted is None:
                continue
            name, value = adapted
            held = self._entries.get(name, found.get(name))
            if held is value:  # the plugin also registered itself from Python
                continue
            if held is not None:
                log.warning(
                    "skipping %s plugin %r: the %s %r is already registered (%r)",
                    self.group,
                    point,
                    self.kind,
                    name,
                    held,
                )
                continue
            found[name] = value
        self._entries = {**self._entries, **found}  # one swap: a reader never sees a dict being filled

    def __getitem__(self, name: str) -> T:
        entries = self._entries_with_plugins()
        if name not in entries:
            raise ConfigError(f"unknown {self.kind} {name!r}; available: {', '.join(entries)}")
        return entries[name]

    def get(self, name: str, default: Any = None) -> T | Any:
        return self._entries_with_plugins().get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self._entries_with_plugins()

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries_with_plugins()))

    def __len__(self) -> int:
        return len(self._entries_with_plugins())

    def names(self) -> list[str]:
        return list(self._entries_with_plugins())

    def items(self) -> list[tuple[str, T]]:
        return list(self._entries_with_plugins().items())

    def values(self) -> list[T]:
        return list(self._entries_with_plugins().values())
