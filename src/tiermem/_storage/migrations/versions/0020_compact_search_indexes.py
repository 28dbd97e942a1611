"""PostgreSQL's full-text indexes keep no pending list (``fastupdate=off``).

GIN's pending list held every new row's words unsorted and uncompressed until a
vacuum or 4 MB of them: the entries' index of a 400-turn conversation took 1.6 MB
where the same index built at once takes 0.23 MB, and every search read the whole
list. The upgrade turns the list off on each existing index and moves what it holds
into the index; the downgrade turns it back on. SQLite's indexes are unchanged.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from alembic import op

from tiermem._storage import fts
from tiermem._storage.fts import FtsIndex
from tiermem._storage.tables import FULL_TEXT_INDEXES

revision = "0020"
down_revision = "0019"


def _existing() -> list[FtsIndex]:
    """The full-text indexes this PostgreSQL database has (none on SQLite)."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return []
    found = "SELECT to_regclass(%(i)s)"
    return [
        index
        for index in FULL_TEXT_INDEXES
        if bind.exec_driver_sql(found, {"i": f"ix_{index.name}"}).scalar() is not None
    ]


def upgrade() -> None:
    """Insert straight into each index from now on, and empty its pending list."""
    for index in _existing():
        fts.set_pending_list(op.get_bind(), index, enabled=False)


def downgrade() -> None:
    """Give each index its pending list back (PostgreSQL's default)."""
    for index in _existing():
        fts.set_pending_list(op.get_bind(), index, enabled=True)
