"""``TieredSaver``: a LangGraph checkpoint saver that keeps each message once, as an
entry of the thread's tiermem session.

How a thread is kept (:mod:`tiermem.threads`):

* **Thread = session.** A thread's checkpoints, of every namespace (a subgraph's
  ``checkpoint_ns``), belong to the tiermem session whose id is the ``thread_id``
  (``str(thread_id)``, which must obey tiermem's session-id rule: 1-255 characters,
  no control characters, no outer whitespace; ``InvalidSessionId`` otherwise). One
  session per thread rather than per namespace: a subgraph's namespace names the task
  that ran it (a new one per call), and the messages a subgraph shares with its
  parent are then stored once. ``tiermem sessions``, ``load_context``, export,
  ``prune_expired`` and the change feed see threads as any session; deleting the
  session deletes its checkpoints.
* **Messages stored once.** A channel whose value is a list of LangChain messages
  that all have ids (``messages`` of ``MessagesState`` and ``create_agent``) is not
  serialized: each message is appended to the session once (counted, searchable,
  announced as ``entry:added``, exported), in the checkpoint's transaction, and the
  channel version keeps the entry ids: those appended since the version this saver
  last wrote or read, with a full list every 32 versions and whenever the list
  changed otherwise. A revised message (same id, new content; ``update_state``) is a
  new entry, a removed one (``RemoveMessage``, ``REMOVE_ALL_MESSAGES``) leaves the
  list: every historical checkpoint reads back exactly the messages it held. The
  entries a revision or a removal supersedes are kept but *retired*, so the
  thread's context, compression, search and recall see what the graph's state
  shows; a summarization that removes the oldest messages behind a new first
  message (``SummarizationMiddleware``) retires nothing: what it summarized stays
  searchable, for recall to bring back. A
  list tiermem cannot hold as entries (a message too large, content JSON cannot keep
  exactly, a tool result that answers no open call of the session, as after a fork
  that re-ran a tool) is serialized as any other value instead. tiermem's summary
  message (the head ``TieredMemoryMiddleware`` puts in the state) is kept in the list
  row, never as an entry.
* **Writes and inputs.** A pending write that is a list of messages, and a graph's
  input (``__start__``, a dict of message lists), hand tiermem their messages as
  they read back: once the next checkpoint's list holds them, they are kept as
  references to those entries (:meth:`tiermem.threads.Threads.put_writes`), so a
  message's text is stored once.
* **Other values** are serialized by the saver's ``serde``, one row per (channel,
  version), written only for ``new_versions`` (none for a channel left empty).
  Pending writes are keyed as LangGraph keys them (thread, namespace, checkpoint id,
  task id, index, with ``WRITES_IDX_MAP`` for the special channels) and returned in
  ``writes_sort_key`` order. ``get_next_version`` adds 32 random bits to the
  counter, so versions stay unique across forks.
* **Encryption.** With a ``serde`` other than LangGraph's default
  ``JsonPlusSerializer`` (an ``EncryptedSerializer``), no message is stored in clear:
  message lists are serialized (encrypted) by it as any value, no entry is appended,
  and the thread's messages are not searchable.
* **Removal.** ``delete_thread`` deletes the session (conversation and
  checkpoints). ``prune(thread_ids, strategy="keep_latest")`` keeps each namespace's
  newest checkpoint and ``strategy="delete"`` none, with their writes and the values
  no kept checkpoint uses; neither deletes a message: the conversation stays in
  tiermem, searchable and exportable. A newest checkpoint with ``DeltaChannel``
  values (rebuilt from its ancestors' writes) keeps those ancestors back to the one
  that stores each value, so the thread reads back the same after the prune.
  ``delete_for_runs`` deletes the runs' checkpoints and writes; ``copy_thread``
  copies the conversation and every checkpoint to a thread without checkpoints.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import replace
from itertools import repeat
from operator import attrgetter
from types import TracebackType
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from tiermem import ConversationMemory, create_tables
from tiermem.checkpoints import (
    CheckpointQuery,
    NewCheckpoint,
    NewWrite,
    StoredCheckpoint,
    Typed,
)
from tiermem.errors import EntryTooLarge, InvalidArgument, InvalidContent
from tiermem.threads import Threads

__all__ = ["TieredSaver"]

#: Message classes whose stored JSON reads back as an equal message.
_MESSAGE_TYPES = (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    ChatMessage,
    FunctionMessage,
)
#: Checkpoints read per query while listing.
_PAGE = 64
_STRATEGIES = ("keep_latest", "delete")


_MESSAGE_TYPE_SET = frozenset(_MESSAGE_TYPES)
_ID = attrgetter("id")


def _is_message_list(value: object) -> bool:
    """Whether a channel value is held as entries: a list of messages that all have
    ids (checked on every put of the whole list, so with the loops in C). An empty
    list is too (it holds no entry, and reads back empty): a list emptied by
    ``RemoveMessage`` then retires the messages it held, as any removal does."""
    if not isinstance(value, list):
        return False
    if not _MESSAGE_TYPE_SET.issuperset(map(type, value)):
        return False
    ids = list(map(_ID, value))
    return all(ids) and all(map(isinstance, ids, repeat(str)))


def _is_message_write(value: object) -> bool:
    """Whether a pending write is a list of messages (ids optional: the reducer gives
    them) that may be kept as references to their entries."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(type(m) in _MESSAGE_TYPES or type(m) is RemoveMessage for m in value)
    )


