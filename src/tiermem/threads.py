"""``Threads``: graph checkpoints kept with tiermem's sessions, for checkpoint savers
(``tiermem_langgraph.TieredSaver``).

A thread is the session of the same id in the memory's project; every namespace of
the thread (a subgraph's checkpoints) belongs to that one session, so a message a
subgraph shares with its parent is stored once. The checkpoints' message lists are
entries of the session: appended in the checkpoint's transaction, counted, searched,
compressed, exported and announced in the change feed as any other; other values
are kept as the saver serialized them. Pending writes of messages and a graph's input
(a dict of message lists) become references to those entries once the next
checkpoint holds them, and tiermem's summary message is kept in the list, never as an
entry. Deleting the session deletes its checkpoints.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._core.runner import arun, run
from ._ops import threads as ops
from ._ops.known_lists import KnownLists
from ._ops.thread_writes import KnownWrites
from .checkpoints import CheckpointQuery, NewCheckpoint, NewWrite, StoredCheckpoint

if TYPE_CHECKING:
    from .memory import ConversationMemory

__all__ = ["Threads"]


class Threads:
    """The checkpoints of a memory's threads.

    Args:
        memory: the memory whose project and database hold them.
    """

    def __init__(self, memory: ConversationMemory) -> None:
        self._memory = memory
        self._context = memory.context
        self._known = KnownLists()
        self._writes = KnownWrites()

    @property
    def memory(self) -> ConversationMemory:
        """The memory the threads belong to."""
        return self._memory

    def put(self, checkpoint: NewCheckpoint) -> None:
        """Store a checkpoint, its new values and its new messages in one transaction
        (``InvalidContent``/``EntryTooLarge`` for a message tiermem cannot hold
        exactly: nothing is written)."""
        run(ops.put(self._context, self._known, self._writes, checkpoint))

    async def aput(self, checkpoint: NewCheckpoint) -> None:
        """Async :meth:`put`."""
        await arun(ops.put(self._context, self._known, self._writes, checkpoint))

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: Sequence[NewWrite],
    ) -> None:
        """Store a task's pending writes to a checkpoint: a regular write stored
        already is kept, a special one (negative index) replaced. A write that
        carries its ``messages`` is kept as references to their entries once the
        next checkpoint's list holds them."""
        op = ops.put_writes(
            self._context,
            self._writes,
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            task_id,
            task_path,
            writes,
        )
        run(op)

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        writes: Sequence[NewWrite],
    ) -> None:
        """Async :meth:`put_writes`."""
        op = ops.put_writes(
            self._context,
            self._writes,
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            task_id,
            task_path,
            writes,
        )
        await arun(op)

    def read(self, query: CheckpointQuery) -> list[StoredCheckpoint]:
        """One page of checkpoints, newest first in each thread and namespace."""
        return run(ops.read(self._context, self._known, query))

    async def aread(self, query: CheckpointQuery) -> list[StoredCheckpoint]:
        """Async :meth:`read`."""
        return await arun(ops.read(self._context, self._known, query))

    def delete_thread(self, thread_id: str) -> int:
        """Delete the thread's session: its conversation and checkpoints; the
        entries removed."""
        return run(ops.delete_thread(self._context, self._known, thread_id))

    async def adelete_thread(self, thread_id: str) -> int:
        """Async :meth:`delete_thread`."""
        return await arun(ops.delete_thread(self._context, self._known, thread_id))

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """Delete the checkpoints made by these runs, with their writes; the
        conversation stays. Returns the checkpoints deleted."""
        return run(ops.delete_runs(self._context, self._known, run_ids))

    async def adelete_runs(self, run_ids: Sequence[str]) -> int:
        """Async :meth:`delete_runs`."""
        return await arun(ops.delete_runs(self._context, self._known, run_ids))

    def copy_thread(self, source: str, target: str) -> int:
        """Copy a thread's conversation and checkpoints to another thread; the
        checkpoints copied."""
        return run(ops.copy_thread(self._context, self._known, source, target))

    async def acopy_thread(self, source: str, target: str) -> int:
        """Async :meth:`copy_thread`."""
        return await arun(ops.copy_thread(self._context, self._known, source, target))

    def prune(self, thread_ids: Sequence[str], *, keep_latest: bool = True) -> int:
        """Delete the threads' checkpoints but the newest of each namespace (or all
        of them), with their writes and unused values; every message stays in the
        session (searchable, exported). Returns the checkpoints deleted."""
        return run(ops.prune(self._context, self._known, thread_ids, keep_latest))

    async def aprune(self, thread_ids: Sequence[str], *, keep_latest: bool = True) -> int:
        """Async :meth:`prune`."""
        return await arun(ops.prune(self._context, self._known, thread_ids, keep_latest))
