"""The one exception family of eor: every error a user can cause or fix derives from EorError.

One type per kind of mistake:
- **ConfigError**: the configuration is wrong. A config is checked once, before anything loads, by
  `eor.pipeline.validation.validate`, and every mistake it finds is a ConfigError whose message starts with the
  value's YAML path (`members[3]`, `sources.ES.type`, `voter.pooling`, `reader.backend`), whichever component
  would have raised it later. Also an unknown name of a registry (source type, metric, pooling, reader backend,
  voter kind...) wherever it is looked up, with the known names listed, and a command-line setting that
  only eor can check (`eor train --metrics`), named by its flag.
- **InputError**: what is asked at run time is wrong: a question, a request's members or risk, a member
  timeout, a data or records file.
- **RetrieverError**: a member's name given at run time or in code (`SourcePool.build`, `eor retrieve
  --members`) is not valid notation (an unknown `@WORD` included) or names a source the pool lacks; or a retriever
  failed at work.
- The other errors of a component at work: ReaderError, CacheError, ExecutorError and the rest below.
"""

from __future__ import annotations


class EorError(Exception):
    """Base class: the message says what went wrong and what to do about it."""


class ConfigError(EorError):
    """A configuration file or value is invalid (unknown key, unknown component, bad type)."""


class InputError(EorError):
    """User input is invalid: an empty question, a malformed data file, a bad argument."""


class ModelNotFoundError(EorError):
    """A model name could not be resolved (missing package, unknown name, missing file)."""


class MissingSecretError(EorError):
    """An environment variable named in the config as holding a secret is not set."""


class NotFittedError(EorError):
    """An estimator was used before `fit` (or before weights were given)."""


class ReaderError(EorError):
    """The reader (LLM backend) failed to produce an answer."""


class ContextOverflowError(ReaderError):
    """A prompt and the tokens to generate do not fit the reader's context window."""


class RetrieverError(EorError):
    """A retriever failed, or a member's name could not be parsed or built (outside a config: see above)."""


class UnansweredError(EorError):
    """Every member failed on one question (`question_id`); raised as a ReaderError when each failed reading,
    else a RetrieverError. `eor run` leaves such a question unrecorded and goes on (eor.pipeline.stages.failures)."""

    question_id: str


class CacheError(EorError):
    """The generation cache file cannot be opened, read or written (not a cache, corrupt, locked, read-only)."""


class ExecutorError(EorError):
    """The cluster could not run the work: no cluster at the address, or a worker died more often than it
    is restarted (the records written so far are kept: re-run to resume)."""


class DiskFullError(EorError):
    """A write found no space left on its device (ENOSPC, a quota): the message names the path and what was
    kept; nothing half-written loads later."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` is a full disk: OSError ENOSPC or EDQUOT, or SQLite's SQLITE_FULL."""
    import errno
    import sqlite3

    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    if isinstance(exc, sqlite3.Error):
        return getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or "disk is full" in str(exc)
    return False
