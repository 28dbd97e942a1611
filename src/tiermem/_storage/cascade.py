"""The one place that deletes sessions with every row that hangs off them.

Every path that removes a session (``clear_session``, an import that overwrites a
session, ``prune_expired``, ``forget``) calls :func:`delete_sessions`, and
``forget``'s dry run counts with :func:`count_session_rows`. A new table whose
rows belong to a session is added to :data:`SESSION_CHILDREN` once, and every
one of those paths deletes (or counts) its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .checkpoint_schema import blob_table, checkpoint_table, write_table
from .schema import entry_table, session_table, summary_table
from .statements import ids_type, ids_value, in_ids
from .vector_schema import entry_vector_table

__all__ = ["SESSION_CHILDREN", "count_session_rows", "delete_sessions", "in_values"]

#: Every table with rows of a session, and its column naming the session's pk, in
#: the order they are deleted (a table before the tables its foreign keys name).
#: Entry vectors are deleted before the entries their foreign key cascades from,
#: so that their count is known.
SESSION_CHILDREN: tuple[tuple[sa.Table, sa.Column[Any]], ...] = (
    # A thread's checkpoints (TieredSaver) belong to its session.
    (write_table, write_table.c.session_pk),
    (blob_table, blob_table.c.session_pk),
    (checkpoint_table, checkpoint_table.c.session_pk),
    (entry_vector_table, entry_vector_table.c.session_pk),
    (entry_table, entry_table.c.session_pk),
    (summary_table, summary_table.c.session_pk),
)


def in_values(
    conn: Connection,
    column: sa.ColumnElement[Any],
    values: Sequence[Any],
    item: sa.types.TypeEngine[Any] | None = None,
) -> sa.ColumnElement[bool]:
    """``column IN values`` with the values bound as one parameter (``item``: their
    type on PostgreSQL, integers by default)."""
    dialect = conn.dialect.name
    return in_ids(dialect, column, sa.literal(ids_value(dialect, values), ids_type(dialect, item)))


def count_session_rows(conn: Connection, pks: Sequence[int]) -> dict[str, int]:
    """Rows per table that :func:`delete_sessions` would delete for ``pks``."""
    counts: dict[str, int] = {}
    for table, column in (*SESSION_CHILDREN, (session_table, session_table.c.pk)):
        query = sa.select(sa.func.count()).select_from(table).where(in_values(conn, column, pks))
        counts[table.name] = int(conn.execute(query).scalar_one()) if pks else 0
    return counts


def delete_sessions(
    conn: Connection, pks: Sequence[int], *, still: sa.ColumnElement[bool] | None = None
) -> dict[str, int]:
    """Delete the sessions ``pks`` with their rows in every :data:`SESSION_CHILDREN`
    table (children first); ``still`` is a condition re-checked on the session rows
    in their ``DELETE``. Returns the rows deleted per table (the caller compares the
    sessions' count with ``len(pks)`` when ``still`` may have spared some)."""
    counts = dict.fromkeys([table.name for table, _ in SESSION_CHILDREN], 0)
    counts[session_table.name] = 0
    if not pks:
        return counts
    for table, column in SESSION_CHILDREN:
        if table is summary_table:  # merged summaries name their parent: unlink first
            unlink = sa.update(table).where(in_values(conn, column, pks)).values(parent_id=None)
            conn.execute(unlink)
        counts[table.name] = conn.execute(
            sa.delete(table).where(in_values(conn, column, pks))
        ).rowcount
    sessions = in_values(conn, session_table.c.pk, pks)
    if still is not None:
        sessions = sa.and_(sessions, still)
    counts[session_table.name] = conn.execute(sa.delete(session_table).where(sessions)).rowcount
    return counts
