"""Stored JSON documents (the LangGraph store of ``tiermem-langgraph``).

Creates ``tiermem_document`` with its indexes and its full-text index (SQLite:
an FTS5 table over a view, kept in step by triggers; PostgreSQL: a generated
``tsvector`` column with a GIN index). Every step is skipped when
``create_tables`` made it already.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from alembic import op

from tiermem._storage import fts
from tiermem._storage.document_schema import DOCUMENT_INDEX, document_table

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    """Create the document table and its full-text index."""
    bind = op.get_bind()
    document_table.create(bind, checkfirst=True)
    fts.install_index(bind, DOCUMENT_INDEX)


def downgrade() -> None:
    """Drop the full-text index and the document table."""
    bind = op.get_bind()
    fts.uninstall(bind, DOCUMENT_INDEX)
    document_table.drop(bind, checkfirst=True)