def _is_message_input(value: object) -> bool:
    """Whether a value is a dict of message lists (a graph's input, ``__start__``)."""
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(key, str) and _is_message_write(v) for key, v in value.items())
    )


def _thread(config: RunnableConfig) -> tuple[str, str, str | None]:
    configurable = config["configurable"]
    return (
        str(configurable["thread_id"]),
        str(configurable.get("checkpoint_ns", "")),
        get_checkpoint_id(config),
    )


def _config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


class TieredSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpoint saver on tiermem's tables (SQLite or PostgreSQL),
    with real sync and async methods; see the module's documentation.

    Args:
        memory: the tiermem memory whose project and database hold the threads.
        serde: LangGraph's serializer for the values (default ``JsonPlusSerializer``).
    """

    def __init__(self, memory: ConversationMemory, *, serde: SerializerProtocol | None = None):
        super().__init__(serde=serde)
        self.memory = memory
        self.threads = Threads(memory)
        self._owned = False

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        project: str = "default",
        serde: SerializerProtocol | None = None,
        **memory_options: Any,
    ) -> TieredSaver:
        """A saver on a new ``ConversationMemory(url, project=...)``, closed with
        the saver (``with`` or :meth:`close`)."""
        saver = cls(ConversationMemory(url, project=project, **memory_options), serde=serde)
        saver._owned = True
        return saver

    def setup(self) -> None:
        """Create tiermem's tables where they are missing (the memory did already)."""
        create_tables(self.memory.engine)

    async def asetup(self) -> None:
        """Async :meth:`setup`."""
        self.setup()

    def close(self) -> None:
        """Close the memory if :meth:`from_url` made it."""
        if self._owned:
            self.memory.close()

    def __enter__(self) -> TieredSaver:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def _plain(self) -> bool:
        """Whether values are serialized in clear (messages may then be entries)."""
        return type(self.serde) is JsonPlusSerializer

    # ------------------------------------------------------------------ conversions

    def _new(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> NewCheckpoint:
        thread_id, namespace, parent_id = _thread(config)
        stripped: dict[str, Any] = dict(checkpoint)
        values: dict[str, Any] = stripped.pop("channel_values")
        versions = stripped.pop("channel_versions")  # kept once, as the row's versions
        del stripped["id"]  # kept once, as the row's checkpoint id
        blobs: dict[tuple[str, str], Typed | None] = {}
        messages: dict[tuple[str, str], list[BaseMessage]] = {}
        inputs: dict[tuple[str, str], dict[str, list[BaseMessage]]] = {}
        for channel, version in new_versions.items():
            key = (channel, str(version))
            if channel not in values:
                blobs[key] = None
            elif self._plain and _is_message_list(values[channel]):
                messages[key] = values[channel]
            else:
                typed = blobs[key] = self.serde.dumps_typed(values[channel])
                if self._plain and _is_message_input(values[channel]):
                    inputs[key] = self.serde.loads_typed(typed)  # as it reads back
        meta = get_checkpoint_metadata(config, metadata)
        run_id = meta.get("run_id")
        delta = meta.get("counters_since_delta_snapshot") or {}
        return NewCheckpoint(
            thread_id=thread_id,
            checkpoint_ns=namespace,
            checkpoint_id=checkpoint["id"],
            parent_id=parent_id,
            run_id=None if run_id is None else str(run_id),
            versions=dict(versions),
            checkpoint=self.serde.dumps_typed(stripped),
            metadata=self.serde.dumps_typed(meta),
            values=blobs,
            messages=messages,
            delta_channels=frozenset(delta),
            value_messages=inputs,
        )

    def _serialized(self, new: NewCheckpoint) -> NewCheckpoint:
        """``new`` with its message lists serialized as any value."""
        lists = {key: self.serde.dumps_typed(list(value)) for key, value in new.messages.items()}
        return replace(new, values={**new.values, **lists}, messages={})

    def _tuple(self, stored: StoredCheckpoint) -> CheckpointTuple:
        checkpoint: Checkpoint = self.serde.loads_typed(stored.checkpoint)
        # Rows stored before the id was left out of the checkpoint hold the same id.
        checkpoint["id"] = stored.checkpoint_id
        checkpoint["channel_versions"] = stored.versions
        values = {channel: self.serde.loads_typed(v) for channel, v in stored.values.items()}
        values.update(stored.messages)
        values.update(stored.value_messages)
        parent = (
            None
            if stored.parent_id is None
            else _config(stored.thread_id, stored.checkpoint_ns, stored.parent_id)
        )
        return CheckpointTuple(
            config=_config(stored.thread_id, stored.checkpoint_ns, stored.checkpoint_id),
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self.serde.loads_typed(stored.metadata),
            parent_config=parent,
            pending_writes=[
                (
                    w.task_id,
                    w.channel,
                    self.serde.loads_typed(w.value) if w.messages is None else w.messages,
                )
                for w in stored.writes
            ],
        )

    def _writes(self, writes: Sequence[tuple[str, Any]]) -> list[NewWrite]:
        made = []
        for idx, (channel, value) in enumerate(writes):
            typed = self.serde.dumps_typed(value)
            # The messages as the write reads back (the reducer goes on to give the
            # ones without an id theirs): what the entries must match.
            messages = (
                self.serde.loads_typed(typed) if self._plain and _is_message_write(value) else None
            )
            made.append(NewWrite(WRITES_IDX_MAP.get(channel, idx), channel, typed, messages))
        return made

    @staticmethod
    def _query(config: RunnableConfig | None, before: RunnableConfig | None) -> CheckpointQuery:
        if config is None:
            thread_id, namespace, checkpoint_id = None, None, None
        else:
            thread_id, _, checkpoint_id = _thread(config)
            namespace = config["configurable"].get("checkpoint_ns")
        return CheckpointQuery(
            thread_id=thread_id,
            checkpoint_ns=None if namespace is None else str(namespace),
            checkpoint_id=checkpoint_id,
            before=None if before is None else get_checkpoint_id(before),
        )

    @staticmethod
    def _matches(metadata: CheckpointMetadata, wanted: dict[str, Any] | None) -> bool:
        return not wanted or all(metadata.get(key) == value for key, value in wanted.items())

    @staticmethod
    def _strategy(strategy: str) -> bool:
        if strategy not in _STRATEGIES:
            raise InvalidArgument(f"strategy must be one of {_STRATEGIES}, got {strategy!r}")
        return strategy == "keep_latest"

    # ------------------------------------------------------------------ sync

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread namespace's newest."""
        thread_id, namespace, checkpoint_id = _thread(config)
        query = CheckpointQuery(thread_id, namespace, checkpoint_id, limit=1)
        page = self.threads.read(query)
        return self._tuple(page[0]) if page else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (within each thread and namespace), read in pages."""
        pages = self._pages(config, filter, before, limit)
        while (query := pages.next_query()) is not None:
            yield from pages.take(self.threads.read(query))

    def _pages(
        self,
        config: RunnableConfig | None,
        wanted: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> _Pages:
        """The pages of a listing (:meth:`list`, :meth:`alist`)."""

        def keep(metadata: CheckpointMetadata) -> bool:
            return self._matches(metadata, wanted)

        return _Pages(self._query(config, before), limit, self._tuple, keep, bool(wanted))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; its new messages become entries of the thread's session."""
        new = self._new(config, checkpoint, metadata, new_versions)
        try:
            self.threads.put(new)
        except (InvalidContent, EntryTooLarge):
            self.threads.put(self._serialized(new))
        return _config(new.thread_id, new.checkpoint_ns, new.checkpoint_id)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's pending writes to the checkpoint ``config`` names."""
        thread_id, namespace, checkpoint_id = _thread(config)
        assert checkpoint_id is not None, "writes belong to a checkpoint"
        self.threads.put_writes(
            thread_id, namespace, checkpoint_id, task_id, task_path, self._writes(writes)
        )

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread: its session (conversation) and every checkpoint."""
        self.threads.delete_thread(str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints and writes of these runs (the messages stay)."""
        self.threads.delete_runs([str(run_id) for run_id in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread's conversation and every checkpoint to a new thread."""
        self.threads.copy_thread(str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Delete checkpoints (all but each namespace's newest, or all); every
        message stays in tiermem."""
        keep = self._strategy(strategy)
        self.threads.prune([str(t) for t in thread_ids], keep_latest=keep)

    # ------------------------------------------------------------------ async

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple`."""
        thread_id, namespace, checkpoint_id = _thread(config)
        query = CheckpointQuery(thread_id, namespace, checkpoint_id, limit=1)
        page = await self.threads.aread(query)
        return self._tuple(page[0]) if page else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list`."""
        pages = self._pages(config, filter, before, limit)
        while (query := pages.next_query()) is not None:
            for found in pages.take(await self.threads.aread(query)):
                yield found

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put`."""
        new = self._new(config, checkpoint, metadata, new_versions)
        try:
            await self.threads.aput(new)
        except (InvalidContent, EntryTooLarge):
            await self.threads.aput(self._serialized(new))
        return _config(new.thread_id, new.checkpoint_ns, new.checkpoint_id)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes`."""
        thread_id, namespace, checkpoint_id = _thread(config)
        assert checkpoint_id is not None, "writes belong to a checkpoint"
        await self.threads.aput_writes(
            thread_id, namespace, checkpoint_id, task_id, task_path, self._writes(writes)
        )

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread`."""
        await self.threads.adelete_thread(str(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs`."""
        await self.threads.adelete_runs([str(run_id) for run_id in run_ids])

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread`."""
        await self.threads.acopy_thread(str(source_thread_id), str(target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async :meth:`prune`."""
        keep = self._strategy(strategy)
        await self.threads.aprune([str(t) for t in thread_ids], keep_latest=keep)

    # ------------------------------------------------------------------ versions

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The counter after ``current`` (16 digits, so versions sort as strings) and
        32 random bits, so forks of one checkpoint make different versions of a channel."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:016}.{random.getrandbits(32):08x}"


class _Pages:
    """The paging of :meth:`TieredSaver.list` and ``alist``: which page to read next
    and which of its checkpoints to yield, at most ``limit`` in all (a filter is
    checked in Python, so filtered pages are read whole)."""

    def __init__(
        self,
        query: CheckpointQuery,
        limit: int | None,
        to_tuple: Callable[[StoredCheckpoint], CheckpointTuple],
        keep: Callable[[CheckpointMetadata], bool],
        filtered: bool,
    ) -> None:
        self._query, self._remaining = query, limit
        self._to_tuple, self._keep, self._filtered = to_tuple, keep, filtered
        self._size = 0
        self._done = False

    def next_query(self) -> CheckpointQuery | None:
        """The query of the next page; ``None`` when the listing is over."""
        if self._done or (self._remaining is not None and self._remaining <= 0):
            return None
        left = self._remaining if self._remaining is not None and not self._filtered else _PAGE
        self._size = min(left, _PAGE)
        return replace(self._query, limit=self._size)

    def take(self, page: Sequence[StoredCheckpoint]) -> list[CheckpointTuple]:
        """The checkpoints of ``page`` to yield, in order."""
        taken: list[CheckpointTuple] = []
        for stored in page:
            found = self._to_tuple(stored)
            if not self._keep(found.metadata):
                continue
            taken.append(found)
            if self._remaining is not None:
                self._remaining -= 1
                if self._remaining == 0:
                    return taken
        if len(page) < self._size:
            self._done = True
        elif page:
            last = page[-1]
            after = (last.thread_id, last.checkpoint_ns, last.checkpoint_id)
            self._query = replace(self._query, after=after)
        return taken
