"""Compression writes no entry: ``tiermem_session.compressed_seq``.

Compression took a prefix of a session's current, unpinned entries and wrote each
of them (``summary_id``). Now it records only the prefix's end, on the session row,
and a current entry's summary is read off the level-1 ranges
(:mod:`tiermem._storage.coverage`). The active entries are then those after the
prefix and the pinned ones within it, read through the unique (session, seq) index
and a new partial index of pinned entries; the index of (session, summary, seq) goes.

The upgrade adds the column (set to the end of each session's level-1 summaries)
and swaps the indexes; compressed entries stored before keep their ``summary_id``,
which every read still honours. The downgrade writes ``summary_id`` into each
current compressed entry, as an earlier version reads them, then swaps the indexes
back and drops the column (SQLite 3.35 and later drop a column in place).

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tiermem._storage import coverage

revision = "0025"
down_revision = "0024"

SESSION, ENTRY, COLUMN = "tiermem_session", "tiermem_entry", "compressed_seq"
PINNED, ACTIVE = "ix_tiermem_entry_pinned", "ix_tiermem_entry_active"


def _present() -> tuple[set[str], set[str]] | None:
    """The session table's columns and the entry table's indexes (``None`` before
    ``create_tables`` made them)."""
    inspector = sa.inspect(op.get_bind())
    if not inspector.has_table(SESSION) or not inspector.has_table(ENTRY):
        return None
    columns = {str(column["name"]) for column in inspector.get_columns(SESSION)}
    indexes = {str(index["name"]) for index in inspector.get_indexes(ENTRY)}
    return columns, indexes


def upgrade() -> None:
    """Add and fill the column; index the pinned entries instead of the summaries (what
    ``create_tables`` also does on a database's first use by this version)."""
    coverage.install(op.get_bind())


def downgrade() -> None:
    """Write each current compressed entry's summary; swap the indexes back; drop
    the column."""
    present = _present()
    if present is None:
        return
    columns, indexes = present
    if COLUMN in columns:
        bind = op.get_bind()
        unpinned = "NOT pinned" if bind.dialect.name == "postgresql" else "pinned = 0"
        bind.exec_driver_sql(
            f"UPDATE {ENTRY} SET summary_id = (SELECT m.id FROM tiermem_summary AS m"
            f" WHERE m.session_pk = {ENTRY}.session_pk AND m.level = 1"
            f" AND m.first_seq <= {ENTRY}.seq AND m.last_seq >= {ENTRY}.seq)"
            f" WHERE summary_id IS NULL AND retired_at IS NULL AND {unpinned}"
            f" AND seq <= (SELECT s.{COLUMN} FROM {SESSION} AS s WHERE s.pk = {ENTRY}.session_pk)"
        )
    if ACTIVE not in indexes:
        op.create_index(ACTIVE, ENTRY, ["session_pk", "summary_id", "seq"])
    if PINNED in indexes:
        op.drop_index(PINNED, table_name=ENTRY)
    if COLUMN in columns:
        op.drop_column(SESSION, COLUMN)
