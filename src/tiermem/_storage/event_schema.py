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

On PostgreSQL a statement trigger sends ``NOTIFY tiermem_event`` when events are
inserted (by one transaction at a time: see :data:`NOTIFY_LOCK_KEY`), so followers
wake at the commit instead of waiting for their poll interval.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlmodel import Field, SQLModel

from .schema import utc_column

__all__ = [
    "NOTIFY_CHANNEL",
    "NOTIFY_TRIGGER",
    "ConsumerRow",
    "EventRow",
    "consumer_table",
    "event_table",
    "install_notify",
]

#: The channel PostgreSQL notifies when events commit.
NOTIFY_CHANNEL = "tiermem_event"
#: The trigger that notifies it (and its function's name).
NOTIFY_TRIGGER = "tiermem_event_notify"

# A BIGINT primary key is not SQLite's rowid alias: keep INTEGER there.
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


class EventRow(SQLModel, table=True):
    """One change of the feed."""

    __tablename__ = "tiermem_event"
    __table_args__ = (
        # Readers walk a project in delivery order, and so does retention: events
        # are written about in the order of their age, so the oldest come first on
        # this walk, and a second index on age would cost every change's write.
        sa.Index("ix_tiermem_event_position", "project", "xid", "id"),
        {"sqlite_autoincrement": True},
    )

    id: int | None = Field(default=None, sa_column=sa.Column(_BIG_ID, primary_key=True))
    xid: int = Field(sa_type=sa.BigInteger)
    project: str = Field(max_length=255)
    session_id: str | None = Field(default=None, max_length=255)
    kind: str = Field(max_length=32)
    payload: str = Field(sa_type=sa.Text)
    created_at: datetime = Field(sa_type=utc_column())


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
