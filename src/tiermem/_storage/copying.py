"""SQL of a whole-project copy between two databases (:mod:`tiermem.copying`): the
projects and sessions a database holds, a layer scope with its items, documents by
page, and change-feed events in delivery order.

Each kind is read as *content*: the columns that say what was stored, without row
ids (a target numbers its own rows) and without the access bookkeeping
(``last_accessed``, ``access_count``, ``memory_tier``), which a read of the target
changes without changing what it holds. Two rows are the same when their contents
are equal; times are compared in UTC (SQLite reads them back naive).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._core.clock import as_utc
from .document_schema import document_table
from .event_schema import event_table, stored_kind, wire_kind
from .events import walk
from .layer_schema import item_table, scope_table
from .schema import dialect_insert, entry_table, session_table
from .tables import TABLES
from .vector_schema import entry_vector_table, item_vector_table

__all__ = [
    "DOCUMENT_PAGE",
    "EVENT_PAGE",
    "StoredScope",
    "document_page",
    "entry_vectors",
    "event_content",
    "event_page",
    "insert_documents",
    "insert_entry_vectors",
    "insert_events",
    "insert_scope",
    "projects",
    "read_scope",
    "same_documents",
    "scope_names",
    "session_ids",
]

S, E, ITEM, D, V = (
    session_table.c,
    entry_table.c,
    item_table.c,
    document_table.c,
    event_table.c,
)
EV, IV = entry_vector_table.c, item_vector_table.c

#: Documents read and written per transaction.
DOCUMENT_PAGE = 500
#: Events read and written per transaction.
EVENT_PAGE = 1_000
#: Rows per INSERT statement (within SQLite's and PostgreSQL's parameter limits).
_ROWS = 500

#: A layer item's content, in id order within its scope.
_ITEM_COLUMNS = (
    "layer",
    "item_key",
    "content",
    "meta",
    "token_count",
    "byte_size",
    "created_at",
    "updated_at",
)
#: The access bookkeeping a copy carries over but never compares.
_ACCESS = ("last_accessed", "access_count", "memory_tier")
#: A document's content (with its key, which identifies it in a project).
_DOCUMENT_COLUMNS = (
    "namespace",
    "key",
    "value",
    "indexed_text",
    "vectors",
    "created_at",
    "updated_at",
    "expires_at",
    "ttl_minutes",
)
_TIMES = frozenset({"created_at", "updated_at", "expires_at", "last_accessed"})


def _plain(name: str, value: Any) -> Any:
    """A column value as compared and written: times in UTC, bytes as bytes."""
    if value is None:
        return None
    if name in _TIMES:
        return as_utc(value)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _row(names: Sequence[str], row: Sequence[Any]) -> dict[str, Any]:
    return {name: _plain(name, value) for name, value in zip(names, row, strict=True)}


def projects(conn: Connection) -> list[str]:
    """Every project with a session, a layer scope, a document or an event, sorted."""
    present = {table.name for table in TABLES}
    names = sa.union(
        *(
            sa.select(table.c.project)
            for table in (session_table, scope_table, document_table, event_table)
            if table.name in present
        )
    ).subquery()
    return sorted(str(name) for name in conn.execute(sa.select(names.c.project)).scalars())


def session_ids(conn: Connection, project: str) -> list[str]:
    """The session ids of ``project``, sorted."""
    query = sa.select(S.session_id).where(S.project == project).order_by(S.session_id)
    return [str(sid) for sid in conn.execute(query).scalars()]


def scope_names(conn: Connection, project: str) -> list[str]:
    """The layer scopes of ``project``, sorted."""
    query = (
        sa.select(scope_table.c.scope)
        .where(scope_table.c.project == project)
        .order_by(scope_table.c.scope)
    )
    return [str(name) for name in conn.execute(query).scalars()]


#: A stored vector: the position (an entry's seq, an item's place in its scope), the
#: id of the model that made it, and its bytes.
Vector = tuple[int, str, bytes]


def _session_pk(project: str, session_id: str) -> sa.ScalarSelect[Any]:
    return sa.select(S.pk).where(S.project == project, S.session_id == session_id).scalar_subquery()


def entry_vectors(conn: Connection, project: str, session_id: str) -> list[Vector]:
    """The vectors of a session's entries, by seq."""
    query = (
        sa.select(E.seq, EV.model, EV.vector)
        .join(entry_table, E.id == EV.entry_id)
        .where(EV.session_pk == _session_pk(project, session_id))
        .order_by(E.seq)
    )
    return [(int(seq), str(model), bytes(vector)) for seq, model, vector in conn.execute(query)]


