"""Entry embeddings (``ConversationMemory(embeddings=...)``).

Creates ``tiermem_entry_vector`` (one vector per entry, with the id of the model
that made it); skipped when ``create_tables`` made it already.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from alembic import op

from tiermem._storage.vector_schema import entry_vector_table

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    """Create the entry vector table."""
    entry_vector_table.create(op.get_bind(), checkfirst=True)


def downgrade() -> None:
    """Drop the entry vector table."""
    entry_vector_table.drop(op.get_bind(), checkfirst=True)
