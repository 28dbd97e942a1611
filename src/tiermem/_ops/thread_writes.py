"""Pending writes of messages kept as references to the entries that hold them
(:mod:`tiermem._ops.threads`).

A task's write to a message-list channel (a node's new messages, a middleware's
``RemoveMessage`` and replacement list) is stored first as the saver serialized it:
its messages are not entries yet. When the next checkpoint of the namespace stores
the list those writes were applied to, each write whose messages that list holds is
rewritten, in the checkpoint's own transaction, as references: per message, the id
of its entry (a message written without an id matches the one the reducer gave an
id, and reads back without it), the JSON the list keeps a summary message as, or
the JSON of a ``RemoveMessage``. It reads back as the same messages, and a
message's text is then stored once, in its entry. LangGraph stores checkpoints
and writes in the background, so a write may come after the checkpoint that
follows its own: it is then made references right after it is stored, in a
transaction of its own. A write whose messages no list holds as they were written
(one was changed on its way, the reducer dropped it, or the writes were made by
another process) keeps its serialized value.

A graph's input (the ``__start__`` channel's value, a dict of message lists) is
kept so too: stored serialized with its checkpoint, it becomes references when the
next checkpoint's lists hold its messages (checkpoints are stored in order).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage

from .._core.context import MemoryContext
from .._core.messages import StoredMessage, serialize
from .._storage import checkpoints as sql
from .._storage.database import Connection
from ..checkpoints import StoredWrite
from ..errors import EntryTooLarge, InvalidContent
from .known_lists import Known

__all__ = [
    "VALUE_REFS",
    "WRITE_REFS",
    "KnownWrites",
    "Pending",
    "PendingValue",
    "decode_value",
    "encode",
    "loaded",
    "refs_of",
    "rewrite",
    "rewrite_values",
    "value_refs",
]

#: The type of a pending write kept as references.
WRITE_REFS = "tiermem:write-refs"
#: The type of a channel value (a dict of message lists) kept as references.
VALUE_REFS = "tiermem:value-refs"

#: A message of a stored list: an entry id or the JSON kept in the list itself.
Ref = int | str


@dataclass(frozen=True, slots=True)
class Pending:
    """A pending write of messages, as it reads back, waiting for the list it is
    applied to."""

    task_id: str
    idx: int
    channel: str
    messages: Sequence[BaseMessage]


@dataclass(frozen=True, slots=True)
class PendingValue:
    """A channel value that is a dict of message lists, as it reads back, waiting
    for the next checkpoint's lists."""

    channel: str
    version: str
    lists: Mapping[str, Sequence[BaseMessage]]


class KnownWrites:
    """The message writes this process stored per (thread, namespace, checkpoint)
    that wait for the next checkpoint, and the lists of the checkpoints stored
    since, by parent. LangGraph stores checkpoints and writes in the background, in
    either order: whichever of a write and the checkpoint after it comes second
    makes the write references. Only a shortcut: a write not known here keeps its
    serialized value."""

    def __init__(self, size: int = 256) -> None:
        self._pending: OrderedDict[tuple[str, str, str], list[Pending]] = OrderedDict()
        self._children: OrderedDict[tuple[str, str, str, str], Known] = OrderedDict()
        self._values: OrderedDict[tuple[str, str, str], list[PendingValue]] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def hold_values(self, key: tuple[str, str, str], values: Sequence[PendingValue]) -> None:
        """Note the values of checkpoint ``key`` that may become references."""
        if not values:
            return
        with self._lock:
            self._values[key] = list(values)
            while len(self._values) > self._size:
                self._values.popitem(last=False)

    def take_values(self, key: tuple[str, str, str]) -> list[PendingValue]:
        """The values of checkpoint ``key`` waiting for the next, forgotten here."""
        with self._lock:
            return self._values.pop(key, [])

    def take(self, key: tuple[str, str, str]) -> list[Pending]:
        """The writes waiting on checkpoint ``key``, forgotten here."""
        with self._lock:
            return self._pending.pop(key, [])

    def settle(self, key: tuple[str, str, str], lists: Mapping[str, Known]) -> list[Pending]:
        """Note the lists (by channel) of the checkpoint that follows ``key``; the
        writes that came meanwhile, forgotten here."""
        with self._lock:
            for channel, known in lists.items():
                self._children[(*key, channel)] = known
                self._children.move_to_end((*key, channel))
            while len(self._children) > self._size:
                self._children.popitem(last=False)
            return self._pending.pop(key, [])

    def arrive(self, key: tuple[str, str, str], pending: Sequence[Pending]) -> dict[str, Known]:
        """The lists of the checkpoint stored after ``key`` already, by channel, of
        the channels ``pending`` writes; the other writes wait for it."""
        with self._lock:
            found: dict[str, Known] = {}
            waiting = []
            for write in pending:
                child = self._children.get((*key, write.channel))
                if child is None:
                    waiting.append(write)
                else:
                    found[write.channel] = child
            if waiting:
                self._pending.setdefault(key, []).extend(waiting)
                self._pending.move_to_end(key)
                while len(self._pending) > self._size:
                    self._pending.popitem(last=False)
            return found


#: Whether a stored list holds, at a position, this very message.
Holds = Callable[[int, BaseMessage], bool]


