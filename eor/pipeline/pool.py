"""A pool's identity: what a trained voter was trained for, recorded in its weights file (`meta.pool`) and
checked when the weights are loaded into a pool; and a member's identity, everything behind its answers,
checked when records grow by new members (`eor run` over records that lack some of the config's members).

    {"members": [names], "reader": the reader's identity (backend, model file and digest, settings; the
     model name when the reader has none), "corpus": {"file": name, "bytes": size, "sha256": digest} or None}

Member names must match exactly (voters.weights_file refuses other pools); a different reader or corpus
only warns, naming the difference: the weights still load, but were learned from another pool's answers.
Corpora are the same when their sha256 is (older identities without one: the same file name and size).

A member's identity (`member_identity`) is computed from a config, the reader's identity and the corpus: the
reader and its generation settings, the member's answer prompts (a prompt variant's templates with its
demonstrations), and for every source its tree names the source's type and parameters with the defaults they
take from the config (depth, encoder), the corpus when a source reads one, and the settings of the
operators the tree uses (fusion's k, PK's and @CP's prompts). BM25's engine is among its parameters when
it is not the default (bm25s reproduces rank-bm25's scores bit for bit, so records made with rank-bm25
before bm25s served keep their identity; `engine: rank-bm25` names itself). Records keep their config and pool, so the
identity of a recorded member is computed the same way from what the records were made with.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eor.core.config import EnsembleConfig
from eor.core.errors import ConfigError
from eor.core.models import file_sha256
from eor.core.prompts import templates_for
from eor.readers.base import reader_identity
from eor.runs.run_folder import recorded_pool
from retrievers import notation

log = logging.getLogger(__name__)


def pool_identity(config: EnsembleConfig, reader: Any = None) -> dict[str, Any]:
    """The identity of the config's pool; `reader`: the built reader (its identity), else the model name."""

    corpus = None
    if config.corpus is not None and config.corpus.path:
        path = config.resolve_path(config.corpus.path)
        corpus = {"file": path.name, "bytes": path.stat().st_size if path.is_file() else None}
        if path.is_file():
            corpus["sha256"] = file_sha256(path)  # memoised by path, size and modification time
    return {
        "members": list(config.members),
        "reader": (reader_identity(reader) if reader is not None else None) or config.reader.model,
        "corpus": corpus,
    }


def same_corpus(a: Any, b: Any) -> bool:
    """Whether two identities' corpora are the same file: by sha256 where both have one, else name and size."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return a == b
    if a.get("sha256") and b.get("sha256"):
        return a["sha256"] == b["sha256"]
    return (a.get("file"), a.get("bytes")) == (b.get("file"), b.get("bytes"))


def differences(trained: dict[str, Any], pool: dict[str, Any]) -> list[str]:
    """What differs between the pool a voter was trained for and this one (reader, corpus), in words."""
    found = []
    if trained.get("reader") and trained.get("reader") != pool.get("reader"):
        found.append(f"reader {trained['reader']!r}, this pool's is {pool.get('reader')!r}")
    if trained.get("corpus") and not same_corpus(trained.get("corpus"), pool.get("corpus")):
        found.append(
            f"corpus {describe_corpus(trained['corpus'])}, this pool's is {describe_corpus(pool.get('corpus'))}"
        )
    return found


def member_identity(config: EnsembleConfig, name: str, pool: dict[str, Any]) -> dict[str, Any]:
    """Everything behind member `name`'s answers in a pool made from `config` (see the module's text);
    `pool`: that pool's identity (its reader and corpus)."""
    from retrievers.registry import DEFAULT_HYBRID, DEFAULT_SOURCES

    tree = notation.parse(name)
    specs = {**DEFAULT_SOURCES, **{key: (spec.type, spec.params) for key, spec in config.sources.items()}}
    hybrid, hybrid_spec, hybrid_needs = DEFAULT_HYBRID
    if hybrid not in specs and all(source in specs for source in hybrid_needs):
        specs[hybrid] = hybrid_spec  # as retrievers.registry.SourcePool adds it
    used = notation.sources(tree)
    if any(specs.get(source, ("",))[0] == "hybrid" for source in used):  # HB is built from the pool's sources
        used |= set(specs)
    reader = config.reader
    identity: dict[str, Any] = {
        "reader": pool.get("reader"),
        "generation": {"max_tokens": reader.max_tokens, "seed": reader.seed},
        "answer_prompt": templates_digest(templates_for(config, notation.variant_of(tree))),
        "sources": {},
    }
    for source in sorted(used):
        kind, params = specs.get(source, ("unknown", {}))
        if kind == "bm25" and params.get("engine") == "bm25s":  # the default engine, named or not
            params = {key: value for key, value in params.items() if key != "engine"}
        entry = {"type": kind, "params": params, "depth": config.retrieval_depth}
        if kind == "dense":
            entry["encoder"] = params.get("encoder", config.voter.encoder)
        if kind in ("bm25", "dense") or "corpus" in params:
            identity["corpus"] = pool.get("corpus")
        identity["sources"][source] = entry
    nodes = list(notation.walk(tree))
    if any(isinstance(node, notation.Fuse) for node in nodes):
        identity["rrf_k"] = config.rrf_k
    if any(isinstance(node, notation.Rerank) for node in nodes):
        identity["rerank_encoder"] = config.voter.encoder
    if any(specs.get(source, ("",))[0] == "parametric" for source in used):
        identity["parametric"] = [config.prompts.parametric, config.prompts.parametric_max_tokens]
    if any(isinstance(node, notation.Compress) for node in nodes):
        identity["compression"] = [config.prompts.compression, config.prompts.compression_max_tokens]
    return identity


