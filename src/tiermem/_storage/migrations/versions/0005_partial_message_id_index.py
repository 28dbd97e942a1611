"""The entry index on message ids keeps only entries that have one.

``ix_tiermem_entry_message_id (session_pk, message_id)`` becomes partial
(``WHERE message_id IS NOT NULL``): the lookups that use it (skipping messages
already stored, by id) always name an id, and an append of messages without
ids no longer writes to it.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"

NAME, TABLE, COLUMNS = "ix_tiermem_entry_message_id", "tiermem_entry", ["session_pk", "message_id"]
WHERE = sa.text("message_id IS NOT NULL")


def _replace(*, partial: bool) -> None:
    if NAME in {str(ix["name"]) for ix in sa.inspect(op.get_bind()).get_indexes(TABLE)}:
        op.drop_index(NAME, table_name=TABLE)
    where = WHERE if partial else None
    op.create_index(NAME, TABLE, COLUMNS, sqlite_where=where, postgresql_where=where)


def upgrade() -> None:
    """Rebuild the index as a partial one."""
    _replace(partial=True)


def downgrade() -> None:
    """Rebuild the index over every entry."""
    _replace(partial=False)
