"""SQL of stored JSON documents (:mod:`tiermem._storage.document_schema`).

Every function runs on a connection inside the transaction ``Database.run``
opened. Namespaces arrive as their stored text (labels joined with ``.``).

* Reads never return a document whose ``expires_at`` has passed.
* :func:`filter_clause` compiles a LangGraph-style filter (``{"a.b": 1}``,
  ``{"n": {"$gt": 2}}``, ``$eq $ne $gt $gte $lt $lte``) into one SQL condition
  (SQLite ``json_extract``/``json_type``, PostgreSQL ``jsonb`` operators): the
  database evaluates it, never Python over rows.
* A document's access tier follows its ``last_accessed`` like a session's,
  except EXPIRED, which only a passed ``expires_at`` (a time to live) gives: a
  document without one is never expired by age, as in LangGraph.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from .._core.clock import as_utc
from ..tiers import MemoryTier
from . import _fast, fts
from .document_filters import FILTER_OPERATORS, filter_clause
from .document_schema import DOCUMENT_INDEX, document_table
from .statements import ids_type, ids_value, in_ids
from .tiers import Cutoffs, among, delete_locked

__all__ = [
    "FILTER_OPERATORS",
    "NewDocument",
    "StoredDocument",
    "clamp_future_documents",
    "count_expired_documents",
    "delete_documents",
    "filter_clause",
    "get_documents",
    "lock_documents",
    "list_namespace_texts",
    "prune_document_batch",
    "put_documents",
    "recalculate_document_batch",
    "search_documents",
    "count_by_tier",
    "tier_counts",
    "touch_documents",
    "transaction_time",
]

D = document_table.c

#: The comparison operators a filter may use.

_COLUMNS = (
    D.id,
    D.namespace,
    D.key,
    D.value,
    D.created_at,
    D.updated_at,
    D.expires_at,
    D.ttl_minutes,
    D.last_accessed,
    D.access_count,
    D.memory_tier,
)


@dataclass(frozen=True, slots=True)
class NewDocument:
    """A document to write.

    Attributes:
        namespace: the namespace's stored text.
        key: its key.
        value: the JSON document.
        indexed_text: what full-text search sees (``None``: nothing).
        vectors: packed float32 embeddings, or ``None``.
        ttl_minutes: its time to live (``None``: none).
    """

    namespace: str
    key: str
    value: Mapping[str, Any]
    indexed_text: str | None
    vectors: bytes | None
    ttl_minutes: float | None


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """A stored document as read, with its access tier and a search's score."""

    id: int
    namespace: str
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    ttl_minutes: float | None
    last_accessed: datetime
    access_count: int
    memory_tier: str
    score: float | None = None
    vectors: bytes | None = None


def _document(row: Mapping[Any, Any], score: float | None = None) -> StoredDocument:
    value = row["value"]
    if isinstance(value, str):  # a driver that hands JSON back as text
        value = json.loads(value)
    expires = row["expires_at"]
    return StoredDocument(
        id=int(row["id"]),
        namespace=row["namespace"],
        key=row["key"],
        value=value,
        created_at=as_utc(row["created_at"]),
        updated_at=as_utc(row["updated_at"]),
        expires_at=None if expires is None else as_utc(expires),
        ttl_minutes=row["ttl_minutes"],
        last_accessed=as_utc(row["last_accessed"]),
        access_count=int(row["access_count"]),
        memory_tier=row["memory_tier"],
        score=score,
        vectors=row.get("vectors"),
    )


def live(now: Any) -> sa.ColumnElement[bool]:
    """Documents whose time to live has not passed at ``now``."""
    return sa.or_(D.expires_at.is_(None), D.expires_at > now)


def under_prefix(prefix: str | None) -> sa.ColumnElement[bool]:
    """Documents whose namespace is ``prefix`` or below it (``None``/empty: every one).

    ``'/'`` follows ``'.'`` in byte order, so ``prefix.`` .. ``prefix/`` is exactly
    the namespaces below ``prefix``: one range of the unique index.
    """
    if not prefix:
        return sa.true()
    # One index range (``prefix`` .. ``prefix/``) the planner can seek, then the exact
    # test: the range also holds labels that merely start with the prefix's last one.
    low, high = sa.literal(prefix, sa.Text), sa.literal(prefix + "/", sa.Text)
    below = sa.func.substr(D.namespace, 1, len(prefix) + 1) == sa.literal(prefix + ".", sa.Text)
    return sa.and_(D.namespace >= low, D.namespace < high, sa.or_(D.namespace == low, below))


