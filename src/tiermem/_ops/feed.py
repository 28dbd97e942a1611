"""The change feed's operations: recording a change's events in its own
transaction, reading them, consumers' acknowledgements and retention.

Every operation that changes something builds its events (:mod:`tiermem.events`)
in its transaction and passes them to :func:`record`, which writes their rows
there; the same list is sent after the commit (the events that have a signal). So
an event exists exactly when its change committed, and the signals and the feed
agree. An append's ``entry:added`` rows are written by the entries' own insert
(:func:`entry_events`). One exception: ``compression_failed`` reports a failure,
not a change; its event is written with the release of the failed compression's
claim, and when that release cannot commit (the database is failing too) the
signal is still sent, without an event. The events' JSON payloads are documented
in :mod:`tiermem.feed`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TypeVar

from .._core.context import MemoryContext
from .._core.runner import Op
from .._core.validate import check_int
from .._storage import events
from .._storage.database import Connection
from ..errors import InvalidArgument
from ..events import EntryAdded, Event, TierChanged
from ..tiers import MemoryTier

__all__ = [
    "acknowledge",
    "changes",
    "consumer_position",
    "last_position",
    "prune_events",
    "record",
    "transact_recorded",
    "woken",
]

T = TypeVar("T")

Position = events.Position

#: Events deleted per transaction by retention.
PRUNE_BATCH = 5_000


def woken(ctx: MemoryContext, session_id: str, previous_tier: str | None) -> list[Event]:
    """``tier_changed`` when an access woke a session that was not ACTIVE
    (``previous_tier`` as the access returned it)."""
    if previous_tier is None or previous_tier == MemoryTier.ACTIVE.value:
        return []
    return [TierChanged((session_id,), MemoryTier.ACTIVE.value, ctx.project)]


def record(ctx: MemoryContext, conn: Connection, pending: Sequence[Event]) -> None:
    """Write the rows of ``pending`` events in the current transaction (nothing
    when the memory's feed is off)."""
    if not pending or not ctx.config.change_feed:
        return
    content = ctx.config.event_content
    rows = [row for event in pending for row in event.rows(content)]
    events.insert(conn, ctx.project, rows, ctx.moment())


def transact_recorded(
    ctx: MemoryContext, work: Callable[[Connection], tuple[T, list[Event]]]
) -> Op[T]:
    """Run ``work`` in one transaction that also records the events it returns, then
    send their signals."""

    def body(conn: Connection) -> tuple[T, list[Event]]:
        result, pending = work(conn)
        record(ctx, conn, pending)
        return result, pending

    result, pending = yield from ctx.transact(body)
    if pending:
        yield from ctx.emit(pending)
    return result


def entry_events(ctx: MemoryContext, session_id: str) -> events.EntryEvents | None:
    """The ``entry:added`` events of an append, written with its entries (``None``
    when the memory's feed is off)."""
    if not ctx.config.change_feed:
        return None
    content = ctx.config.event_content
    return events.EntryEvents(
        project=ctx.project,
        session_id=session_id,
        kind=EntryAdded.kind,
        parts=lambda entry: EntryAdded.parts(entry, content),
        created_at=ctx.moment(),
    )


# --------------------------------------------------------------------------- reading


def changes(
    ctx: MemoryContext, after: Position, limit: int, session_id: str | None
) -> Op[list[events.StoredEvent]]:
    """Up to ``limit`` events after ``after``, in delivery order."""
    check_int("limit", limit, minimum=1)
    return (
        yield from ctx.transact(
            lambda conn: events.read(conn, ctx.project, after, limit, session_id), write=False
        )
    )


def last_position(ctx: MemoryContext) -> Op[Position]:
    """The position of the newest event."""
    return (
        yield from ctx.transact(lambda conn: events.last_position(conn, ctx.project), write=False)
    )


def consumer_position(ctx: MemoryContext, consumer: str) -> Op[Position | None]:
    """Where ``consumer`` acknowledged up to (``None``: never)."""
    return (
        yield from ctx.transact(
            lambda conn: events.consumer_position(conn, ctx.project, consumer), write=False
        )
    )


def acknowledge(ctx: MemoryContext, consumer: str, position: Position) -> Op[None]:
    """Record that ``consumer`` has handled every event up to ``position``."""
    now = ctx.moment()
    yield from ctx.transact(
        lambda conn: events.acknowledge(conn, ctx.project, consumer, position, now)
    )


def prune_events(ctx: MemoryContext, older_than: timedelta | None) -> Op[int]:
    """Delete the events older than ``older_than`` (default: the configured
    ``event_retention``), :data:`PRUNE_BATCH` per transaction; the number deleted.

    The age is measured on the clock that stamped the events: PostgreSQL's ``now()``
    when the memory has no injected clock (a host whose clock runs ahead must not
    delete what was written a moment ago), else the memory's clock."""
    age = ctx.config.event_retention if older_than is None else older_than
    if not isinstance(age, timedelta) or age < timedelta(0):
        raise InvalidArgument(f"older_than must be a non-negative timedelta, got {age!r}")
    before = ctx.moment() - age
    removed = 0
    while True:
        count = yield from ctx.transact(
            lambda conn: events.prune(conn, ctx.project, before, PRUNE_BATCH)
        )
        removed += count
        if count < PRUNE_BATCH:
            return removed
