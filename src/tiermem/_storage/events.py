"""SQL of the change feed (:mod:`tiermem._storage.event_schema`): writing events in
a change's transaction, reading them in delivery order, consumers' positions,
retention, and waiting for new events.

A position is ``(xid, id)``. On SQLite writers are serialized, so ``xid`` is
always 0 and ids follow commit order: readers ask for ``xid = 0`` and ids after the
position's, which SQLite finds on the position index whether it is the one on
``project`` alone (:mod:`tiermem._storage.event_schema`) or the one on ``(project,
xid, id)`` of a database not migrated yet. On PostgreSQL ids follow the order
``nextval`` was called, not commit order, so an event's ``xid`` is an ordering
transaction id, :data:`ORDER_XID`: the writer's own transaction id or, when
larger, the newest one that had completed when the statement writing the event
started (its snapshot's ``xmax`` less one). A reader takes only the events whose
``xid`` is older than the oldest transaction still running (``pg_snapshot_xmin``):
an event's ``xid`` is never below its writer's own id, so an event that commits
later has a larger ``xid`` than those, hence a later position. And it is always
an id some transaction has already been given, so once the writer and every
older transaction ended, its events are delivered without waiting for any other
write.

Within a session (or a document of the store) events come in commit order:
writers lock the session's row (the document's) before they write its events, in
an earlier statement, so a writer that committed first has an id, and events with
an ordering id, no newer than the newest transaction completed when the next
writer's statement starts; equal ordering ids follow the event ids, which the next
writer takes after that. The writer's own transaction id alone would not do:
PostgreSQL gives it to an UPDATE or DELETE before it waits for the row's lock, so a
writer that waited longer would be delivered first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .._core.clock import as_utc
from ..errors import StorageUnavailable
from ..types import MemoryEntry
from . import _fast as _driver
from .event_schema import (
    NOTIFY_CHANNEL,
    consumer_table,
    event_table,
    stored_kind,
    to_micros,
    wire_kind,
)
from .schema import dialect_insert

__all__ = [
    "AsyncListener",
    "EntryEvents",
    "Listener",
    "NewEvent",
    "ORDER_XID",
    "StoredEvent",
    "acknowledge",
    "consumer_position",
    "entry_events_sql",
    "insert",
    "insert_for_entries",
    "last_position",
    "prune",
    "read",
]

V, C = event_table.c, consumer_table.c

#: A position: (transaction id, event id); (0, 0) is before every event.
Position = tuple[int, int]


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to write: its kind, session (if any) and JSON payload."""

    kind: str
    session_id: str | None
    payload: str


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """An event as read back."""

    xid: int
    id: int
    session_id: str | None
    kind: str
    payload: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class EntryEvents:
    """The events of entries about to be inserted, written with them: one per entry,
    whose payload is ``head + str(id) + tail`` around the id the insert gives it.

    Attributes:
        parts: ``(head, tail)`` of an entry's payload (its ``id`` is not read).
        created_at: a time, or the server's ``now()`` expression.
    """

    project: str
    session_id: str
    kind: str
    parts: Callable[[MemoryEntry], tuple[str, str]]
    created_at: Any


#: PostgreSQL: the ``xid`` of the events a statement writes (see the module's
#: docstring), computed once per statement. Write events in a statement that starts
#: after the locks that order them are held.
ORDER_XID = (
    "(SELECT GREATEST(pg_current_xact_id()::text::bigint, "
    "pg_snapshot_xmax(pg_current_snapshot())::text::bigint - 1))"
)


def insert_for_entries(
    conn: Connection, announced: EntryEvents, parts: Sequence[tuple[str, str]], ids: Sequence[int]
) -> None:
    """Write ``announced`` for entries inserted with ``ids`` (``parts``: per entry)."""
    if conn.dialect.name == "sqlite":
        # Every turn writes these: rows as the driver takes them, in one call, with
        # nothing per row but the payload (the kind and time are the append's).
        project, session_id = announced.project, announced.session_id
        kind, created_at = stored_kind(announced.kind), to_micros(announced.created_at)
        _driver.execute_many(
            conn,
            _SQLITE_INSERT,
            [
                (project, session_id, kind, f"{head}{entry_id}{tail}", created_at)
                for (head, tail), entry_id in zip(parts, ids, strict=True)
            ],
        )
        return
    rows = [
        NewEvent(announced.kind, announced.session_id, f"{head}{entry_id}{tail}")
        for (head, tail), entry_id in zip(parts, ids, strict=True)
    ]
    insert(conn, announced.project, rows, announced.created_at)


