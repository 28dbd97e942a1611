"""Indexes for tier maintenance and deletion.

* ``ix_tiermem_session_project_accessed (project, last_accessed)``: tier
  statistics, least-recently-used lists, ``prune_expired`` and
  ``list_sessions`` read a project's sessions by access time. It replaces
  ``ix_tiermem_session_accessed (last_accessed)``, so each access still
  maintains one access-time index.
* ``ix_tiermem_entry_summary (summary_id)`` and ``ix_tiermem_summary_parent
  (parent_id)``, partial (only non-NULL keys, so appends never touch them):
  deleting a summary checks the foreign keys that point at it, and without
  these both databases scan every entry and summary for each summary deleted.

Each step is skipped when ``create_tables`` made the schema already.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"

SESSION, ENTRY, SUMMARY = "tiermem_session", "tiermem_entry", "tiermem_summary"
ACCESSED = "ix_tiermem_session_accessed"
#: (name, table, column or columns, partial: only rows where the column is not NULL)
NEW_INDEXES = (
    ("ix_tiermem_session_project_accessed", SESSION, ["project", "last_accessed"], False),
    ("ix_tiermem_entry_summary", ENTRY, ["summary_id"], True),
    ("ix_tiermem_summary_parent", SUMMARY, ["parent_id"], True),
)


def _indexes(table: str) -> set[str]:
    return {str(index["name"]) for index in sa.inspect(op.get_bind()).get_indexes(table)}


def upgrade() -> None:
    """Create the new indexes and drop the last_accessed one."""
    for name, table, columns, partial in NEW_INDEXES:
        if name not in _indexes(table):
            where = sa.text(f"{columns[0]} IS NOT NULL") if partial else None
            op.create_index(name, table, columns, sqlite_where=where, postgresql_where=where)
    if ACCESSED in _indexes(SESSION):
        op.drop_index(ACCESSED, table_name=SESSION)


def downgrade() -> None:
    """Restore the last_accessed index and drop the new ones."""
    if ACCESSED not in _indexes(SESSION):
        op.create_index(ACCESSED, SESSION, ["last_accessed"])
    for name, table, _columns, _partial in NEW_INDEXES:
        if name in _indexes(table):
            op.drop_index(name, table_name=table)
