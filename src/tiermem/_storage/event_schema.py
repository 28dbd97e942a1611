"""The tables of the change feed (:mod:`tiermem.feed`).

* ``tiermem_event``: one row per change, written in the transaction of the
  change itself. ``id`` comes from a sequence and is never reused; ``xid`` is an
  ordering transaction id on PostgreSQL (the writing transaction's id, or a newer
  one its statement saw completed: :data:`tiermem._storage.events.ORDER_XID`;
  ``0`` on SQLite). Readers deliver events in ``(xid, id)`` order and, on
  PostgreSQL, only those whose ``xid`` is older than every transaction still
  running, so an event that commits later can never sort before one already
  delivered (a sequence hands out ids in call order, not commit order).
  ``payload`` is the event's JSON (an ``entry:added`` event's as an array of its
  values: :meth:`tiermem.events.EntryAdded.parts`). Retention walks the position
  index, and no index is kept on ``created_at`` (migration 0016 drops the one
  earlier versions had).
* ``tiermem_consumer``: the acknowledged position of each named consumer.

An appended message writes one event, so the event row is kept small (migration
0017):

* ``kind`` is stored empty for ``entry:added`` (:data:`ENTRY_ADDED`): the kind of
  every other row is its wire name, and readers give the wire name back
  (:func:`wire_kind`);
* on SQLite ``created_at`` holds the microseconds since the Unix epoch, an
  integer of 8 bytes instead of a text of 26 (:class:`EventTime`);
* on SQLite, where every ``xid`` is 0, the position index is on ``project``
  alone: SQLite ends every index entry with its row's id, so the index is in
  ``(project, id)`` order, the delivery order, without storing ``xid`` and ``id``
  again.

On PostgreSQL a statement trigger sends ``NOTIFY tiermem_event`` when events are
inserted (by one transaction at a time: see :data:`NOTIFY_LOCK_KEY`), so followers
wake at the commit instead of waiting for their poll interval.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlmodel import Field, SQLModel

from .._core.clock import as_utc
from .schema import utc_column

__all__ = [
    "ENTRY_ADDED",
    "NOTIFY_CHANNEL",
    "NOTIFY_TRIGGER",
    "POSITION_INDEX",
    "ConsumerRow",
    "EventRow",
    "EventTime",
    "consumer_table",
    "event_table",
    "install_notify",
    "stored_kind",
    "wire_kind",
]

#: The channel PostgreSQL notifies when events commit.
NOTIFY_CHANNEL = "tiermem_event"
#: The trigger that notifies it (and its function's name).
NOTIFY_TRIGGER = "tiermem_event_notify"

# A BIGINT primary key is not SQLite's rowid alias: keep INTEGER there.
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

#: The wire name of the kind stored empty (one event per appended message).
ENTRY_ADDED = "entry:added"
#: The name of the index in delivery order.
POSITION_INDEX = "ix_tiermem_event_position"


def stored_kind(kind: str) -> str:
    """What the ``kind`` column holds for an event of ``kind``."""
    return "" if kind == ENTRY_ADDED else kind


def wire_kind(stored: str) -> str:
    """The kind of an event whose ``kind`` column holds ``stored`` (rows written
    before migration 0017 hold ``entry:added`` itself)."""
    return stored or ENTRY_ADDED


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_micros(value: datetime) -> int:
    """``value`` as microseconds since the Unix epoch (a naive time is UTC)."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (aware - _EPOCH) // _MICROSECOND


def from_micros(value: int) -> datetime:
    """The UTC time ``value`` microseconds after the Unix epoch."""
    return _EPOCH + timedelta(microseconds=value)