# --------------------------------------------------------------------------- reads


# Reading one document and recording its access are what a ``get`` does; both are
# built once, so a call pays for neither SQL construction nor compilation.
_GET_ONE = sa.select(*_COLUMNS).where(
    D.project == sa.bindparam("project"),
    D.namespace == sa.bindparam("namespace"),
    D.key == sa.bindparam("key"),
    sa.or_(D.expires_at.is_(None), D.expires_at > sa.bindparam("now")),
)
#: ``_GET_ONE`` by the server's clock (PostgreSQL's ``now()``).
_GET_ONE_BY_SERVER = sa.select(*_COLUMNS).where(
    D.project == sa.bindparam("project"),
    D.namespace == sa.bindparam("namespace"),
    D.key == sa.bindparam("key"),
    live(sa.func.now()),
)


def transaction_time(conn: Connection) -> datetime:
    """PostgreSQL's ``now()``: the start of the current transaction by the server's
    clock, the same value every ``now()`` of the transaction reads."""
    return as_utc(conn.execute(sa.select(sa.func.now())).scalar_one())


@functools.lru_cache(maxsize=4)
def _touch(dialect: str) -> Any:
    """The access of the documents whose ids ``ids`` lists (``among``'s form)."""
    return (
        sa.update(document_table)
        .where(_ids_among(dialect))
        .values(
            last_accessed=sa.bindparam("touched_at"),
            access_count=D.access_count + 1,
            memory_tier=MemoryTier.ACTIVE.value,
        )
    )


@functools.lru_cache(maxsize=4)
def _refresh(dialect: str) -> Any:
    """The new expiry of the documents whose ids ``ids`` lists."""
    return (
        sa.update(document_table)
        .where(_ids_among(dialect))
        .values(expires_at=sa.bindparam("expiry"))
    )


def _ids_among(dialect: str) -> sa.ColumnElement[bool]:
    return in_ids(dialect, D.id, sa.bindparam("ids", type_=ids_type(dialect)))


def get_documents(
    conn: Connection, *, project: str, wanted: Sequence[tuple[str, str]], now: Any
) -> dict[tuple[str, str], StoredDocument]:
    """The documents among ``wanted`` (namespace text, key) live at ``now`` (a time, or
    the server's ``now()``), by their address."""
    found: dict[tuple[str, str], StoredDocument] = {}
    statement = _GET_ONE if isinstance(now, datetime) else _GET_ONE_BY_SERVER
    for namespace, key in dict.fromkeys(wanted):
        row = _fast.first(
            conn, statement, {"project": project, "namespace": namespace, "key": key, "now": now}
        )
        if row is not None:
            found[(namespace, key)] = _document(row)
    return found


def lock_documents(
    conn: Connection,
    *,
    project: str,
    ids: Sequence[int],
    addresses: Sequence[tuple[str, str]],
) -> None:
    """On PostgreSQL, lock the rows a batch is about to write (the documents ``ids``
    lists and those at ``addresses``), in id order, before it writes any.

    An ``UPDATE`` or ``DELETE`` locks rows in the order it meets them, which follows
    where their versions lie on disk, not the ids it was given; and a batch writes in
    several statements. Two batches writing the same rows could each hold a row the
    other waits for. Taken in one order first, the locks make the later one wait
    for the whole of the earlier. (A document not yet stored is locked by its
    insert; a batch inserts in address order.) SQLite has one writer at a time.
    """
    if conn.dialect.name != "postgresql" or not (ids or addresses):
        return
    wanted = in_ids("postgresql", D.id, sa.bindparam("ids", type_=ids_type("postgresql")))
    if addresses:
        at = sa.and_(D.project == project, sa.tuple_(D.namespace, D.key).in_(sorted(addresses)))
        wanted = sa.or_(wanted, at)
    statement = sa.select(D.id).where(wanted).order_by(D.id).with_for_update()
    conn.execute(statement, {"ids": ids_value("postgresql", sorted(set(ids)))}).all()


