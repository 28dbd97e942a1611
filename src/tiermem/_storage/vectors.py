"""SQL of entry embeddings: which entries still need a vector, storing vectors,
and reading a session's vectors for a search (:mod:`tiermem._core.dense` scores
them)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .schema import entry_table, session_table
from .vector_schema import entry_vector_table

__all__ = [
    "entry_vectors",
    "session_vectors",
    "session_version",
    "store_vectors",
    "to_embed",
]

E, S, V = entry_table.c, session_table.c, entry_vector_table.c


def to_embed(
    conn: Connection,
    project: str,
    model: str,
    *,
    ids: Sequence[int] | None = None,
    limit: int = 256,
) -> list[tuple[int, int, str]]:
    """Current entries of ``project`` with no vector of ``model`` (all of them, or
    of ``ids``), oldest first: (entry id, session pk, content); a retired entry is
    never searched, so it is not embedded."""
    has_vector = sa.exists().where(V.entry_id == E.id, V.model == model)
    query = (
        sa.select(E.id, E.session_pk, E.content)
        .join(session_table, S.pk == E.session_pk)
        .where(S.project == project, ~has_vector, E.retired_at.is_(None))
        .order_by(E.id)
        .limit(limit)
    )
    if ids is not None:
        query = query.where(E.id.in_(list(ids)))
    return [(int(row[0]), int(row[1]), str(row[2])) for row in conn.execute(query)]


# ON CONFLICT: on PostgreSQL another transaction (the background worker while
# embed_missing runs) can store a vector for the same entry between this one's
# DELETE and INSERT; its vector, of the same text, is kept rather than failing.
_INSERT = sa.text(
    "INSERT INTO tiermem_entry_vector (entry_id, session_pk, model, vector) "
    "SELECT :entry_id, :session_pk, :model, :vector "
    "WHERE EXISTS (SELECT 1 FROM tiermem_entry WHERE id = :entry_id) "
    "ON CONFLICT (entry_id) DO NOTHING"
).bindparams(sa.bindparam("vector", type_=sa.LargeBinary))


def store_vectors(conn: Connection, model: str, rows: Sequence[tuple[int, int, bytes]]) -> int:
    """Store (entry id, session pk, vector) rows of ``model``, replacing any vector
    those entries had; entries deleted meanwhile, and entries another transaction
    stored a vector for meanwhile, are skipped. Returns how many of them have a
    vector now."""
    if not rows:
        return 0
    conn.execute(sa.delete(entry_vector_table).where(V.entry_id.in_([row[0] for row in rows])))
    params = [
        {"entry_id": entry_id, "session_pk": session_pk, "model": model, "vector": vector}
        for entry_id, session_pk, vector in rows
    ]
    conn.execute(_INSERT, params)
    stored = conn.execute(
        sa.select(sa.func.count()).where(V.entry_id.in_([row[0] for row in rows]))
    ).scalar_one()
    return int(stored)


def session_version(conn: Connection, session_pk: int, model: str) -> tuple[int, int]:
    """How many vectors of ``model`` a session has, and their largest row id."""
    count, last = conn.execute(
        sa.select(sa.func.count(), sa.func.coalesce(sa.func.max(V.id), 0)).where(
            V.session_pk == session_pk, V.model == model
        )
    ).one()
    return int(count), int(last)


def session_vectors(
    conn: Connection, session_pk: int, model: str, after: int
) -> list[tuple[int, int, bytes]]:
    """A session's vectors of ``model`` with a row id above ``after``: (row id,
    entry id, vector), in row id order."""
    query = (
        sa.select(V.id, V.entry_id, V.vector)
        .where(V.session_pk == session_pk, V.model == model, V.id > after)
        .order_by(V.id)
    )
    return [(int(row[0]), int(row[1]), bytes(row[2])) for row in conn.execute(query)]


def entry_vectors(conn: Connection, ids: Sequence[int], model: str) -> dict[int, bytes]:
    """The vectors of ``model`` of these entries (those that have one)."""
    if not ids:
        return {}
    query = sa.select(V.entry_id, V.vector).where(V.entry_id.in_(list(ids)), V.model == model)
    return {int(row[0]): bytes(row[1]) for row in conn.execute(query)}
