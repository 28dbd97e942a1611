"""The exceptions tiermem raises.

Every error is a ``TiermemError``; driver, JSON and tokenizer errors are
wrapped and kept as ``__cause__``::

    * TiermemError
      x InvalidArgument (also ValueError)
        x InvalidSessionId
        x InvalidContent
        x EntryTooLarge
        x ImportValidationError
        x DatasetInvalid
        x BudgetExceeded
      x SessionNotFound (also KeyError)
      x SessionExists
      x ContextReadFailed
      x StaleContext
      x StorageError
        x StorageBusy
        x StorageUnavailable
        x StorageFull
        x StorageCorrupt
      x SummarizationError
        x SummarizerFailed
        x SummarizerTimeout
        x SummarizerOutputInvalid
          x SummaryNotShorter
      x CompressionInProgress
      x CompressionConflict
      x EmbeddingFailed
        x EmbeddingTimeout
      x TokenizerUnavailable
      x EmbeddingsUnavailable
      x CopyConflict
      x ReadOnlyMemory
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, ClassVar

__all__ = [
    "BudgetExceeded",
    "CompressionConflict",
    "ContextReadFailed",
    "CompressionInProgress",
    "CopyConflict",
    "DatasetInvalid",
    "EmbeddingFailed",
    "EmbeddingTimeout",
    "EmbeddingsUnavailable",
    "EntryTooLarge",
    "ImportValidationError",
    "InvalidArgument",
    "InvalidContent",
    "InvalidSessionId",
    "ReadOnlyMemory",
    "SessionExists",
    "SessionNotFound",
    "StaleContext",
    "StorageBusy",
    "StorageCorrupt",
    "StorageError",
    "StorageFull",
    "StorageUnavailable",
    "SummarizationError",
    "SummarizerFailed",
    "SummarizerOutputInvalid",
    "SummarizerTimeout",
    "SummaryNotShorter",
    "TiermemError",
    "TokenizerUnavailable",
]


class TiermemError(Exception):
    """Base class of every error tiermem raises."""

    #: How loudly tiermem logs this error where it carries on after it (an automatic
    #: compression after a committed append, a merge, the agent middleware's turn): a
    #: warning, unless the error is a normal event of a busy memory.
    log_level: ClassVar[int] = logging.WARNING


class InvalidArgument(TiermemError, ValueError):
    """An argument has the wrong type or value; nothing was written."""


class InvalidSessionId(InvalidArgument):
    """A session id breaks the documented rule (1-255 characters, no NUL, no
    control characters, no leading or trailing whitespace)."""


class InvalidContent(InvalidArgument):
    """Message content cannot be stored exactly (lone surrogates, values that
    are not JSON-serializable, a tool result without its call, ...)."""


class EntryTooLarge(InvalidArgument):
    """An entry is larger than ``MemoryConfig.max_entry_chars``."""

    def __init__(self, message: str, *, size: int, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class ImportValidationError(InvalidArgument):
    """An exported session failed validation; ``path`` names the offending field."""

    def __init__(self, message: str, *, path: str = "$") -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class DatasetInvalid(InvalidArgument):
    """A retrieval evaluation dataset (``tiermem eval retrieval``) is malformed;
    ``path`` names the offending field (``$.questions[3].evidence``)."""

    def __init__(self, message: str, *, path: str = "$") -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class BudgetExceeded(InvalidArgument):
    """Pinned context alone would take more than ``MemoryConfig.max_tokens``: it is
    never left out of a context, so it must fit. Raised by the write that pins it
    (nothing is written) and by reads under a budget lowered since."""


class SessionNotFound(TiermemError, KeyError):
    """The session does not exist in this memory's project."""

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""


class SessionExists(TiermemError):
    """``rename_session`` was asked for an id another session of the project has."""


class ContextReadFailed(TiermemError):
    """``add_and_get_messages`` stored the turn's messages (do not add them again),
    but reading the next context afterwards failed; ``entries`` are the stored
    entries and ``__cause__`` the read's error. Read it with ``get_messages``."""

    def __init__(self, message: str, *, entries: Sequence[Any]) -> None:
        super().__init__(message)
        # MemoryEntry values: errors import no other tiermem module, so every
        # module can import them.
        self.entries: list[Any] = list(entries)


class StaleContext(TiermemError):
    """``add_and_get_messages(..., expected_last_id=...)``: the session's newest
    message is no longer the one the caller's context ended with (another writer
    appended, or the session was cleared); nothing was written. Read the context
    again (``get_messages``) and answer from it."""


class StorageError(TiermemError):
    """The database failed; the operation was rolled back."""


class StorageBusy(StorageError):
    """The database stayed locked longer than the configured timeout; retry later."""


class StorageUnavailable(StorageError):
    """The database connection was lost or could not be opened."""


class StorageFull(StorageError):
    """The database or its disk is full."""


class StorageCorrupt(StorageError):
    """The database file is damaged or is not a database."""


class SummarizationError(TiermemError):
    """The summarizer did not produce a usable summary; no entry was changed."""


class SummarizerFailed(SummarizationError):
    """The summarizer raised an exception (kept as ``__cause__``)."""


class SummarizerTimeout(SummarizationError):
    """The summarizer did not answer within ``MemoryConfig.summarizer_timeout``."""


class SummarizerOutputInvalid(SummarizationError):
    """The summarizer answered with something that is not a usable summary:
    empty, an error text, a tool call, or not shorter than its input."""


class SummaryNotShorter(SummarizerOutputInvalid):
    """The summary was not shorter than what it would replace (often a short input):
    the entries stay as they are. Logged at INFO: nothing is wrong."""

    log_level = logging.INFO


class CompressionInProgress(TiermemError):
    """Another worker holds the compression claim of this session (it is doing the
    work: logged at DEBUG)."""

    log_level = logging.DEBUG


class CompressionConflict(TiermemError):
    """The entries changed while the summarizer ran; nothing was written (a later
    compression takes them: logged at DEBUG)."""

    log_level = logging.DEBUG


class EmbeddingFailed(TiermemError):
    """The embedding model raised or returned something other than one vector of
    numbers per text; no vector was stored (the entries stay searchable by words)."""


class EmbeddingTimeout(EmbeddingFailed):
    """The embedding model did not answer within ``MemoryConfig.embedding_timeout``
    (or too many earlier calls are still waiting for it); nothing was stored, and a
    search ranks by words alone."""


class TokenizerUnavailable(TiermemError):
    """The tiktoken encoding could not be fetched (no network, no cache) and the
    ``offline`` extra holds no copy of it (it holds ``cl100k_base``)."""


class EmbeddingsUnavailable(TiermemError):
    """An embedding model cannot be loaded: its package is not installed (the
    message names the one to install) or it failed to start."""


class CopyConflict(TiermemError):
    """``copy_project``: the target already holds something of that name (a session,
    a layer scope, a document, change-feed events) that differs from the source's;
    nothing of the project was written by the copy that found it."""


class ReadOnlyMemory(TiermemError):
    """A write (an access record included) on a memory opened with ``read_only=True``."""
