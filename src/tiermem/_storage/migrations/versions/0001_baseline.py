"""Baseline: the session, summary and entry tables.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from alembic import op

from tiermem._storage.schema import entry_table, session_table, summary_table

revision = "0001"
down_revision = None


def upgrade() -> None:
    """Create the baseline tables unless ``create_tables`` made them already."""
    bind = op.get_bind()
    for table in (session_table, summary_table, entry_table):
        table.create(bind, checkfirst=True)


def downgrade() -> None:
    """Drop the baseline tables."""
    bind = op.get_bind()
    for table in (entry_table, summary_table, session_table):
        table.drop(bind, checkfirst=True)