#: SQLite: an event's row (``xid`` is always 0 there).
_SQLITE_INSERT = (
    "INSERT INTO tiermem_event (xid, project, session_id, kind, payload, created_at) "
    "VALUES (0, ?, ?, ?, ?, ?)"
)


def entry_events_sql(
    announced: EntryEvents, seqs: Sequence[int], parts: Sequence[tuple[str, str]]
) -> tuple[str, list[Any]]:
    """PostgreSQL: a ``WITH`` query writing ``announced`` from the rows of a preceding
    ``new`` query (an ``INSERT ... RETURNING id, seq``), so that an append and its
    events take one statement; events in seq order. Returns the SQL and its
    parameters."""
    server_time = not isinstance(announced.created_at, datetime)
    args: list[Any] = [announced.project, announced.session_id, stored_kind(announced.kind)]
    if not server_time:
        args.append(announced.created_at)
    for seq, (head, tail) in zip(seqs, parts, strict=True):
        args += (seq, head, tail)
    rows = ", ".join(["(%s::integer, %s::text, %s::text)"] * len(seqs))
    sql = (
        "announced AS (INSERT INTO tiermem_event "
        "(xid, project, session_id, kind, payload, created_at) "
        f"SELECT {ORDER_XID}, %s, %s, %s, "
        f"p.head || new.id::text || p.tail, {'now()' if server_time else '%s'} "
        f"FROM new JOIN (VALUES {rows}) AS p(seq, head, tail) USING (seq) ORDER BY seq)"
    )
    return sql, args


def insert(conn: Connection, project: str, events: Sequence[NewEvent], now: Any) -> None:
    """Write ``events`` in the current transaction (``now``: a time or the server's
    ``now()`` expression)."""
    if not events:
        return
    if conn.dialect.name == "sqlite":
        # A statement per row costs SQLite less than building a multi-row one.
        created_at = to_micros(now)
        _driver.execute_many(
            conn,
            _SQLITE_INSERT,
            [
                (project, event.session_id, stored_kind(event.kind), event.payload, created_at)
                for event in events
            ],
        )
        return
    # One multi-row INSERT sent as written: compiling a statement per call costs more
    # Python time than the round trip, and a turn's appends all pay it.
    server_time = not isinstance(now, datetime)
    value = f"(%s, %s, %s, %s, {'now()' if server_time else '%s'})"
    for start in range(0, len(events), _PG_ROWS):
        chunk = events[start : start + _PG_ROWS]
        args: list[Any] = []
        for event in chunk:
            args += (project, event.session_id, stored_kind(event.kind), event.payload)
            if not server_time:
                args.append(now)
        values = ", ".join([value] * len(chunk))
        conn.exec_driver_sql(f"{_PG_INSERT} (VALUES {values}) AS v", tuple(args))


#: Rows per INSERT on PostgreSQL (a statement takes at most 65,535 parameters).
_PG_ROWS = 1_000

#: The ordering ``xid`` is one subquery per statement, not per row.
_PG_INSERT = (
    "INSERT INTO tiermem_event (xid, project, session_id, kind, payload, created_at) "
    f"SELECT {ORDER_XID}, v.* FROM"
)


_SETTLED = sa.text("xid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint")


def walk(
    conn: Connection, project: str, after: Position | None = None
) -> list[sa.ColumnElement[bool]]:
    """The conditions of ``project``'s events (after ``after``), to read in ``(xid,
    id)`` order along the position index (see the module's docstring)."""
    if conn.dialect.name != "sqlite":
        if after is None:
            return [V.project == project]
        return [V.project == project, sa.tuple_(V.xid, V.id) > sa.tuple_(*after)]
    xid, event_id = after or (0, 0)
    if xid != 0:
        return [sa.false()]  # every SQLite event has xid 0, before any such position
    return [V.project == project, V.xid == 0, V.id > event_id]