def encode(
    messages: Sequence[BaseMessage],
    stored: Sequence[BaseMessage],
    refs: Sequence[Ref],
    max_chars: int,
    holds: Holds | None = None,
) -> bytes | None:
    """The write of ``messages`` as references into the stored list ``stored``
    (whose refs are ``refs``), or ``None`` when that list does not hold each of
    them as written. ``holds`` compares a message with the list's (equality by
    default)."""
    same = holds or (lambda at, message: stored[at] == message)
    wanted = {m.id for m in messages if m.id is not None and not isinstance(m, RemoveMessage)}
    by_id = _positions(stored, wanted)
    used: set[int] = set()
    items: list[Any] = []
    for message in messages:
        if isinstance(message, RemoveMessage):
            try:
                items.append(serialize(message, max_chars=max_chars))
            except (InvalidContent, EntryTooLarge):
                return None  # kept as the saver serialized it
            continue
        if message.id is None:
            at = _idless(message, stored, used, same)
            if at is None:
                return None
            items.append({"noid": refs[at]})
        else:
            at = by_id.get(message.id)
            if at is None or not same(at, message):
                return None
            items.append(refs[at])
        used.add(at)
    return json.dumps({"w": items}, separators=(",", ":")).encode()


def _positions(stored: Sequence[BaseMessage], ids: set[str]) -> dict[str, int]:
    """The newest position of each of ``ids`` in ``stored`` (those it holds), looked
    for from the end: a write's messages are mostly the list's newest."""
    found: dict[str, int] = {}
    if not ids:
        return found
    for at in range(len(stored) - 1, -1, -1):
        message_id = stored[at].id
        if message_id in ids and message_id not in found:
            found[message_id] = at
            if len(found) == len(ids):
                break
    return found


def _idless(
    message: BaseMessage, stored: Sequence[BaseMessage], used: set[int], same: Holds
) -> int | None:
    """Where the list holds ``message`` (written without an id) with the id the
    reducer gave it: the newest such message not matched already."""
    for at in range(len(stored) - 1, -1, -1):
        candidate = stored[at]
        if at in used or candidate.id is None or type(candidate) is not type(message):
            continue
        if same(at, message.model_copy(update={"id": candidate.id})):
            return at
    return None


def _items(write: StoredWrite) -> list[Any] | None:
    if write.value[0] != WRITE_REFS:
        return None
    items: list[Any] = json.loads(write.value[1])["w"]
    return items


def refs_of(writes: Sequence[StoredWrite]) -> Iterator[list[Ref]]:
    """The refs each write kept as references holds."""
    for write in writes:
        items = _items(write)
        if items is not None:
            yield [item["noid"] if isinstance(item, dict) else item for item in items]


def loaded(
    write: StoredWrite,
    texts: Mapping[int, StoredMessage],
    parse: Callable[[StoredMessage], BaseMessage],
) -> StoredWrite:
    """``write`` with its messages, if it is kept as references (``texts``: the
    stored message of each entry)."""
    items = _items(write)
    return write if items is None else replace(write, messages=_messages(items, texts, parse))


def rewrite(
    ctx: MemoryContext,
    conn: Connection,
    session_pk: int,
    checkpoint: tuple[str, str, str],
    pending: Sequence[Pending],
    lists: dict[str, Known],
) -> None:
    """Keep the message writes to ``checkpoint`` (thread, namespace, id) that the
    lists of the checkpoint after it hold as references to their entries."""
    _, namespace, checkpoint_id = checkpoint
    for write in pending:
        listed = lists.get(write.channel)
        if listed is None:
            continue
        max_chars = ctx.config.max_entry_chars
        value = encode(write.messages, listed.messages, listed.refs, max_chars, listed.same)
        if value is not None:
            key = {
                "session_pk": session_pk,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
                "task_id": write.task_id,
                "idx": write.idx,
            }
            sql.replace_write(conn, key, WRITE_REFS, value)


def rewrite_values(
    ctx: MemoryContext,
    conn: Connection,
    session_pk: int,
    checkpoint_ns: str,
    pending: Sequence[PendingValue],
    lists: dict[str, Known],
) -> None:
    """Keep the values of ``pending`` whose messages the lists (by channel, of the
    checkpoint after theirs) hold as references to their entries."""
    max_chars = ctx.config.max_entry_chars
    for value in pending:
        encoded: dict[str, Any] = {}
        for name, messages in value.lists.items():
            listed = lists.get(name)
            one = None
            if listed is not None:
                one = encode(messages, listed.messages, listed.refs, max_chars, listed.same)
            if one is None:
                break
            encoded[name] = json.loads(one)["w"]
        else:
            row = {
                "session_pk": session_pk,
                "checkpoint_ns": checkpoint_ns,
                "channel": value.channel,
                "version": value.version,
                "type": VALUE_REFS,
                "value": json.dumps({"v": encoded}, separators=(",", ":")).encode(),
            }
            sql.replace_blob(conn, row)


def value_refs(value: bytes) -> list[Ref]:
    """The refs a value kept as references holds."""
    lists: dict[str, list[Any]] = json.loads(value)["v"]
    return [item["noid"] if isinstance(item, dict) else item for v in lists.values() for item in v]


def decode_value(
    value: bytes, texts: Mapping[int, StoredMessage], parse: Callable[[StoredMessage], BaseMessage]
) -> dict[str, list[BaseMessage]]:
    """A value kept as references, rebuilt (``texts``: each entry's stored message)."""
    return {name: _messages(items, texts, parse) for name, items in json.loads(value)["v"].items()}


def _messages(
    items: list[Any],
    texts: Mapping[int, StoredMessage],
    parse: Callable[[StoredMessage], BaseMessage],
) -> list[BaseMessage]:
    messages = []
    for item in items:
        ref = item["noid"] if isinstance(item, dict) else item
        message = parse(texts[ref] if isinstance(ref, int) else ref)
        if isinstance(item, dict):
            message.id = None
        messages.append(message)
    return messages
