"""Graph checkpoints kept with their sessions (``tiermem.threads``, ``TieredSaver``).

Creates ``tiermem_checkpoint``, ``tiermem_checkpoint_blob`` and
``tiermem_checkpoint_write``; each is skipped when ``create_tables`` made it already.

Revision ID: 0015
Revises: 0010
"""

from __future__ import annotations

from alembic import op

from tiermem._storage.checkpoint_schema import blob_table, checkpoint_table, write_table

revision = "0015"
down_revision = "0010"

_TABLES = (checkpoint_table, blob_table, write_table)


def upgrade() -> None:
    """Create the checkpoint tables."""
    for table in _TABLES:
        table.create(op.get_bind(), checkfirst=True)


def downgrade() -> None:
    """Drop the checkpoint tables."""
    for table in reversed(_TABLES):
        table.drop(op.get_bind(), checkfirst=True)
