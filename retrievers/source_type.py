"""What a source type is (the registry's own types, in a leaf module that imports nothing of the registry).

A source type is the `type:` of a config's `sources:` entry. It is declared as data: its name, the
parameters a config may set, what it needs from the pool (a corpus, the reader, other sources), and a
`build(source, params, context)` function. `SourceType.create` is the one place that checks a config's
parameters and turns a retriever's own validation errors into ConfigError, for every type alike: built-in
types (retrievers.builtin_sources) and those of other packages (entry point group `eor.sources`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eor.core.errors import ConfigError, RetrieverError
from eor.core.prompts import PromptTemplates
from retrievers.base import EorRetriever

NEEDS = ("corpus", "reader", "sources")  # what a source type may need from its pool


@dataclass
class BuildContext:
    """What a source type's build may use: the corpus, the reader (for PK and @CP), templates, defaults,
    and `lookup`, the pool's named sources (set by `SourcePool` for sources built from others, such as HB)."""

    corpus_path: str | None = None
    reader: Any = None
    prompts: PromptTemplates = field(default_factory=PromptTemplates)
    depth: int = 20
    encoder: str = "minilm-l6"
    parametric_max_tokens: int = 256
    compression_max_tokens: int = 300
    rrf_k: int = 60
    lookup: Callable[[str], EorRetriever] | None = None


Build = Callable[[str, dict[str, Any], BuildContext], EorRetriever]


@dataclass(frozen=True)
class SourceType:
    """A kind of base source. `params`: every parameter a config may set, with what it means (None: any
    keyword, passed on as it is); `needs`: any of "corpus" (the config's corpus, or a `corpus` parameter),
    "reader" and "sources" (other sources of the pool, through `context.lookup`); `build(source, params,
    context)` makes the retriever named `source` from checked parameters."""

    name: str
    build: Build
    params: Mapping[str, str] | None = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    summary: str = ""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.needs) - set(NEEDS))
        if unknown:
            raise ConfigError(f"source type {self.name!r}: unknown needs {unknown}; valid: {', '.join(NEEDS)}")

    def create(self, source: str, params: Mapping[str, Any], context: BuildContext) -> EorRetriever:
        """The retriever of source `source`: parameters and needs checked, validation errors as ConfigError."""
        if not isinstance(params, Mapping) or any(not isinstance(key, str) for key in params):
            raise ConfigError(f"source {source!r}: 'params' must be a mapping of parameter names to values")
        given = dict(params)
        if self.params is not None:
            accepted = set(self.params) | ({"corpus"} if "corpus" in self.needs else set())
            unknown = sorted(set(given) - accepted)
            if unknown:
                valid = ", ".join(sorted(accepted)) or "(none)"
                raise ConfigError(f"source {source!r}: unknown parameter(s) {', '.join(unknown)}; valid: {valid}")
        if "corpus" in self.needs:
            given["corpus"] = given.get("corpus") or context.corpus_path
            if not given["corpus"]:
                raise ConfigError(f"source {source!r} needs a corpus: set 'corpus: {{path: ...}}' in the config")
        if "reader" in self.needs and context.reader is None:
            raise ConfigError(f"source {source!r} ({self.name}) needs a reader")
        if "sources" in self.needs and context.lookup is None:
            raise ConfigError(
                f"source {source!r} ({self.name}) is built from other sources: build it through a SourcePool"
            )
        try:
            return self.build(source, given, context)
        except (ConfigError, RetrieverError):
            raise
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise ConfigError(f"source {source!r}: {_validation_message(exc)}") from None


def _validation_message(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}" for error in errors())
    return str(exc).splitlines()[0]
