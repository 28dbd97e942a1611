"""SQLite: the tables of checkpoint values and pending writes are ``WITHOUT ROWID``.

Both have a primary key of several columns, which a rowid table keeps in an index of
its own beside the rows; a ``WITHOUT ROWID`` table is that index, so each row's key
is stored once (about 7 % of a 400-turn thread's file). Each table is rebuilt: renamed,
created again in the new form from its own stored definition, its rows copied, the
old table dropped and its index created again. PostgreSQL has no rowid: nothing
changes there. A downgrade rebuilds them as rowid tables, the form 0015 created.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tiermem._storage.checkpoint_schema import blob_table, write_table

revision = "0018"
down_revision = "0017"

_TABLES = (blob_table, write_table)
_CLAUSE = " WITHOUT ROWID"


def _rebuild(table: sa.Table, without_rowid: bool) -> None:
    """Rebuild ``table`` (SQLite) with or without a rowid, keeping its rows."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    found = bind.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table.name,)
    ).scalar()
    if found is None:  # not created yet: create_tables will make it in the new form
        return
    definition = str(found).rstrip()
    if definition.upper().endswith(_CLAUSE) == without_rowid:
        return  # already in that form
    if without_rowid:
        definition += _CLAUSE
    else:
        definition = definition[: -len(_CLAUSE)]
    old = f"{table.name}_before_0018"
    columns = ", ".join(column.name for column in table.columns)
    bind.exec_driver_sql(f"ALTER TABLE {table.name} RENAME TO {old}")
    bind.exec_driver_sql(definition)  # its own statement, under the table's own name
    bind.exec_driver_sql(f"INSERT INTO {table.name} ({columns}) SELECT {columns} FROM {old}")
    bind.exec_driver_sql(f"DROP TABLE {old}")  # and the indexes that went with it
    for index in table.indexes:
        index.create(bind)


def upgrade() -> None:
    """Rebuild the two tables without a rowid (SQLite)."""
    for table in _TABLES:
        _rebuild(table, without_rowid=True)


def downgrade() -> None:
    """Rebuild them with a rowid again (SQLite)."""
    for table in _TABLES:
        _rebuild(table, without_rowid=False)