def read(
    conn: Connection, project: str, after: Position, limit: int, session_id: str | None = None
) -> list[StoredEvent]:
    """Up to ``limit`` events of ``project`` after ``after``, in delivery order (on
    PostgreSQL only those of settled transactions)."""
    statement = (
        sa.select(V.xid, V.id, V.session_id, V.kind, V.payload, V.created_at)
        .where(*walk(conn, project, after))
        .order_by(V.xid, V.id)
        .limit(limit)
    )
    if session_id is not None:
        statement = statement.where(V.session_id == session_id)
    if conn.dialect.name == "postgresql":
        statement = statement.where(_SETTLED)
    return [
        StoredEvent(xid, event_id, session, wire_kind(kind), payload, created_at)
        for xid, event_id, session, kind, payload, created_at in conn.execute(statement)
    ]


def last_position(conn: Connection, project: str, *, settled: bool = True) -> Position:
    """The position of the newest deliverable event of ``project`` ((0, 0) when there
    is none): on PostgreSQL the newest of settled transactions, so that following
    from it skips nothing an older transaction still commits. With ``settled`` false,
    the newest committed event, deliverable yet or not."""
    statement = (
        sa.select(V.xid, V.id)
        .where(*walk(conn, project))
        .order_by(V.xid.desc(), V.id.desc())
        .limit(1)
    )
    if settled and conn.dialect.name == "postgresql":
        statement = statement.where(_SETTLED)
    row = conn.execute(statement).first()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def consumer_position(conn: Connection, project: str, name: str) -> Position | None:
    """Where consumer ``name`` acknowledged up to, or ``None`` if it never did."""
    row = conn.execute(
        sa.select(C.xid, C.event_id).where(C.project == project, C.name == name)
    ).first()
    return None if row is None else (int(row[0]), int(row[1]))


def acknowledge(conn: Connection, project: str, name: str, position: Position, now: Any) -> None:
    """Move consumer ``name`` to ``position``; never backwards (an acknowledgement
    that arrives late changes nothing)."""
    statement = dialect_insert(conn, consumer_table).values(
        project=project, name=name, xid=position[0], event_id=position[1], updated_at=now
    )
    excluded = statement.excluded
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[C.project, C.name],
            set_={"xid": excluded.xid, "event_id": excluded.event_id, "updated_at": now},
            where=sa.tuple_(C.xid, C.event_id) < sa.tuple_(excluded.xid, excluded.event_id),
        )
    )


def prune(conn: Connection, project: str, before: Any, limit: int) -> int:
    """Delete up to ``limit`` events of ``project`` created before ``before``, in
    delivery order; the number deleted.

    The walk follows the position index: events come in about the order of their
    age, so the ones to delete are found first, and a batch that deletes fewer than
    ``limit`` has read every event of the project once (an event stamped earlier
    than one before it, by another process's clock, is still found)."""
    oldest = (
        sa.select(V.id)
        .where(*walk(conn, project), _older(conn, before))
        .order_by(V.xid, V.id)
        .limit(limit)
    )
    result = conn.execute(sa.delete(event_table).where(V.id.in_(oldest.scalar_subquery())))
    return int(result.rowcount)


def _older(conn: Connection, before: Any) -> sa.ColumnElement[bool]:
    """Events created before ``before``. On SQLite a database not migrated to 0017
    yet also holds times as text, which SQLite sorts after every integer: those are
    compared as text, the form their version wrote."""
    older: sa.ColumnElement[bool] = V.created_at < before
    if conn.dialect.name != "sqlite" or not isinstance(before, datetime):
        return older
    text = sa.literal(as_utc(before).strftime(_SQLITE_TEXT_TIME), sa.String())
    return sa.or_(older, sa.and_(sa.func.typeof(V.created_at) == "text", V.created_at < text))


#: The text SQLAlchemy wrote for a time on SQLite before migration 0017.
_SQLITE_TEXT_TIME = "%Y-%m-%d %H:%M:%S.%f"


def _conninfo(engine: Engine) -> str:
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


