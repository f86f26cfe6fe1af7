"""The one exception family of eor: every error a user can cause or fix derives from EorError."""

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
    """A retriever failed, or a retriever name could not be parsed or built."""


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