def touch_documents(
    conn: Connection,
    documents: Sequence[StoredDocument],
    *,
    now: datetime,
    refresh: bool,
    expires_from: datetime | None = None,
) -> None:
    """Record an access at ``now`` of each document (``last_accessed``,
    ``access_count``, tier ACTIVE); with ``refresh``, restart the time to live of
    those that have one, from ``expires_from`` (default ``now``)."""
    if not documents:
        return
    ids = sorted({document.id for document in documents})
    dialect = conn.dialect.name
    _fast.write(conn, _touch(dialect), {"ids": ids_value(dialect, ids), "touched_at": now})
    if not refresh:
        return
    by_ttl: dict[float, list[int]] = {}
    for document in documents:
        if document.ttl_minutes is not None:
            by_ttl.setdefault(document.ttl_minutes, []).append(document.id)
    for ttl, chosen in by_ttl.items():  # one statement per distinct time to live
        values = {
            "ids": ids_value(dialect, sorted(set(chosen))),
            "expiry": (expires_from or now) + timedelta(minutes=ttl),
        }
        _fast.write(conn, _refresh(dialect), values)


def search_documents(
    conn: Connection,
    *,
    project: str,
    prefix: str | None,
    spec: Mapping[str, Any] | None,
    words: Sequence[str],
    limit: int | None,
    offset: int,
    now: datetime,
    with_vectors: bool = False,
) -> list[StoredDocument]:
    """Live documents under ``prefix`` that pass ``spec``; with ``words``, only those
    whose indexed text holds one of them, best match first (``score`` set: on SQLite
    the sum of the IDF of the words held, taken among the documents under ``prefix``
    that pass ``spec``, or ``-bm25`` when there is no prefix; on PostgreSQL
    ``ts_rank``), else most recently updated first."""
    dialect = conn.dialect.name
    columns: list[Any] = list(_COLUMNS)
    if with_vectors:
        columns.append(D.vectors)
    where = [D.project == project, under_prefix(prefix), live(now), filter_clause(dialect, spec)]
    score: sa.ColumnElement[Any] | None = None
    query: Any
    if words and dialect == "sqlite" and prefix:
        return _sqlite_ranked_under_prefix(conn, columns, where, words, limit, offset)
    if words and dialect == "sqlite":
        fts_table = sa.table(DOCUMENT_INDEX.name, sa.column("rowid"))
        match = " OR ".join(fts.fts5_query(word) for word in words)
        name: sa.ColumnElement[Any] = sa.literal_column(DOCUMENT_INDEX.name)
        score = -sa.func.bm25(name)
        query = (
            sa.select(*columns, score.label("score"))
            .select_from(fts_table.join(document_table, D.id == fts_table.c.rowid))
            .where(name.op("MATCH")(match), *where)
        )
    elif words:
        vector: sa.ColumnElement[Any] = sa.literal_column(f"{document_table.name}.fts")
        tsquery = sa.func.to_tsquery(
            sa.literal_column(f"'{fts.PG_CONFIG}'::regconfig"), fts.tsquery_any(words)
        )
        score = sa.func.ts_rank(vector, tsquery)
        query = sa.select(*columns, score.label("score")).where(vector.op("@@")(tsquery), *where)
    else:
        query = sa.select(*columns).where(*where)
    if score is None:
        query = query.order_by(D.updated_at.desc(), D.id.desc())
        return _ordered_page(conn, query, None, D.id, limit, offset)
    return _ordered_page(conn, query, score, D.id, limit, offset)


def _sqlite_ranked_under_prefix(
    conn: Connection,
    columns: list[Any],
    where: list[sa.ColumnElement[bool]],
    words: Sequence[str],
    limit: int | None,
    offset: int,
) -> list[StoredDocument]:
    """SQLite, under a namespace prefix: the documents there are few, so their ids are
    read by the namespace range, and the index is asked once per word which of them
    hold it (bm25 would count every document of each word). Each match scores the sum
    of its words' IDF (BM25's, taken among the documents under the prefix that pass
    the filter), ties newest first."""
    ids = [int(row[0]) for row in conn.execute(sa.select(D.id).where(*where))]
    if not ids:
        return []
    listed = json.dumps(ids)
    # A document's index rowid is its id (documents are index source 0).
    holders = [
        {
            int(row[0])
            for row in conn.execute(_HOLDERS, {"match": fts.fts5_query(word), "ids": listed})
        }
        for word in words
    ]
    total = len(ids)
    idf = [math.log(1 + (total - len(held) + 0.5) / (len(held) + 0.5)) for held in holders]
    scored = sorted(
        (
            (
                sum(weight for weight, held in zip(idf, holders, strict=True) if doc_id in held),
                doc_id,
            )
            for doc_id in ids
            if any(doc_id in held for held in holders)
        ),
        key=lambda pair: (-pair[0], -pair[1]),
    )
    page = scored[offset:] if limit is None else scored[offset : offset + limit]
    if not page:
        return []
    found = {
        int(row["id"]): row
        for row in conn.execute(
            sa.select(*columns).where(among(conn, D.id, [doc_id for _, doc_id in page]))
        ).mappings()
    }
    return [_document(found[doc_id], score) for score, doc_id in page if doc_id in found]


