"""An entry's message JSON is kept packed: each run of the JSON that nearly every
message repeats (a field at its usual value, the ``type`` its ``data`` repeats) as one
control character (:func:`tiermem._core.messages.pack`).

A plain message's row is 70 (human) to 128 (AI) characters shorter, and every read
puts the runs back exactly (:func:`tiermem._core.messages.unpack`). Rows stored
before are read as they are, so the upgrade changes nothing. The downgrade unpacks
every packed row, as an earlier version reads them.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tiermem._core.packing import unpack

revision = "0024"
down_revision = "0023"

#: Rows read (and rewritten) per statement in the downgrade.
BATCH = 500


def upgrade() -> None:
    """Nothing to change: both forms are read."""


def downgrade() -> None:
    """Unpack each packed row (every row is read once, in batches by id)."""
    bind = op.get_bind()
    if not sa.inspect(bind).has_table("tiermem_entry"):
        return
    entry = sa.table("tiermem_entry", sa.column("id"), sa.column("message"))
    after = 0
    while True:
        rows = bind.execute(
            sa.select(entry.c.id, entry.c.message)
            .where(entry.c.id > after)
            .order_by(entry.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        changed = [{"pk": pk, "whole": unpack(body)} for pk, body in rows if unpack(body) != body]
        if changed:
            bind.execute(
                sa.update(entry)
                .where(entry.c.id == sa.bindparam("pk"))
                .values(message=sa.bindparam("whole")),
                changed,
            )
        after = rows[-1][0]
