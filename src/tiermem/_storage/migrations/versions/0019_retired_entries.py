"""An entry may be retired: ``tiermem_entry.retired_at``, when it stopped being current.

A graph's checkpoint that revises a message (same id, new content) or removes one
keeps the superseded entry, which older checkpoints still read back, and marks it
retired: contexts, compression, search and recall leave it out. The column is
nullable and every stored entry stays current (``NULL``). A downgrade drops the
column: the entries it marked become current again.

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


def downgrade() -> None:
    """Drop the column (SQLite 3.35 and later drop a column in place)."""
    columns = _columns()
    if columns is not None and COLUMN in columns:
        op.drop_column(TABLE, COLUMN)