#: The ids among ``ids`` (a JSON array) whose indexed text holds ``match``: one
#: query per word, however many documents are asked about.
_HOLDERS = sa.text(
    f"SELECT rowid FROM {DOCUMENT_INDEX.name} WHERE {DOCUMENT_INDEX.name} MATCH :match "
    "AND rowid IN (SELECT value FROM json_each(:ids))"
)


def _ordered_page(
    conn: Connection,
    query: Any,
    score: sa.ColumnElement[Any] | None,
    ids: sa.ColumnElement[Any],
    limit: int | None,
    offset: int,
) -> list[StoredDocument]:
    """Best score first (ties: newest id), one page of it, as documents."""
    if score is not None:
        query = query.order_by(score.desc(), ids.desc())
    if limit is not None:
        query = query.limit(limit)
    if offset:
        query = query.offset(offset)
    rows = conn.execute(query).mappings().all()
    return [_document(row, None if score is None else float(row["score"])) for row in rows]


def list_namespace_texts(
    conn: Connection, *, project: str, prefix: str | None, now: datetime
) -> list[str]:
    """The distinct namespaces holding a live document, under ``prefix`` if given."""
    query = (
        sa.select(D.namespace)
        .where(D.project == project, under_prefix(prefix), live(now))
        .distinct()
    )
    return [str(namespace) for namespace in conn.execute(query).scalars()]


# --------------------------------------------------------------------------- writes


@functools.lru_cache(maxsize=4)
def _upsert(dialect: str) -> Any:
    """The insert-or-replace of one document row, built once per dialect."""
    insert = (postgresql.insert if dialect == "postgresql" else sqlite.insert)(document_table)
    excluded = insert.excluded
    return insert.on_conflict_do_update(
        index_elements=[D.project, D.namespace, D.key],
        set_={
            "value": excluded.value,
            "indexed_text": excluded.indexed_text,
            "vectors": excluded.vectors,
            "updated_at": excluded.updated_at,
            "expires_at": excluded.expires_at,
            "ttl_minutes": excluded.ttl_minutes,
            "last_accessed": excluded.last_accessed,
            "access_count": D.access_count + 1,
            "memory_tier": MemoryTier.ACTIVE.value,
        },
    )


_DELETE_ONE = sa.delete(document_table).where(
    D.project == sa.bindparam("project"),
    D.namespace == sa.bindparam("namespace"),
    D.key == sa.bindparam("key"),
)


def put_documents(
    conn: Connection,
    *,
    project: str,
    documents: Sequence[NewDocument],
    now: datetime,
    expires_from: datetime | None = None,
) -> None:
    """Insert or replace each document, written at ``now``, a time to live running
    from ``expires_from`` (default ``now``); a replaced one keeps its ``created_at``
    and access count (the write counts as an access)."""
    if not documents:
        return
    start = expires_from or now
    rows = [
        {
            "project": project,
            "namespace": document.namespace,
            "key": document.key,
            "value": dict(document.value),
            "indexed_text": document.indexed_text,
            "vectors": document.vectors,
            "created_at": now,
            "updated_at": now,
            "expires_at": (
                None
                if document.ttl_minutes is None
                else start + timedelta(minutes=document.ttl_minutes)
            ),
            "ttl_minutes": document.ttl_minutes,
            "last_accessed": now,
            "access_count": 1,
            "memory_tier": MemoryTier.ACTIVE.value,
        }
        for document in documents
    ]
    # In address order, so that two batches inserting the same new documents lock
    # them in one order (lock_documents locked the stored ones).
    rows.sort(key=lambda row: (row["namespace"], row["key"]))
    statement = _upsert(conn.dialect.name)
    if len(rows) == 1:
        _fast.write(conn, statement, rows[0], column_keys=tuple(rows[0]))
    else:
        conn.execute(statement, rows)