def insert_entry_vectors(
    conn: Connection, project: str, session_id: str, vectors: Sequence[Vector]
) -> int:
    """Store ``vectors`` for the entries of those seqs (of a session just written);
    the number stored."""
    if not vectors:
        return 0
    ids = {
        int(seq): (int(entry_id), int(pk))
        for seq, entry_id, pk in conn.execute(
            sa.select(E.seq, E.id, E.session_pk).where(
                E.session_pk == _session_pk(project, session_id)
            )
        )
    }
    rows = [
        {"entry_id": ids[seq][0], "session_pk": ids[seq][1], "model": model, "vector": vector}
        for seq, model, vector in vectors
        if seq in ids
    ]
    for start in range(0, len(rows), _ROWS):
        conn.execute(sa.insert(entry_vector_table), rows[start : start + _ROWS])
    return len(rows)


@dataclass(frozen=True, slots=True)
class StoredScope:
    """A layer scope: when it was made, its items (content and access columns) in the
    order they were stored, and their vectors (by position in ``items``)."""

    scope: str
    created_at: datetime
    items: list[dict[str, Any]]
    vectors: list[Vector]

    def content(self) -> list[dict[str, Any]]:
        """The items without their access bookkeeping (what two copies share)."""
        return [{name: item[name] for name in _ITEM_COLUMNS} for item in self.items]


def read_scope(conn: Connection, project: str, scope: str) -> StoredScope | None:
    """A scope of ``project`` with all its items, or ``None`` when it does not exist."""
    row = conn.execute(
        sa.select(scope_table.c.pk, scope_table.c.created_at).where(
            scope_table.c.project == project, scope_table.c.scope == scope
        )
    ).first()
    if row is None:
        return None
    names = ("id", *_ITEM_COLUMNS, *_ACCESS)
    query = (
        sa.select(*(ITEM[name] for name in names)).where(ITEM.scope_pk == row[0]).order_by(ITEM.id)
    )
    items = [_row(names, item) for item in conn.execute(query)]
    positions = {item.pop("id"): position for position, item in enumerate(items)}
    vectors = [
        (positions[item_id], str(model), bytes(vector))
        for item_id, model, vector in conn.execute(
            sa.select(IV.item_id, IV.model, IV.vector)
            .where(IV.scope_pk == row[0])
            .order_by(IV.item_id)
        )
        if item_id in positions
    ]
    return StoredScope(scope=scope, created_at=as_utc(row[1]), items=items, vectors=vectors)


def insert_scope(conn: Connection, project: str, stored: StoredScope) -> bool:
    """Create the scope with its items, in their order; ``False`` (nothing written)
    when the scope exists already."""
    pk = conn.execute(
        dialect_insert(conn, scope_table)
        .values(project=project, scope=stored.scope, created_at=stored.created_at)
        .on_conflict_do_nothing()
        .returning(scope_table.c.pk)
    ).scalar_one_or_none()
    if pk is None:
        return False
    rows = [{"scope_pk": pk, **item} for item in stored.items]
    for start in range(0, len(rows), _ROWS):
        conn.execute(sa.insert(item_table), rows[start : start + _ROWS])
    if stored.vectors:
        # Inserted in order into a new scope: the target's ids follow the same order.
        ids = conn.execute(sa.select(ITEM.id).where(ITEM.scope_pk == pk).order_by(ITEM.id))
        by_position = list(ids.scalars())
        vectors = [
            {
                "item_id": by_position[position],
                "scope_pk": pk,
                "layer": stored.items[position]["layer"],
                "model": model,
                "vector": vector,
            }
            for position, model, vector in stored.vectors
        ]
        for start in range(0, len(vectors), _ROWS):
            conn.execute(sa.insert(item_vector_table), vectors[start : start + _ROWS])
    return True


