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

from tiermem._storage.tables import FULL_TEXT_INDEXES

revision = "0020"
down_revision = "0019"


def _existing() -> list[str]:
    """The names of the full-text GIN indexes of this PostgreSQL database."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return []
    names = [f"ix_{index.name}" for index in FULL_TEXT_INDEXES]
    return [
        name
        for name in names
        if bind.exec_driver_sql("SELECT to_regclass(%(i)s)", {"i": name}).scalar() is not None
    ]


def upgrade() -> None:
    """Insert straight into each index from now on, and empty its pending list."""
    bind = op.get_bind()
    for name in _existing():
        bind.exec_driver_sql(f"ALTER INDEX {name} SET (fastupdate=off)")
        bind.exec_driver_sql("SELECT gin_clean_pending_list(%(i)s::regclass)", {"i": name})


def downgrade() -> None:
    """Give each index its pending list back (PostgreSQL's default)."""
    bind = op.get_bind()
    for name in _existing():
        bind.exec_driver_sql(f"ALTER INDEX {name} RESET (fastupdate)")
