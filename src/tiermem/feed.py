"""The durable change feed: every committed change as an event, readable from any
process, with named consumers that resume where they acknowledged.

Each change that sends a signal (:mod:`tiermem.signals`) also writes an event row
in its own transaction: an event exists exactly when its change committed. Read
them with :meth:`ChangeFeed.changes`, or follow them with
:meth:`ChangeFeed.follow` (PostgreSQL wakes followers with ``LISTEN/NOTIFY``;
SQLite followers poll an index). A follower with a ``consumer`` name starts
after that consumer's last acknowledged event, so delivery is at least once:
events handled but not acknowledged before a crash are delivered again. Events
come in commit order within a session, and the LangGraph store's events in commit
order per document (namespace and key), so a consumer that mirrors the store by
replaying ``document:put`` and ``document:deleted`` holds what the store holds.
Events of different sessions (or documents) may interleave differently from their
commit order. Changes that lock the same row are in commit order in general: an
event's place is taken by the statement that writes it, after that lock is held.

A follower whose PostgreSQL listening connection drops (a server restart, a
terminated backend) opens a new one, with a bounded backoff, and goes on after the
last event it yielded; only when the server stays unreachable does it raise
:class:`~tiermem.errors.StorageUnavailable`.

On PostgreSQL an event is delivered once every transaction that started before
it has ended, so a long transaction anywhere on the server (an idle session
inside ``BEGIN``, a long report) delays the feed, never loses an event.

Event schema, version :data:`EVENT_VERSION` (``ChangeEvent.payload``):

* ``entry:added``: ``entry_id``, ``seq``, ``type``, ``role``, ``token_count``,
  ``pinned``, and ``content`` with ``MemoryConfig(event_content=True)``.
* ``compressed``: ``summary_id``, ``level``, ``first_seq``, ``last_seq``,
  ``entries_compressed``, ``merged_summaries``, ``tokens_before``, ``tokens_after``.
* ``compression_failed``: ``error`` (the exception's class name), ``message``.
* ``session:cleared``: ``entries_removed``.
* ``session:renamed``: ``previous`` (the id the session had; its earlier events
  carry the new id from then on).
* ``tier_changed``: ``tier`` (one event per session).
* ``pruned``: ``{}`` for a session (one event per session), or ``item_ids`` for
  a batch of expired layer items (``session_id`` is then ``None``).
* ``forgotten``: ``sessions``, ``scopes``, ``namespaces`` (how many of each were
  found), ``entries``, ``summaries``, ``entry_vectors``, ``layer_items``,
  ``item_vectors``, ``documents``, ``events`` (``session_id`` is ``None``: the event
  of an erasure names nobody; the events that named them are deleted by it).
* ``session:imported`` (no signal): ``entries``, ``summaries``, ``overwrite``
  (whether it replaced a stored session of that id).

Layer changes have events but no signals (``session_id`` is ``None``; every
payload has the ``scope``):

* ``layer:appended``: ``layer``, ``item_id``, ``key`` (a fact's key or a rule's
  condition, else ``None``); a fact stored again under its key is appended again.
* ``layer:cleared``: ``layer`` (``None``: every stored layer), ``removed``.
* ``layer:compacted``: ``layer``, ``removed`` (items folded or dropped),
  ``summary_id`` (the item that holds their summary, or ``None``).

The working layer lives in its process and has no events. ``tiermem-langgraph``'s
``TieredStore`` adds ``document:put`` and ``document:deleted`` (``namespace``, a
list of labels, and ``key``), and any extension may record its own kinds with
:meth:`ChangeFeed.record`.

Each kind is a frozen class of :mod:`tiermem.events`, which builds its rows and
names its signal.

The feed is on by default (``MemoryConfig(change_feed=False)`` turns it off for
a memory); events older than ``MemoryConfig.event_retention`` (7 days) are
deleted by ``prune_expired`` and ``tiermem events prune``.

What the feed costs a write is kept small: an ``entry:added`` event (one per stored
message) is stored with an empty kind and the array of its payload's values (its
type and frequent roles as numbers), and delivered as the object above; on SQLite
its time is an integer; and the event table has one index, the delivery order's.
Retention reads a project's events in that order, once per run, rather than have
every write maintain an index on age (``tiermem db upgrade`` drops the one earlier
versions made, and applies the smaller row, migration 0017).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ._core.clock import as_utc
from ._core.context import MemoryContext
from ._core.messages import validate_session_id
from ._core.runner import arun, run
from ._ops import feed as ops
from ._storage import events
from ._storage.database import Connection
from .errors import InvalidArgument
from .events import Event, Recorded, load_payload

__all__ = ["EVENT_VERSION", "ChangeEvent", "ChangeFeed"]

#: The version of the event schema above.
EVENT_VERSION = 1


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """One committed change.

    Attributes:
        position: where the event is in the feed (opaque; pass it as ``after=`` or
            to :meth:`ChangeFeed.ack`).
        kind: the signal's name (``entry:added``, ``compressed``, ...).
        project: the memory's project.
        session_id: the session it concerns (``None`` for layer items).
        payload: the JSON payload (see the module's schema).
        created_at: when the change was made (the server's clock on PostgreSQL).
        version: the schema version, :data:`EVENT_VERSION`.
    """

    position: str
    kind: str
    project: str
    session_id: str | None
    payload: dict[str, Any] = field(compare=False)
    created_at: datetime
    version: int = EVENT_VERSION


Position = events.Position


def _parse(position: str | ChangeEvent | None) -> Position:
    if position is None:
        return (0, 0)
    if isinstance(position, ChangeEvent):
        position = position.position
    if isinstance(position, str):
        xid, _, event_id = position.partition(":")
        if xid.isdigit() and event_id.isdigit():
            return int(xid), int(event_id)
    raise InvalidArgument(f"not a change feed position: {position!r}")


def _format(position: Position) -> str:
    return f"{position[0]}:{position[1]}"


def _optional(position: Position | None) -> str | None:
    return None if position is None else _format(position)


def _event(project: str, row: events.StoredEvent) -> ChangeEvent:
    return ChangeEvent(
        position=_format((row.xid, row.id)),
        kind=row.kind,
        project=project,
        session_id=row.session_id,
        payload=load_payload(row.kind, row.payload),
        created_at=as_utc(row.created_at),
    )


class ChangeFeed:
    """The change feed of one memory's project (``ConversationMemory.feed``)."""

    def __init__(self, context: MemoryContext) -> None:
        self._context = context

    def changes(
        self,
        after: str | ChangeEvent | None = None,
        *,
        limit: int = 100,
        session_id: str | None = None,
    ) -> list[ChangeEvent]:
        """Up to ``limit`` events after ``after`` (``None``: from the oldest kept),
        oldest first; only ``session_id``'s when given."""
        op = ops.changes(self._context, _parse(after), limit, _session(session_id))
        return [_event(self._context.project, row) for row in run(op)]

    async def achanges(
        self,
        after: str | ChangeEvent | None = None,
        *,
        limit: int = 100,
        session_id: str | None = None,
    ) -> list[ChangeEvent]:
        """Async :meth:`changes`."""
        op = ops.changes(self._context, _parse(after), limit, _session(session_id))
        return [_event(self._context.project, row) for row in await arun(op)]

    def last_position(self) -> str:
        """The position of the newest deliverable event (``"0:0"`` when there is
        none): following from it skips nothing still to commit."""
        return _format(run(ops.last_position(self._context)))

    async def alast_position(self) -> str:
        """Async :meth:`last_position`."""
        return _format(await arun(ops.last_position(self._context)))

    def position(self, consumer: str) -> str | None:
        """Where ``consumer`` acknowledged up to; ``None`` if it never did."""
        return _optional(run(ops.consumer_position(self._context, _consumer(consumer))))

    async def aposition(self, consumer: str) -> str | None:
        """Async :meth:`position`."""
        op = ops.consumer_position(self._context, _consumer(consumer))
        return _optional(await arun(op))

    def ack(self, consumer: str, event: ChangeEvent | str) -> None:
        """Record that ``consumer`` handled every event up to ``event``; never moves
        a consumer backwards."""
        run(ops.acknowledge(self._context, _consumer(consumer), _parse(event)))

    async def aack(self, consumer: str, event: ChangeEvent | str) -> None:
        """Async :meth:`ack`."""
        await arun(ops.acknowledge(self._context, _consumer(consumer), _parse(event)))

    def prune(self, older_than: timedelta | None = None) -> int:
        """Delete events older than ``older_than`` (default: the configured
        ``event_retention``); the number deleted."""
        return run(ops.prune_events(self._context, older_than))

    def record(
        self,
        conn: Connection,
        kind: str | Event,
        payload: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> None:
        """Write the event of an extension's change in the caller's transaction
        (``conn``, from ``memory.database.run``), so it commits or rolls back with
        the change (nothing when the feed is off): an event of
        :mod:`tiermem.events` (a document store's ``DocumentPut``), or an
        extension's own ``kind`` with its JSON ``payload``. Record it after the
        statements that lock what the change wrote: events of changes serialized by
        one lock then come in their commit order. No signal is sent.

        Raises:
            InvalidArgument: an event with a payload or session, a kind without a
                payload, or an empty kind.
        """
        if isinstance(kind, Event):
            if payload is not None or session_id is not None:
                raise InvalidArgument("an event carries its own payload and session")
            event = kind
        elif payload is None:
            raise InvalidArgument(f"the event {kind!r} needs a payload")
        else:
            event = Recorded(kind, dict(payload), session_id)
        if not event.kind:
            # Stored, an empty kind is entry:added's (tiermem._storage.event_schema).
            raise InvalidArgument("an event needs a kind")
        ops.record(self._context, conn, [event])

    async def aprune(self, older_than: timedelta | None = None) -> int:
        """Async :meth:`prune`."""
        return await arun(ops.prune_events(self._context, older_than))

    def _start(self, consumer: str | None, after: str | ChangeEvent | None) -> Position:
        if after is not None or consumer is None:
            return _parse(after)
        return run(ops.consumer_position(self._context, _consumer(consumer))) or (0, 0)

    async def _astart(self, consumer: str | None, after: str | ChangeEvent | None) -> Position:
        if after is not None or consumer is None:
            return _parse(after)
        return await arun(ops.consumer_position(self._context, _consumer(consumer))) or (0, 0)

    def follow(
        self,
        consumer: str | None = None,
        *,
        after: str | ChangeEvent | None = None,
        poll_interval: float = 0.2,
        batch: int = 100,
        idle_timeout: float | None = None,
    ) -> Iterator[ChangeEvent]:
        """Yield events as they commit, forever (or until ``idle_timeout`` seconds
        pass without one).

        Args:
            consumer: start after this consumer's acknowledged position (call
                :meth:`ack` as events are handled; nothing is acknowledged for you).
            after: start after this position instead (``None`` and no consumer: from
                the oldest event kept).
            poll_interval: the longest wait between two reads (SQLite polls at this
                rate; PostgreSQL is woken by notifications sooner).
            batch: events read per query.
            idle_timeout: stop after this many seconds without an event.

        Raises:
            StorageUnavailable: the database cannot be reached. A dropped
                PostgreSQL listening connection is opened again, with a bounded
                backoff (about 8 s in all), and following goes on after the last
                event yielded; this is raised only when that fails.
        """
        cursor = _Cursor(self._context.project, poll_interval, batch, idle_timeout)
        listener = events.Listener(self._context.database.engine)  # before the first read
        try:
            cursor.position = self._start(consumer, after)
            while True:
                rows = run(ops.changes(self._context, cursor.position, batch, None))
                yield from cursor.take(rows)
                if cursor.full(rows):
                    continue
                if cursor.idle():
                    return
                listener.wait(poll_interval)
        finally:
            listener.close()

    async def afollow(
        self,
        consumer: str | None = None,
        *,
        after: str | ChangeEvent | None = None,
        poll_interval: float = 0.2,
        batch: int = 100,
        idle_timeout: float | None = None,
    ) -> AsyncIterator[ChangeEvent]:
        """Async :meth:`follow`."""
        cursor = _Cursor(self._context.project, poll_interval, batch, idle_timeout)
        listener = events.AsyncListener()
        try:
            await listener.start(self._context.database.engine)
            cursor.position = await self._astart(consumer, after)
            while True:
                rows = await arun(ops.changes(self._context, cursor.position, batch, None))
                for event in cursor.take(rows):
                    yield event
                if cursor.full(rows):
                    continue
                if cursor.idle():
                    return
                await listener.wait(poll_interval)
        finally:
            await listener.close()


class _Cursor:
    """A follower's state, shared by :meth:`ChangeFeed.follow` and its async twin:
    where it is, and since when nothing came."""

    def __init__(
        self, project: str, poll_interval: float, batch: int, idle_timeout: float | None
    ) -> None:
        _positive("poll_interval", poll_interval)
        if idle_timeout is not None:
            _positive("idle_timeout", idle_timeout)
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InvalidArgument(f"batch must be a positive int, got {batch!r}")
        self.project, self.batch, self.idle_timeout = project, batch, idle_timeout
        self.position: Position = (0, 0)
        self.idle_since = time.monotonic()

    def take(self, rows: list[events.StoredEvent]) -> list[ChangeEvent]:
        """The events of ``rows``, moving the position past them."""
        if rows:
            self.position = (rows[-1].xid, rows[-1].id)
            self.idle_since = time.monotonic()
        return [_event(self.project, row) for row in rows]

    def full(self, rows: list[events.StoredEvent]) -> bool:
        """Whether a read returned a whole batch (more may be waiting)."""
        return len(rows) == self.batch

    def idle(self) -> bool:
        """Whether nothing came for ``idle_timeout`` seconds."""
        waited = time.monotonic() - self.idle_since
        return self.idle_timeout is not None and waited >= self.idle_timeout


def _consumer(name: str) -> str:
    return validate_session_id(name, "consumer")


def _session(session_id: str | None) -> str | None:
    return None if session_id is None else validate_session_id(session_id)


def _positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgument(f"{name} must be a positive number, got {value!r}")