#: A follower whose LISTEN connection drops (a server restart, ``pg_terminate_backend``)
#: opens a new one: at once, then after pauses of :data:`LISTEN_BACKOFF` seconds
#: doubling up to :data:`LISTEN_BACKOFF_MAX`, :data:`LISTEN_ATTEMPTS` attempts in all
#: (about 8 s); then it raises :class:`~tiermem.errors.StorageUnavailable`.
LISTEN_ATTEMPTS = 8
LISTEN_BACKOFF = 0.1
LISTEN_BACKOFF_MAX = 2.0


def _pauses() -> list[float]:
    """The pause before each attempt to open a LISTEN connection."""
    return [0.0] + [
        min(LISTEN_BACKOFF * 2**attempt, LISTEN_BACKOFF_MAX)
        for attempt in range(LISTEN_ATTEMPTS - 1)
    ]


def _unavailable(error: BaseException | None) -> StorageUnavailable:
    return StorageUnavailable(
        f"the change feed's listening connection could not be opened after "
        f"{LISTEN_ATTEMPTS} attempts: {error}"
    )


class Listener:
    """Waits for PostgreSQL's notification that events committed; on SQLite it just
    sleeps, and the follower polls.

    A dropped connection is opened again (see :data:`LISTEN_ATTEMPTS`); :meth:`wait`
    then returns, so the follower reads from where it is: events are rows, and what
    committed while nobody listened is read like the rest.
    """

    def __init__(self, engine: Engine) -> None:
        self._conn: Any = None
        self._conninfo: str | None = None
        if engine.dialect.name == "postgresql":
            self._conninfo = _conninfo(engine)
            self._conn = self._open(self._conninfo)

    def _open(self, conninfo: str) -> Any:
        import psycopg  # the postgres extra: present whenever the engine is PostgreSQL

        error: BaseException | None = None
        for pause in _pauses():
            time.sleep(pause)
            try:
                conn = psycopg.connect(conninfo, autocommit=True)
            except psycopg.Error as exc:
                error = exc
                continue
            try:
                conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            except psycopg.Error as exc:
                conn.close()
                error = exc
                continue
            return conn
        raise _unavailable(error) from error

    def wait(self, timeout: float) -> None:
        """Return when events may have committed, or after ``timeout`` seconds.

        Raises:
            StorageUnavailable: the connection dropped and could not be opened again.
        """
        if self._conninfo is None:
            time.sleep(timeout)
            return
        if self._conn is None:  # an earlier attempt to open it failed
            self._conn = self._open(self._conninfo)
            return
        import psycopg

        try:
            for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                pass
            for _ in self._conn.notifies(timeout=0):  # the rest: one read serves them all
                pass
        except psycopg.Error:
            self.close()
            self._conn = self._open(self._conninfo)

    def close(self) -> None:
        """Stop listening."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class AsyncListener:
    """:class:`Listener` for an event loop."""

    def __init__(self) -> None:
        self._conn: Any = None
        self._conninfo: str | None = None

    async def start(self, engine: Engine) -> None:
        """Start listening (PostgreSQL only).

        Raises:
            StorageUnavailable: the connection could not be opened.
        """
        if engine.dialect.name == "postgresql":
            self._conninfo = _conninfo(engine)
            self._conn = await self._open(self._conninfo)

    async def _open(self, conninfo: str) -> Any:
        import psycopg

        error: BaseException | None = None
        for pause in _pauses():
            await asyncio.sleep(pause)
            try:
                conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
            except psycopg.Error as exc:
                error = exc
                continue
            try:
                await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            except psycopg.Error as exc:
                await conn.close()
                error = exc
                continue
            return conn
        raise _unavailable(error) from error

    async def wait(self, timeout: float) -> None:
        """Return when events may have committed, or after ``timeout`` seconds.

        Raises:
            StorageUnavailable: the connection dropped and could not be opened again.
        """
        if self._conninfo is None:
            await asyncio.sleep(timeout)
            return
        if self._conn is None:  # an earlier attempt to open it failed
            self._conn = await self._open(self._conninfo)
            return
        import psycopg

        try:
            async for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                pass
            async for _ in self._conn.notifies(timeout=0):
                pass
        except psycopg.Error:
            await self.close()
            self._conn = await self._open(self._conninfo)

    async def close(self) -> None:
        """Stop listening."""
        if self._conn is not None:
            await self._conn.close()
            self._conn = None