def identity_differences(recorded: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What differs between a recorded member's identity and the same member's in this config, in words."""
    found = []
    for key in sorted(set(recorded) | set(current)):
        old, new = recorded.get(key), current.get(key)
        if key == "corpus" and same_corpus(old, new):
            continue
        if old != new:
            found.append(f"{key.replace('_', ' ')}: recorded {_shown(key, old)}, now {_shown(key, new)}")
    return found


def _shown(key: str, value: Any) -> str:
    return describe_corpus(value) if key == "corpus" else json.dumps(value, sort_keys=True, default=str)[:200]


def templates_digest(templates: Any) -> str:
    """A short digest of a member's answer-prompt templates (a variant's demonstrations are in them)."""
    text = json.dumps(dataclasses.asdict(templates), sort_keys=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def warn_if_foreign(voter: Any, pool: dict[str, Any], source: str = "the weights") -> list[str]:
    """Log a warning naming each difference between the voter's recorded pool and `pool`; returns them."""
    trained = voter.metadata_.get("pool")
    found = differences(trained, pool) if isinstance(trained, dict) else []
    for difference in found:
        log.warning("%s were trained on another pool's records: %s", source, difference)
    return found


def outside_guarantee(voter: Any, pool: dict[str, Any]) -> str | None:
    """Why the voter's P(right) thresholds do not hold for `pool`, in words: they were certified on questions
    answered by another reader or over another corpus (its training records' pool, or the pool of the labelled
    questions `eor calibrate` recalibrated it on); None when they were certified for this pool, or no pool is
    recorded."""
    meta = voter.metadata_
    probability = meta.get("probability")
    recalibrated = probability.get("recalibrated") if isinstance(probability, dict) else None
    certified = recalibrated.get("pool") if isinstance(recalibrated, dict) else meta.get("pool")
    found = differences(certified, pool) if isinstance(certified, dict) else []
    if not found:
        return None
    return (
        f"its P(right) was certified on questions of another pool ({'; '.join(found)}); recalibrate it on "
        "labelled questions of yours (eor calibrate)"
    )


def describe_corpus(corpus: Any) -> str:
    """A recorded corpus identity as one phrase: its file, size and the start of its sha256 (its version)."""
    if not isinstance(corpus, dict):
        return "none"
    size = corpus.get("bytes")
    shown = f"{corpus.get('file')} ({size:,} bytes)" if isinstance(size, int) else str(corpus.get("file"))
    return shown + (f", sha256 {corpus['sha256'][:16]}" if corpus.get("sha256") else "")


def runs_pool(runs: Sequence[Path]) -> dict[str, Any] | None:
    """The pool identity the first of `runs` records (pool.json or a packed file's header; None without one);
    ConfigError naming what differs when another run records another reader or corpus."""
    recorded = [recorded_pool(path) for path in runs]
    for path, other in zip(runs[1:], recorded[1:], strict=True):
        found = differences(other, recorded[0]) if recorded[0] and other else []
        if found:
            raise ConfigError(f"{path} was answered by another pool than {runs[0]}: {'; '.join(found)}")
    return recorded[0]