def delete_documents(
    conn: Connection, *, project: str, addresses: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Delete the documents at ``addresses`` (namespace text, key); those that were
    there, in the order of ``addresses``."""
    deleted = set()
    for namespace, key in sorted(set(addresses)):  # one lock order for every batch
        values = {"project": project, "namespace": namespace, "key": key}
        if _fast.write(conn, _DELETE_ONE, values):
            deleted.add((namespace, key))
    return [address for address in dict.fromkeys(addresses) if address in deleted]


# --------------------------------------------------------------------------- lifecycle


def tier_case(cut: Cutoffs) -> sa.Case[Any]:
    """A document's tier as SQL: EXPIRED once its time to live passed, otherwise by
    ``last_accessed`` (never EXPIRED by age)."""
    return sa.case(
        (sa.and_(D.expires_at.is_not(None), D.expires_at <= cut.now), MemoryTier.EXPIRED.value),
        (D.last_accessed > cut.active, MemoryTier.ACTIVE.value),
        (D.last_accessed > cut.recent, MemoryTier.RECENT.value),
        else_=MemoryTier.ARCHIVED.value,
    )


def tier_counts(project: str, cut: Cutoffs) -> Any:
    """One row: the project's documents, then how many are ACTIVE, RECENT, ARCHIVED
    and EXPIRED at ``cut``."""
    tier = tier_case(cut)
    return sa.select(
        sa.func.count(),
        *(sa.func.count().filter(tier == t.value) for t in MemoryTier),
    ).where(D.project == project)


def clamp_future_documents(
    conn: Connection, *, project: str, cut: Cutoffs
) -> tuple[int, int] | None:
    """Clamp document accesses stamped in the future to now; return the id range of
    the project's documents (``None`` when it has none)."""
    conn.execute(
        sa.update(document_table)
        .where(D.project == project, D.last_accessed > cut.now)
        .values(last_accessed=cut.now)
    )
    low, high = conn.execute(
        sa.select(sa.func.min(D.id), sa.func.max(D.id)).where(D.project == project)
    ).one()
    return None if low is None else (int(low), int(high))


def recalculate_document_batch(
    conn: Connection, *, project: str, cut: Cutoffs, low: int, high: int
) -> int:
    """Store the tier of the project's documents with ids ``low..high`` whose stored
    tier is stale, in one ``UPDATE``; how many changed."""
    tier = tier_case(cut)
    statement = (
        sa.update(document_table)
        .where(D.id.between(low, high), D.project.concat("") == project, D.memory_tier != tier)
        .values(memory_tier=tier)
    )
    return int(conn.execute(statement).rowcount)


def count_expired_documents(conn: Connection, *, project: str | None, now: Any) -> int:
    """How many documents (of ``project``; ``None``: of every project) expired by ``now``."""
    query = sa.select(sa.func.count()).where(D.expires_at <= now)
    if project is not None:
        query = query.where(D.project == project)
    return int(conn.execute(query).scalar_one())


def prune_document_batch(
    conn: Connection, *, project: str | None, now: Any, want: int | None
) -> tuple[int, ...]:
    """Delete up to ``want`` (``None``: every) documents whose time to live passed by
    ``now``, soonest expired first, with their full-text rows; returns their ids.

    The ``DELETE`` re-checks the expiry: a read that refreshed a time to live and
    committed first keeps the document (on PostgreSQL the candidates are locked).
    """
    chosen = sa.select(D.id).where(D.expires_at <= now).order_by(D.expires_at, D.id)
    if project is not None:
        chosen = chosen.where(D.project == project)
    if want is not None:
        chosen = chosen.limit(want)
    return delete_locked(conn, chosen, D.id, D.expires_at <= now)


def count_by_tier(conn: Connection, *, project: str, cut: Cutoffs) -> list[int]:
    """The project's documents, then how many are in each tier at ``cut``."""
    return [int(value) for value in conn.execute(tier_counts(project, cut)).one()]
