"""The change feed's operations: recording a change's events in its own
transaction, reading them, consumers' acknowledgements and retention.

Every operation that sends a signal builds the signal in its transaction and
passes it to :func:`record`, which writes the matching events there; the same
list is sent after the commit. So an event exists exactly when its change
committed, and the signals and the feed agree. One exception: ``compression_failed``
reports a failure, not a change; its event is written with the release of the
failed compression's claim, and when that release cannot commit (the database is
failing too) the signal is still sent, without an event. The events' JSON
payloads are documented in :mod:`tiermem.feed`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from .. import signals
from .._core.context import MemoryContext
from .._core.runner import Op
from .._core.validate import check_int
from .._storage import events
from .._storage.database import Connection
from ..errors import InvalidArgument
from ..tiers import MemoryTier
from ..types import CompressionResult, MemoryEntry

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


def woken(ctx: MemoryContext, session_id: str, previous_tier: str | None) -> list[signals.Pending]:
    """``tier_changed`` when an access woke a session that was not ACTIVE
    (``previous_tier`` as the access returned it)."""
    if previous_tier is None or previous_tier == MemoryTier.ACTIVE.value:
        return []
    tier = MemoryTier.ACTIVE.value
    return [("tier_changed", {"session_ids": (session_id,), "tier": tier, "project": ctx.project})]


def record(ctx: MemoryContext, conn: Connection, pending: Sequence[signals.Pending]) -> None:
    """Write the events of ``pending`` signals in the current transaction (nothing
    when the memory's feed is off)."""
    if not pending or not ctx.config.change_feed:
        return
    content = ctx.config.event_content
    rows = [row for name, kwargs in pending for row in _events(name, kwargs, content)]
    events.insert(conn, ctx.project, rows, ctx.moment())


def transact_recorded(
    ctx: MemoryContext, work: Callable[[Connection], tuple[T, list[signals.Pending]]]
) -> Op[T]:
    """Run ``work`` in one transaction that also records the events of the signals
    it returns, then send those signals."""

    def body(conn: Connection) -> tuple[T, list[signals.Pending]]:
        result, pending = work(conn)
        record(ctx, conn, pending)
        return result, pending

    result, pending = yield from ctx.transact(body)
    if pending:
        yield from ctx.emit(pending)
    return result


def _dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True)


def _entry(entry: MemoryEntry, content: bool) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "entry_id": entry.id,
        "seq": entry.seq,
        "type": entry.type.value,
        "role": entry.role,
        "token_count": entry.token_count,
        "pinned": entry.pinned,
    }
    if content:
        payload["content"] = entry.content
    return payload


def _around_id(payload: dict[str, Any]) -> tuple[str, str]:
    """``_dump(payload)`` split around the value of its ``entry_id``: the keys before
    it and after it dumped apart, in the order ``sort_keys`` gives them all."""
    before = {key: value for key, value in payload.items() if key < "entry_id"}
    after = {key: value for key, value in payload.items() if key > "entry_id"}
    head = (_dump(before)[:-1] + "," if before else "{") + '"entry_id":'
    tail = "," + _dump(after)[1:] if after else "}"
    return head, tail


def entry_events(ctx: MemoryContext, session_id: str) -> events.EntryEvents | None:
    """The ``entry:added`` events of an append, written with its entries (``None``
    when the memory's feed is off)."""
    if not ctx.config.change_feed:
        return None
    content = ctx.config.event_content
    return events.EntryEvents(
        project=ctx.project,
        session_id=session_id,
        kind="entry:added",
        parts=lambda entry: _around_id(_entry(entry, content)),
        created_at=ctx.moment(),
    )


def _compressed(result: CompressionResult) -> dict[str, Any]:
    summary = result.summary
    return {
        "summary_id": summary.id,
        "level": summary.level,
        "first_seq": summary.first_seq,
        "last_seq": summary.last_seq,
        "entries_compressed": result.entries_compressed,
        "merged_summaries": result.merged_summaries,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
    }


def _events(name: str, kwargs: dict[str, Any], content: bool) -> Iterator[events.NewEvent]:
    """The events of one signal: one per session it names (layer items: one for
    the batch)."""
    if name == "entry:added":
        yield events.NewEvent(name, kwargs["session_id"], _dump(_entry(kwargs["entry"], content)))
    elif name == "compressed":
        yield events.NewEvent(name, kwargs["session_id"], _dump(_compressed(kwargs["result"])))
    elif name == "compression_failed":
        error = kwargs["error"]
        payload = {"error": type(error).__name__, "message": str(error)}
        yield events.NewEvent(name, kwargs["session_id"], _dump(payload))
    elif name == "session:cleared":
        payload = {"entries_removed": kwargs["entries_removed"]}
        yield events.NewEvent(name, kwargs["session_id"], _dump(payload))
    elif name == "tier_changed":
        tier = _dump({"tier": kwargs["tier"]})
        for session_id in kwargs["session_ids"]:
            yield events.NewEvent(name, session_id, tier)
    elif name == "forgotten":  # counts only: an erasure's event names nobody
        yield events.NewEvent(name, None, _dump(kwargs["result"].counts()))
    elif name == "pruned":
        for session_id in kwargs["session_ids"]:
            yield events.NewEvent(name, session_id, "{}")
        if kwargs["item_ids"]:
            yield events.NewEvent(name, None, _dump({"item_ids": list(kwargs["item_ids"])}))
    else:  # layer and document changes carry their JSON payload as it is
        yield events.NewEvent(name, kwargs.get("session_id"), _dump(kwargs["payload"]))


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
