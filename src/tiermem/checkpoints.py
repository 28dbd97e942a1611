"""The values :class:`tiermem.threads.Threads` stores and returns: graph checkpoints
of a thread, as a checkpoint saver hands them over (already serialized), with their
message lists as messages (stored once, as the entries of the thread's session)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import BaseMessage

__all__ = [
    "CheckpointQuery",
    "NewCheckpoint",
    "NewWrite",
    "StoredCheckpoint",
    "StoredWrite",
    "Typed",
    "Version",
]

#: A value as a serializer wrote it: its type tag and bytes.
Typed = tuple[str, bytes]
#: A channel version (LangGraph's are ints, floats or strings).
Version = str | int | float


@dataclass(frozen=True, slots=True)
class NewCheckpoint:
    """A checkpoint to store.

    Attributes:
        thread_id: the thread, whose session (same id) holds it.
        checkpoint_ns: the namespace ("" for the root graph).
        checkpoint_id: its id (ids grow with time).
        parent_id: the checkpoint it follows, if any.
        run_id: the run that made it, if known.
        versions: every channel's version at this checkpoint.
        checkpoint: the checkpoint without its channel values, serialized.
        metadata: its metadata, serialized.
        values: the channels written at this checkpoint, by (channel, version):
            serialized, or ``None`` for a channel left empty.
        messages: the channels written at this checkpoint that hold a message list,
            by (channel, version): each message is stored once as an entry.
        value_messages: the values of ``values`` that are a dict of message lists
            (a graph's input, ``__start__``), as they read back: once the next
            checkpoint's lists hold those messages, such a value is kept as
            references to their entries.
        delta_channels: the channels whose value is rebuilt from the pending writes
            of the checkpoint's ancestors back to one that stores it (LangGraph's
            ``DeltaChannel``): a prune that keeps this checkpoint keeps those.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    run_id: str | None
    versions: Mapping[str, Version]
    checkpoint: Typed
    metadata: Typed
    values: Mapping[tuple[str, str], Typed | None] = field(default_factory=dict)
    messages: Mapping[tuple[str, str], Sequence[BaseMessage]] = field(default_factory=dict)
    delta_channels: frozenset[str] = frozenset()
    value_messages: Mapping[tuple[str, str], Mapping[str, Sequence[BaseMessage]]] = field(
        default_factory=dict
    )


@dataclass(frozen=True, slots=True)
class NewWrite:
    """A pending write of a task: its index as LangGraph numbers it (negative for
    the special channels), its channel and its serialized value.

    ``messages`` is the value as it reads back, when it is a list of messages: once
    the next checkpoint's message list of that channel holds them, the write is
    kept as references to their entries instead of its serialized value (so a
    message's text is stored once, in its entry).
    """

    idx: int
    channel: str
    value: Typed
    messages: Sequence[BaseMessage] | None = None


@dataclass(frozen=True, slots=True)
class StoredWrite:
    """A stored pending write: its serialized ``value``, or, for a write kept as
    references to entries, its ``messages`` (then ``value`` is tiermem's own
    encoding of those references)."""

    task_id: str
    channel: str
    value: Typed
    task_path: str
    messages: list[BaseMessage] | None = None


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """A stored checkpoint with its channel values and pending writes.

    Attributes:
        values: the serialized value of each channel that has one (not the
            message lists).
        messages: each message-list channel's messages, as they were at this
            checkpoint.
        value_messages: the values kept as references (dicts of message lists,
            see :class:`NewCheckpoint`), rebuilt.
        writes: the pending writes, in LangGraph's order (task path, task id, index).
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    versions: dict[str, Version]
    checkpoint: Typed
    metadata: Typed
    values: dict[str, Typed]
    messages: dict[str, list[BaseMessage]]
    writes: list[StoredWrite]
    value_messages: dict[str, dict[str, list[BaseMessage]]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CheckpointQuery:
    """Which checkpoints to read: of one thread or all (``thread_id=None``), of one
    namespace or all, one id or those older than ``before``, newest first within each
    thread and namespace, at most ``limit``; ``after`` continues a reading after the
    (thread, namespace, id) its last page ended at."""

    thread_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None
    before: str | None = None
    limit: int | None = None
    after: tuple[str, str, str] | None = None
