"""Layer item embeddings (``ConversationMemory(embeddings=...)`` and its layers).

Creates ``tiermem_layer_item_vector`` (one vector per stored layer item, with the
id of the model that made it); skipped when ``create_tables`` made it already.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

from tiermem._storage.vector_schema import item_vector_table

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    """Create the layer item vector table."""
    item_vector_table.create(op.get_bind(), checkfirst=True)


def downgrade() -> None:
    """Drop the layer item vector table."""
    item_vector_table.drop(op.get_bind(), checkfirst=True)
