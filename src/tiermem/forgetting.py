"""Deleting from a :class:`~tiermem.ConversationMemory`: ``clear_session`` deletes one
session; ``forget`` erases everything tiermem keeps about a person (the operation
is :mod:`tiermem._ops.forget`; how a person maps onto sessions, scopes and
namespaces is told there and in the README). Each has its async twin.

These are methods of :class:`~tiermem.ConversationMemory`, defined here to keep
the facade short.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from ._core.context import MemoryContext
from ._core.runner import arun, run
from ._ops import forget as ops
from ._ops import write
from .layers import forget_scopes
from .types import ForgetResult

__all__ = ["ForgetResult", "aclear_session", "aforget", "clear_session", "forget"]


class HasContext(Protocol):
    """A memory whose operations run in ``context`` (a ``ConversationMemory``)."""

    @property
    def context(self) -> MemoryContext: ...


def clear_session(memory: HasContext, session_id: str) -> int:
    """Delete a session with its entries, summaries and vectors; returns the number of
    entries removed (0 for an unknown session). To erase a person, :meth:`forget`."""
    return run(write.clear(memory.context, session_id))


async def aclear_session(memory: HasContext, session_id: str) -> int:
    """Async :meth:`clear_session`."""
    return await arun(write.clear(memory.context, session_id))


def forget(
    memory: HasContext,
    *,
    sessions: Iterable[str] = (),
    scopes: Iterable[str] = (),
    namespaces: Iterable[tuple[str, ...]] = (),
    dry_run: bool = False,
    vacuum: bool = False,
) -> ForgetResult:
    """Erase a person: the ``sessions`` (exact ids) with their entries, summaries and
    vectors; the layer ``scopes`` (exact names) with their items, vectors and this
    process's working memory; the stored documents under the ``namespaces``
    (prefixes, tuples of labels); and the change-feed events that name any of them.
    One transaction, all or nothing, in this memory's project; then the database
    files are scrubbed (SQLite: the erased bytes are zeroed and the WAL truncated;
    ``vacuum`` also rewrites the file, or ``VACUUM FULL`` on PostgreSQL) and the
    ``forgotten`` signal is sent. One ``forgotten`` event records the counts only.

    Args:
        dry_run: only find and count what would be erased (no signal, no event).

    Returns:
        What was found and erased, counted per kind and per table.

    Raises:
        InvalidArgument: nothing named, a bad id, scope or namespace (labels are
            non-empty strings without ``.``), or a single string for a list.
        StorageError: the database failed; nothing was erased.
    """
    scopes = _listed(scopes)
    result = run(ops.forget(memory.context, sessions, scopes, namespaces, dry_run, vacuum))
    return _after(memory, result, scopes)


async def aforget(
    memory: HasContext,
    *,
    sessions: Iterable[str] = (),
    scopes: Iterable[str] = (),
    namespaces: Iterable[tuple[str, ...]] = (),
    dry_run: bool = False,
    vacuum: bool = False,
) -> ForgetResult:
    """Async :meth:`forget`."""
    scopes = _listed(scopes)
    result = await arun(ops.forget(memory.context, sessions, scopes, namespaces, dry_run, vacuum))
    return _after(memory, result, scopes)


def _listed(scopes: Iterable[str]) -> Iterable[str]:
    """The scopes as a list (they are read twice), a string left for the check."""
    return scopes if isinstance(scopes, str) else list(scopes)


def _after(memory: HasContext, result: ForgetResult, scopes: Iterable[str]) -> ForgetResult:
    """Empty the process's working memory of the erased scopes (stored or not)."""
    if not result.dry_run:
        forget_scopes(memory.context, scopes)
    return result