class EventTime(sa.types.TypeDecorator[datetime]):
    """An event's time: ``timestamptz`` on PostgreSQL; on SQLite the microseconds
    since the Unix epoch as an integer.

    The column is declared ``DATETIME`` on SQLite as before, whose numeric affinity
    stores an integer as it is. A text time (a row an earlier version wrote, in a
    database not migrated yet) still reads back as its time.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Any:
        """On SQLite, the time's microseconds since the epoch."""
        if dialect.name != "sqlite":
            return super().bind_processor(dialect)
        return to_micros

    def result_processor(self, dialect: Dialect, coltype: Any) -> Any:
        """On SQLite, the time of stored microseconds (or of an earlier version's text)."""
        if dialect.name != "sqlite":
            return super().result_processor(dialect, coltype)

        def process(value: int | str) -> datetime:
            if isinstance(value, int):
                return from_micros(value)
            return as_utc(datetime.fromisoformat(value))

        return process


class EventRow(SQLModel, table=True):
    """One change of the feed."""

    __tablename__ = "tiermem_event"
    __table_args__ = (
        # Readers walk a project in delivery order, and so does retention: events
        # are written about in the order of their age, so the oldest come first on
        # this walk, and a second index on age would cost every change's write.
        sa.Index(POSITION_INDEX, "project", "xid", "id").ddl_if(dialect="postgresql"),
        # SQLite's index entries end with the row's id, and every xid is 0 there.
        sa.Index(POSITION_INDEX, "project").ddl_if(dialect="sqlite"),
        {"sqlite_autoincrement": True},
    )

    id: int | None = Field(default=None, sa_column=sa.Column(_BIG_ID, primary_key=True))
    xid: int = Field(sa_type=sa.BigInteger)
    project: str = Field(max_length=255)
    session_id: str | None = Field(default=None, max_length=255)
    kind: str = Field(max_length=32)
    payload: str = Field(sa_type=sa.Text)
    created_at: datetime = Field(sa_type=EventTime())


class ConsumerRow(SQLModel, table=True):
    """Where a named consumer of a project's feed has acknowledged up to."""

    __tablename__ = "tiermem_consumer"

    project: str = Field(max_length=255, primary_key=True)
    name: str = Field(max_length=255, primary_key=True)
    xid: int = Field(sa_type=sa.BigInteger)
    event_id: int = Field(sa_type=sa.BigInteger)
    updated_at: datetime = Field(sa_type=utc_column())


event_table: sa.Table = EventRow.__table__  # type: ignore[attr-defined]
consumer_table: sa.Table = ConsumerRow.__table__  # type: ignore[attr-defined]

#: Advisory lock key ("tevn") taken by the one transaction that notifies at a time.
NOTIFY_LOCK_KEY = 0x7465_766E

# PostgreSQL serializes the commits of notifying transactions (a database-wide lock
# held to the end of the commit), which under many concurrent writers cost more than
# writing the events. So only a transaction that gets the advisory lock notifies;
# one that commits while another holds it is seen by the follower's next read, woken
# by the other's notification or, at worst, by its poll interval.
_NOTIFY_FUNCTION = f"""\
CREATE OR REPLACE FUNCTION {NOTIFY_TRIGGER}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF pg_try_advisory_xact_lock({NOTIFY_LOCK_KEY}) THEN
        PERFORM pg_notify('{NOTIFY_CHANNEL}', '');
    END IF;
    RETURN NULL;
END $$"""

_NOTIFY_TRIGGER = f"""\
CREATE TRIGGER {NOTIFY_TRIGGER} AFTER INSERT ON tiermem_event
FOR EACH STATEMENT EXECUTE FUNCTION {NOTIFY_TRIGGER}()"""


def install_notify(conn: Connection) -> None:
    """Create the PostgreSQL trigger that notifies followers (idempotent; nothing on
    SQLite, whose followers poll)."""
    if conn.dialect.name != "postgresql":
        return
    exists = conn.exec_driver_sql(
        "SELECT 1 FROM pg_trigger WHERE tgrelid = 'tiermem_event'::regclass AND tgname = %(name)s",
        {"name": NOTIFY_TRIGGER},
    ).first()
    if exists is None:
        conn.exec_driver_sql(_NOTIFY_FUNCTION)
        conn.exec_driver_sql(_NOTIFY_TRIGGER)
