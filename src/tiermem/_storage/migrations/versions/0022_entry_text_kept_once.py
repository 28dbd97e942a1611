"""An entry's text is kept once: in its ``content`` column, and no longer again in its
message JSON.

Entries stored from this revision on keep ``0`` where their message JSON held the
text, when the message's content is that text itself (plain-text messages; content
blocks and tool calls keep their JSON whole); every read puts the text back
(:func:`tiermem._core.messages.stored_message`). Rows stored before are read as they
are, so the upgrade changes nothing. The downgrade puts the text back into every
such row, as an earlier version reads them.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tiermem._core.messages import full_json, stored_message

revision = "0022"
down_revision = "0021"

#: Rows read (and rewritten) per statement in the downgrade.
BATCH = 500


def upgrade() -> None:
    """Nothing to change: both forms are read."""


def downgrade() -> None:
    """Put each hollow entry's text back into its JSON (every row is read once: which
    JSON is hollow is told exactly by its start, which SQL's patterns cannot)."""
    bind = op.get_bind()
    if not sa.inspect(bind).has_table("tiermem_entry"):
        return
    entry = sa.table("tiermem_entry", sa.column("id"), sa.column("content"), sa.column("message"))
    after = 0
    while True:
        rows = bind.execute(
            sa.select(entry.c.id, entry.c.message, entry.c.content)
            .where(entry.c.id > after)
            .order_by(entry.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        whole = [
            {"pk": pk, "whole": full_json(stored_message(body, text))} for pk, body, text in rows
        ]
        changed = [
            row for row, (_, body, _) in zip(whole, rows, strict=True) if row["whole"] != body
        ]
        if changed:
            bind.execute(
                sa.update(entry)
                .where(entry.c.id == sa.bindparam("pk"))
                .values(message=sa.bindparam("whole")),
                changed,
            )
        after = rows[-1][0]
