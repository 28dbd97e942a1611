"""Conversation entries are indexed for search in batches (SQLite).

An appended entry is recorded in ``tiermem_entry_fts_pending`` and indexed by
the next flush (every ``tiermem._storage.store.FTS_BATCH`` entries stored, and before
every search) instead of inside its own transaction; the view behind the FTS5
table leaves pending entries out. The upgrade rebuilds the entry index in that
layout; PostgreSQL is unchanged.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import dataclasses

from alembic import op

from tiermem._storage import fts

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    """Rebuild the entry index with pending rows."""
    # PostgreSQL's vector is a stored column until revision 0023.
    fts.install_index(op.get_bind(), dataclasses.replace(fts.ENTRY_INDEX, stored=True))


def downgrade() -> None:
    """Rebuild the entry index with per-row triggers (pending rows are indexed)."""
    bind = op.get_bind()
    fts.install_index(bind, dataclasses.replace(fts.ENTRY_INDEX, deferred=False, stored=True))