def document_page(
    conn: Connection,
    project: str,
    after: tuple[str, str] | None,
    limit: int | None,
    *,
    since: tuple[str, str] | None = None,
    through: tuple[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Documents of ``project`` in (namespace, key) order: those after ``after``, from
    ``since`` and up to ``through`` (both inclusive), at most ``limit`` (``None``: all)."""
    names = (*_DOCUMENT_COLUMNS, *_ACCESS)
    position = sa.tuple_(D.namespace, D.key)
    query = sa.select(*(D[name] for name in names)).where(D.project == project)
    if after is not None:
        query = query.where(position > sa.tuple_(*after))
    if since is not None:
        query = query.where(position >= sa.tuple_(*since))
    if through is not None:
        query = query.where(position <= sa.tuple_(*through))
    query = query.order_by(D.namespace, D.key).limit(limit)
    return [_row(names, row) for row in conn.execute(query)]


def same_documents(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Whether two documents hold the same content (access bookkeeping aside)."""
    return all(first[name] == second[name] for name in _DOCUMENT_COLUMNS)


def insert_documents(conn: Connection, project: str, rows: Sequence[dict[str, Any]]) -> int:
    """Insert documents absent from the target (a key present is left alone); the
    number inserted."""
    inserted = 0
    for start in range(0, len(rows), _ROWS):
        chunk = [{"project": project, **row} for row in rows[start : start + _ROWS]]
        statement = dialect_insert(conn, document_table).on_conflict_do_nothing()
        inserted += len(conn.execute(statement.returning(D.id), chunk).all())
    return inserted


#: An event's content: kind, session, payload and time (its position is the target's).
EventContent = tuple[str, str | None, str, datetime]


def event_content(row: Sequence[Any]) -> EventContent:
    """The content of an event row read by :func:`event_page`."""
    return (wire_kind(str(row[2])), row[3], str(row[4]), as_utc(row[5]))


def event_page(
    conn: Connection, project: str, after: tuple[int, int], limit: int
) -> list[Sequence[Any]]:
    """Up to ``limit`` events of ``project`` after the position ``after``, in delivery
    order: rows of ``(xid, id, kind, session_id, payload, created_at)``. Every
    committed event, also on PostgreSQL where the feed waits until older transactions
    anywhere on the server end: a copy reads a quiet project, whose events are final,
    and must not take its own events, not yet delivered, for missing ones."""
    query = (
        sa.select(V.xid, V.id, V.kind, V.session_id, V.payload, V.created_at)
        .where(*walk(conn, project, after))
        .order_by(V.xid, V.id)
        .limit(limit)
    )
    return list(conn.execute(query))


def insert_events(conn: Connection, project: str, contents: Sequence[EventContent]) -> None:
    """Append events in the given order, each keeping its kind, session, payload and
    time: after every event the target holds, as the feed orders them (on PostgreSQL
    under this transaction's id, on SQLite under 0)."""
    if not contents:
        return
    xid = 0
    if conn.dialect.name == "postgresql":
        xid = int(conn.exec_driver_sql("SELECT pg_current_xact_id()::text::bigint").scalar_one())
    rows = [
        {
            "xid": xid,
            "project": project,
            "kind": stored_kind(kind),
            "session_id": session_id,
            "payload": payload,
            "created_at": created_at,
        }
        for kind, session_id, payload, created_at in contents
    ]
    for start in range(0, len(rows), _ROWS):
        conn.execute(sa.insert(event_table), rows[start : start + _ROWS])
