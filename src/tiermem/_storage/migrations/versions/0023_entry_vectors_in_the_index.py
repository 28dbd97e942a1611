"""PostgreSQL: an entry's search vector lives in its GIN index alone, no longer also
in a stored column of the row.

A search of entries asks the index which rows hold each word and never reads a
row's vector (:func:`tiermem._storage.search.pg_candidates`), so the column was
only a copy. It was about the size of the text (488 bytes for 500 characters) and
every update of the row copied it: at 400 turns of 500-character messages a
conversation's entries took 1.88 MB of table, 1.10 MB without it. The upgrade drops
the column and its index and builds the index on the vector's expression (reading
every entry once); the downgrade adds the column back (a rewrite of the table)
with its index. SQLite is unchanged.

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import dataclasses

from alembic import op

from tiermem._storage import fts

revision = "0023"
down_revision = "0022"


def _entries_exist() -> bool:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return False
    found = bind.exec_driver_sql("SELECT to_regclass(%(t)s)", {"t": fts.ENTRY_INDEX.table.name})
    return found.scalar() is not None


def upgrade() -> None:
    """Drop the stored vector; index its expression."""
    if _entries_exist():
        fts.install_index(op.get_bind(), fts.ENTRY_INDEX)


def downgrade() -> None:
    """Store the vector again, indexed as revision 0022 has it."""
    if _entries_exist():
        fts.install_index(op.get_bind(), dataclasses.replace(fts.ENTRY_INDEX, stored=True))
