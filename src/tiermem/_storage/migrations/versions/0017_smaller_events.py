"""A smaller event row: the change feed writes one per appended message.

Written from now on (stored events are kept and read as before):

* an ``entry:added`` event's ``kind`` is empty (its array payload names it);
* its payload gives the entry's type, and the most frequent roles, as numbers.

On SQLite, stored events change too:

* ``created_at`` holds microseconds since the Unix epoch (8 bytes) instead of the
  26-character text: stored times are converted;
* the position index is on ``project`` alone, SQLite's index entries ending with
  the row's id, every ``xid`` being 0 there.

A downgrade restores what 0016 reads: ``entry:added`` as the kind, types and roles as
strings, times as text and the index on ``(project, xid, id)``.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from tiermem._storage.event_schema import ENTRY_ADDED, POSITION_INDEX
from tiermem.events import EntryAdded

revision = "0017"
down_revision = "0016"

TABLE = "tiermem_event"
#: Payloads rewritten per statement by the downgrade.
BATCH = 1_000

#: SQLite: a time as SQLAlchemy wrote it (``2026-11-27 04:04:33.214932``, UTC), in
#: microseconds since the epoch (``strftime('%s')`` reads the text as UTC).
_TEXT_TO_MICROS = (
    "CAST(strftime('%s', substr(created_at, 1, 19)) AS INTEGER) * 1000000"
    " + CAST(substr(substr(created_at, 21) || '000000', 1, 6) AS INTEGER)"
)
#: SQLite: microseconds since the epoch as that text again (SQLite's ``/`` and ``%``
#: round toward zero: the fraction is taken modulo a second, also before 1970).
_FRACTION = "((created_at % 1000000) + 1000000) % 1000000"
_MICROS_TO_TEXT = (
    f"strftime('%Y-%m-%d %H:%M:%S', (created_at - {_FRACTION}) / 1000000, 'unixepoch')"
    f" || printf('.%06d', {_FRACTION})"
)


def _position_index(columns: list[str]) -> None:
    """Make the position index the one on ``columns`` (SQLite)."""
    found = {
        str(ix["name"]): list(ix["column_names"])
        for ix in sa.inspect(op.get_bind()).get_indexes(TABLE)
    }
    if found.get(POSITION_INDEX) == columns:
        return
    if POSITION_INDEX in found:
        op.drop_index(POSITION_INDEX, table_name=TABLE)
    op.create_index(POSITION_INDEX, TABLE, columns)


def upgrade() -> None:
    """On SQLite, convert the times and index the position on ``project`` alone."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    bind.exec_driver_sql(
        f"UPDATE {TABLE} SET created_at = {_TEXT_TO_MICROS} WHERE typeof(created_at) = 'text'"
    )
    _position_index(["project"])


def downgrade() -> None:
    """Write kinds, payloads and (SQLite) times and index back as 0016 has them."""
    bind = op.get_bind()
    events = sa.table(TABLE, sa.column("id", sa.Integer), sa.column("kind"), sa.column("payload"))
    bind.execute(sa.update(events).where(events.c.kind == "").values(kind=ENTRY_ADDED))
    after = 0
    while True:
        rows = bind.execute(
            sa.select(events.c.id, events.c.payload)
            .where(
                events.c.kind == ENTRY_ADDED,
                events.c.payload.startswith("["),
                events.c.id > after,
            )
            .order_by(events.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        changed = [
            {"event_id": event_id, "spelled": spelled}
            for event_id, payload in rows
            if (spelled := _spelled(payload)) != payload
        ]
        if changed:
            bind.execute(
                sa.update(events)
                .where(events.c.id == sa.bindparam("event_id"))
                .values(payload=sa.bindparam("spelled")),
                changed,
            )
        after = rows[-1][0]
    if bind.dialect.name == "sqlite":
        bind.exec_driver_sql(
            f"UPDATE {TABLE} SET created_at = {_MICROS_TO_TEXT}"
            " WHERE typeof(created_at) = 'integer'"
        )
        _position_index(["project", "xid", "id"])


def _spelled(payload: str) -> str:
    """An entry's stored array with its type and role as strings (0016's form)."""
    values = json.loads(payload)
    if not isinstance(values[4], int) and not isinstance(values[5], int):
        return payload
    whole = EntryAdded.expand(values)
    values[4], values[5] = whole["type"], whole["role"]
    return json.dumps(values, separators=(",", ":"))
