"""A cheaper change feed: no index on the events' age.

``ix_tiermem_event_created (project, created_at)`` is dropped: retention walks the
position index instead (:func:`tiermem._storage.events.prune`), and every change's
write no longer updates a second index of the event table. Stored events are kept
as they are; ``entry:added`` events written from now on store their payload as an
array of its values, which readers turn back into the same object, and a downgrade
writes those payloads back as objects, the form earlier versions read.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

from tiermem.events import EntryAdded, load_payload

revision = "0016"
down_revision = "0015"

NAME, TABLE, COLUMNS = "ix_tiermem_event_created", "tiermem_event", ["project", "created_at"]
#: Payloads rewritten per statement by the downgrade.
BATCH = 1_000


def _has_index() -> bool:
    return NAME in {str(ix["name"]) for ix in sa.inspect(op.get_bind()).get_indexes(TABLE)}


def upgrade() -> None:
    """Drop the index on the events' age."""
    if _has_index():
        op.drop_index(NAME, table_name=TABLE)


def downgrade() -> None:
    """Restore the index, and the object form of ``entry:added`` payloads."""
    if not _has_index():
        op.create_index(NAME, TABLE, COLUMNS)
    bind = op.get_bind()
    events = sa.table(TABLE, sa.column("id", sa.Integer), sa.column("kind"), sa.column("payload"))
    after = 0
    while True:
        rows = bind.execute(
            sa.select(events.c.id, events.c.payload)
            .where(
                events.c.kind == EntryAdded.kind,
                events.c.payload.startswith("["),
                events.c.id > after,
            )
            .order_by(events.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        bind.execute(
            sa.update(events)
            .where(events.c.id == sa.bindparam("event_id"))
            .values(payload=sa.bindparam("object")),
            [
                {
                    "event_id": event_id,
                    "object": json.dumps(
                        load_payload(EntryAdded.kind, payload),
                        separators=(",", ":"),
                        sort_keys=True,
                    ),
                }
                for event_id, payload in rows
            ],
        )
        after = rows[-1][0]
