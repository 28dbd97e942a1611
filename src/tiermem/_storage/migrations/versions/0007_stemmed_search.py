"""Full-text indexes stem English words (FTS5 ``porter unicode61``, PostgreSQL's
``english`` configuration), so a search for "trips" finds "trip".

The upgrade rebuilds every full-text index with the new tokenizer (on PostgreSQL
the generated ``tsvector`` columns are computed again, which rewrites the tables);
the downgrade rebuilds them without stemming.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import dataclasses

from alembic import op

from tiermem._storage import fts
from tiermem._storage.tables import FULL_TEXT_INDEXES

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    """Rebuild every full-text index with stemming."""
    bind = op.get_bind()
    for index in FULL_TEXT_INDEXES:  # stored vectors until revision 0023
        fts.install_index(bind, dataclasses.replace(index, stored=True))


def downgrade() -> None:
    """Rebuild every full-text index without stemming (revision 0006's words)."""
    bind = op.get_bind()
    for index in FULL_TEXT_INDEXES:
        fts.install_index(bind, dataclasses.replace(index, stored=True), stemmed=False)
