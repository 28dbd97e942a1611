"""PostgreSQL: the entries' and layer items' ``tsvector`` columns keep no word
positions.

A search of entries or items only asks which of its words a row holds (BM25 is
scored from those and the rows' lengths); nothing reads where a word occurs. With
positions an entry's vector was half again the size of its text (747 bytes for 500
characters in the checkpointer benchmark), stored in the row and copied by every
update of it; stripped, 484. The upgrade rebuilds both generated columns and their
GIN indexes (a rewrite of each table); the downgrade rebuilds them with positions.
The documents' index keeps its positions (``ts_rank`` reads them). SQLite's indexes
are unchanged.

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import dataclasses

from alembic import op

from tiermem._storage import fts
from tiermem._storage.tables import FULL_TEXT_INDEXES

revision = "0021"
down_revision = "0020"


def _rebuild(*, positions: bool) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    for index in FULL_TEXT_INDEXES:
        if index.positions:  # kept with positions at every revision
            continue
        found = bind.exec_driver_sql("SELECT to_regclass(%(t)s)", {"t": index.table.name})
        if found.scalar() is not None:
            # Stored vectors until revision 0023.
            fts.install_index(bind, dataclasses.replace(index, positions=positions, stored=True))


def upgrade() -> None:
    """Rebuild the entries' and items' vectors without positions."""
    _rebuild(positions=False)


def downgrade() -> None:
    """Rebuild them with positions, as revision 0020 has them."""
    _rebuild(positions=True)
