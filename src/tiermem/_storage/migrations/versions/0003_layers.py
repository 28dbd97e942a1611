"""Memory layers and full-text search.

Creates ``tiermem_layer_scope`` and ``tiermem_layer_item``, and the full-text
indexes of conversation entries and layer items: on SQLite, FTS5 tables over
views with triggers (filled from existing rows); on PostgreSQL, generated
``tsvector`` columns with GIN indexes. Every step is skipped when
``create_tables`` made it already.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import dataclasses

from alembic import op

from tiermem._storage import fts
from tiermem._storage.layer_schema import ITEM_INDEX, item_table, scope_table

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    """Create the layer tables and the full-text indexes of entries and items."""
    bind = op.get_bind()
    for table in (scope_table, item_table):
        table.create(bind, checkfirst=True)
    for index in (fts.ENTRY_INDEX, ITEM_INDEX):  # stored vectors until revision 0023
        fts.install_index(bind, dataclasses.replace(index, stored=True))


def downgrade() -> None:
    """Drop the full-text indexes and the layer tables."""
    bind = op.get_bind()
    for index in (ITEM_INDEX, fts.ENTRY_INDEX):
        fts.uninstall(bind, index)
    for table in (item_table, scope_table):
        table.drop(bind, checkfirst=True)
