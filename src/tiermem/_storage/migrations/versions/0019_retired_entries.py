"""An entry may be retired: ``tiermem_entry.retired_at``, when it stopped being current.

A graph's checkpoint that revises a message (same id, new content) or removes one
keeps the superseded entry, which older checkpoints still read back, and marks it
retired: contexts, compression, search and recall leave it out. The column is
nullable and every stored entry stays current (``NULL``). A downgrade drops the
column: the entries it marked become current again, counted again in their
session's active counters (one retired inside a compressed prefix is then an active
entry there, which ``tiermem doctor`` reports).

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tiermem._storage.schema import utc_column

revision = "0019"
down_revision = "0018"

TABLE, COLUMN = "tiermem_entry", "retired_at"


def _columns() -> set[str] | None:
    """The entry table's columns (``None`` when it is not created yet)."""
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table(TABLE):
        return None
    return {str(column["name"]) for column in inspector.get_columns(TABLE)}


def upgrade() -> None:
    """Add the column (a table not created yet gets it from ``create_tables``)."""
    columns = _columns()
    if columns is not None and COLUMN not in columns:
        op.add_column(TABLE, sa.Column(COLUMN, utc_column(), nullable=True))


#: The retired entries of a session that are not compressed: those its active
#: counters leave out.
_HELD = (
    "FROM tiermem_entry AS e WHERE e.session_pk = tiermem_session.pk"
    " AND e.retired_at IS NOT NULL AND e.summary_id IS NULL"
)


def downgrade() -> None:
    """Count the retired entries as active again and drop the column (SQLite 3.35
    and later drop a column in place)."""
    columns = _columns()
    if columns is None or COLUMN not in columns:
        return
    op.get_bind().exec_driver_sql(
        "UPDATE tiermem_session SET"
        f" active_count = active_count + (SELECT count(*) {_HELD}),"
        f" active_tokens = active_tokens + (SELECT coalesce(sum(e.token_count), 0) {_HELD})"
        f" WHERE EXISTS (SELECT 1 {_HELD})"
    )
    op.drop_column(TABLE, COLUMN)
