"""SQL of graph checkpoints (:mod:`tiermem._storage.checkpoint_schema`), on one open
transaction. Every statement names the thread's session (``session_pk``) first, the
leading column of each table's key, so a thread's rows are one index range."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._core.messages import store_text
from .checkpoint_schema import blob_table, checkpoint_table, write_table
from .schema import dialect_insert, entry_table, session_table

__all__ = [
    "CHECKPOINT_COLUMNS",
    "blob_rows",
    "chain_rows",
    "checkpoint_rows",
    "delete_checkpoints",
    "delete_runs",
    "entries_by_message_id",
    "entry_messages",
    "insert_blobs",
    "insert_delta",
    "insert_writes",
    "put_checkpoint",
    "replace_blob",
    "replace_write",
    "thread_sessions",
    "write_rows",
]

C, B, W = checkpoint_table.c, blob_table.c, write_table.c
S, E = session_table.c, entry_table.c

#: What a read of checkpoints selects, in this order.
CHECKPOINT_COLUMNS = (
    S.session_id,
    C.session_pk,
    C.checkpoint_ns,
    C.checkpoint_id,
    C.parent_id,
    C.versions,
    C.checkpoint_type,
    C.checkpoint,
    C.metadata_type,
    C.meta,
)


def put_checkpoint(conn: Connection, row: Mapping[str, Any]) -> None:
    """Insert a checkpoint, or replace the one of the same id (a checkpoint put again)."""
    insert = dialect_insert(conn, checkpoint_table).values(**row)
    keys = ("session_pk", "checkpoint_ns", "checkpoint_id")
    changed = {name: insert.excluded[name] for name in row if name not in keys}
    conn.execute(insert.on_conflict_do_update(index_elements=list(keys), set_=changed))


def insert_blobs(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert channel values; a (channel, version) stored already keeps its value
    (a version is written once)."""
    if rows:
        conn.execute(dialect_insert(conn, blob_table).on_conflict_do_nothing(), list(rows))


def insert_delta(conn: Connection, row: Mapping[str, Any], base: str) -> bool:
    """Insert a message list stored as a delta on version ``base`` of its channel,
    with the root of ``base``'s chain, if ``base`` is stored; whether it was."""
    found = blob_table.alias("base")
    select = sa.select(
        sa.literal(row["session_pk"], sa.Integer),
        sa.literal(row["checkpoint_ns"], sa.Text),
        sa.literal(row["channel"], sa.Text),
        sa.literal(row["version"], sa.String),
        sa.literal(row["type"], sa.String),
        sa.literal(row["value"], sa.LargeBinary),
        found.c.root,
    ).where(
        found.c.session_pk == row["session_pk"],
        found.c.checkpoint_ns == row["checkpoint_ns"],
        found.c.channel == row["channel"],
        found.c.version == base,
        found.c.type == row["type"],
        found.c.root.is_not(None),
    )
    names = ["session_pk", "checkpoint_ns", "channel", "version", "type", "value", "root"]
    insert = dialect_insert(conn, blob_table).from_select(names, select).on_conflict_do_nothing()
    # RETURNING rather than the row count (psycopg reports -1 for INSERT ... SELECT).
    return conn.execute(insert.returning(B.version)).first() is not None


def replace_blob(conn: Connection, row: Mapping[str, Any]) -> None:
    """Rewrite one channel value in place (a message chain made a full list)."""
    key = sa.and_(*(B[name] == row[name] for name in _BLOB_KEY))
    values = {name: value for name, value in row.items() if name not in _BLOB_KEY}
    conn.execute(sa.update(blob_table).where(key).values(**values))


_BLOB_KEY = ("session_pk", "checkpoint_ns", "channel", "version")


def insert_writes(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert pending writes as LangGraph keys them: a regular write (index >= 0)
    stored already is kept, a special one (error, interrupt, ...: index < 0) replaced."""
    regular = [row for row in rows if row["idx"] >= 0]
    special = [row for row in rows if row["idx"] < 0]
    if regular:
        conn.execute(dialect_insert(conn, write_table).on_conflict_do_nothing(), regular)
    for row in special:
        insert = dialect_insert(conn, write_table).values(**row)
        keys = ["session_pk", "checkpoint_ns", "checkpoint_id", "task_id", "idx"]
        changed = {
            name: insert.excluded[name] for name in ("channel", "type", "value", "task_path")
        }
        conn.execute(insert.on_conflict_do_update(index_elements=keys, set_=changed))


def thread_sessions(conn: Connection, project: str, thread_ids: Iterable[str]) -> dict[str, int]:
    """The session pk of each thread of ``thread_ids`` that has a session."""
    query = sa.select(S.session_id, S.pk).where(
        S.project == project, S.session_id.in_(list(thread_ids))
    )
    return {str(sid): int(pk) for sid, pk in conn.execute(query)}


def checkpoint_rows(
    conn: Connection,
    project: str,
    *,
    thread_id: str | None,
    checkpoint_ns: str | None,
    checkpoint_id: str | None,
    before: str | None,
    after_key: tuple[str, str, str] | None,
    limit: int | None,
) -> list[Any]:
    """Checkpoints of the project (or of one thread, one namespace), newest first
    within each thread and namespace (LangGraph's ids grow with time); ``after_key``
    continues a listing after the (thread, namespace, id) it ended at."""
    query = sa.select(*CHECKPOINT_COLUMNS).join(session_table, S.pk == C.session_pk)
    query = query.where(S.project == project)
    if thread_id is not None:
        query = query.where(S.session_id == thread_id)
    if checkpoint_ns is not None:
        query = query.where(C.checkpoint_ns == checkpoint_ns)
    if checkpoint_id is not None:
        query = query.where(C.checkpoint_id == checkpoint_id)
    if before is not None:
        query = query.where(C.checkpoint_id < before)
    if after_key is not None:
        thread, namespace, last = after_key
        query = query.where(
            sa.or_(
                S.session_id > thread,
                sa.and_(S.session_id == thread, C.checkpoint_ns > namespace),
                sa.and_(
                    S.session_id == thread, C.checkpoint_ns == namespace, C.checkpoint_id < last
                ),
            )
        )
    query = query.order_by(S.session_id, C.checkpoint_ns, C.checkpoint_id.desc())
    if limit is not None:
        query = query.limit(limit)
    return list(conn.execute(query).all())


def blob_rows(
    conn: Connection, session_pk: int, checkpoint_ns: str, keys: Sequence[tuple[str, str]]
) -> list[Any]:
    """(channel, version, type, value, root) of the channel values named by ``keys``."""
    if not keys:
        return []
    pairs = sa.tuple_(B.channel, B.version).in_([sa.tuple_(*key) for key in keys])
    query = sa.select(B.channel, B.version, B.type, B.value, B.root).where(
        B.session_pk == session_pk, B.checkpoint_ns == checkpoint_ns, pairs
    )
    return list(conn.execute(query).all())


def chain_rows(
    conn: Connection, session_pk: int, checkpoint_ns: str, channel: str, roots: Sequence[str]
) -> list[Any]:
    """(version, value) of every message list of the chains that start at ``roots``."""
    query = sa.select(B.version, B.value).where(
        B.session_pk == session_pk,
        B.checkpoint_ns == checkpoint_ns,
        B.channel == channel,
        B.root.in_(list(roots)),
    )
    return list(conn.execute(query).all())


def write_rows(
    conn: Connection, session_pk: int, checkpoint_ns: str, checkpoint_ids: Sequence[str]
) -> list[Any]:
    """(checkpoint id, task id, channel, type, value, task path) of the checkpoints'
    pending writes, in LangGraph's order (task path, task id, index)."""
    if not checkpoint_ids:
        return []
    query = (
        sa.select(W.checkpoint_id, W.task_id, W.channel, W.type, W.value, W.task_path)
        .where(
            W.session_pk == session_pk,
            W.checkpoint_ns == checkpoint_ns,
            W.checkpoint_id.in_(list(checkpoint_ids)),
        )
        .order_by(W.checkpoint_id, W.task_path, W.task_id, W.idx)
    )
    return list(conn.execute(query).all())


def entry_messages(conn: Connection, entry_ids: Iterable[int]) -> dict[int, str]:
    """The stored message JSON of each entry of ``entry_ids``."""
    ids = sorted(set(entry_ids))
    found: dict[int, str] = {}
    query = sa.select(E.id, E.message).where(E.id.in_(sa.bindparam("ids", expanding=True)))
    for start in range(0, len(ids), _IDS_PER_STATEMENT):
        chunk = ids[start : start + _IDS_PER_STATEMENT]
        found.update((int(pk), str(text)) for pk, text in conn.execute(query, {"ids": chunk}))
    return found


#: Ids bound in one ``IN`` list (SQLite allows 32,766 parameters).
_IDS_PER_STATEMENT = 5_000


def entries_by_message_id(
    conn: Connection, project: str, thread_id: str, message_ids: Iterable[str]
) -> list[tuple[int, str, str, bool]]:
    """(entry id, stored message id, message JSON, retired) of every entry of the
    thread's session with one of ``message_ids`` (each revision of a message has its
    entry).

    On PostgreSQL the session's row is locked first, and the entries are read by a
    statement of their own (a new snapshot once the lock is held): two puts of one
    thread never both find a new message missing and both store it. SQLite's writers
    take turns already."""
    stored = sorted({store_text(value) for value in message_ids})
    if not stored:
        return []
    thread = sa.and_(S.project == project, S.session_id == thread_id)
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(S.pk).where(thread).with_for_update())
    query = (
        sa.select(E.id, E.message_id, E.message, E.retired_at.is_not(None))
        .join(session_table, S.pk == E.session_pk)
        .where(thread, E.message_id.in_(stored))
    )
    return [
        (int(pk), str(mid), str(text), bool(gone)) for pk, mid, text, gone in conn.execute(query)
    ]


def delete_checkpoints(
    conn: Connection, session_pk: int, checkpoint_ns: str, keep: Sequence[str] | None
) -> int:
    """Delete a namespace's checkpoints and their writes, but those of ``keep``
    (``None``: keep none); returns the checkpoints deleted."""
    where_c = [C.session_pk == session_pk, C.checkpoint_ns == checkpoint_ns]
    where_w = [W.session_pk == session_pk, W.checkpoint_ns == checkpoint_ns]
    if keep:
        where_c.append(C.checkpoint_id.not_in(list(keep)))
        where_w.append(W.checkpoint_id.not_in(list(keep)))
    conn.execute(sa.delete(write_table).where(*where_w))
    return int(conn.execute(sa.delete(checkpoint_table).where(*where_c)).rowcount or 0)


def delete_blobs(
    conn: Connection, session_pk: int, checkpoint_ns: str, keep: Sequence[tuple[str, str]]
) -> None:
    """Delete a namespace's channel values but the (channel, version) pairs of ``keep``."""
    where = [B.session_pk == session_pk, B.checkpoint_ns == checkpoint_ns]
    if keep:
        where.append(~sa.tuple_(B.channel, B.version).in_([sa.tuple_(*key) for key in keep]))
    conn.execute(sa.delete(blob_table).where(*where))


def namespaces(conn: Connection, session_pk: int) -> list[str]:
    """The namespaces that hold checkpoints or values of the session."""
    query = sa.union(
        sa.select(C.checkpoint_ns).where(C.session_pk == session_pk),
        sa.select(B.checkpoint_ns).where(B.session_pk == session_pk),
    )
    return sorted(str(value) for value in conn.execute(query).scalars())


def delete_runs(conn: Connection, project: str, run_ids: Sequence[str]) -> int:
    """Delete the project's checkpoints made by the runs ``run_ids``, with their
    writes; returns the checkpoints deleted."""
    owned = sa.select(S.pk).where(S.project == project).scalar_subquery()
    doomed = (
        sa.select(C.session_pk, C.checkpoint_ns, C.checkpoint_id)
        .where(C.run_id.in_(list(run_ids)), C.session_pk.in_(owned))
        .subquery()
    )
    key = sa.tuple_(W.session_pk, W.checkpoint_ns, W.checkpoint_id)
    conn.execute(sa.delete(write_table).where(key.in_(sa.select(doomed))))
    gone = conn.execute(
        sa.delete(checkpoint_table).where(C.run_id.in_(list(run_ids)), C.session_pk.in_(owned))
    )
    return int(gone.rowcount or 0)


def copy_rows(
    conn: Connection,
    table: sa.Table,
    source_pk: int,
    target_pk: int,
    where: sa.ColumnElement[bool] | None = None,
) -> None:
    """Copy the rows of ``table`` of one session (those ``where`` selects) to
    another, set-based."""
    columns = [column for column in table.c if column.name not in ("pk", "session_pk")]
    select = sa.select(sa.literal(target_pk, sa.Integer), *columns).where(
        table.c.session_pk == source_pk
    )
    if where is not None:
        select = select.where(where)
    names = ["session_pk", *(column.name for column in columns)]
    conn.execute(sa.insert(table).from_select(names, select))


def latest_checkpoint(conn: Connection, session_pk: int, checkpoint_ns: str) -> Any:
    """(id, versions, parent id, delta channels) of the namespace's newest
    checkpoint, if any."""
    query = (
        sa.select(C.checkpoint_id, C.versions, C.parent_id, C.delta_channels)
        .where(C.session_pk == session_pk, C.checkpoint_ns == checkpoint_ns)
        .order_by(C.checkpoint_id.desc())
        .limit(1)
    )
    return conn.execute(query).first()


def checkpoint_by_id(
    conn: Connection, session_pk: int, checkpoint_ns: str, checkpoint_id: str
) -> Any:
    """(id, versions, parent id, delta channels) of one checkpoint, if it exists."""
    query = sa.select(C.checkpoint_id, C.versions, C.parent_id, C.delta_channels).where(
        C.session_pk == session_pk,
        C.checkpoint_ns == checkpoint_ns,
        C.checkpoint_id == checkpoint_id,
    )
    return conn.execute(query).first()


def count_checkpoints(conn: Connection, project: str, thread_id: str) -> int:
    """How many checkpoints the thread has."""
    query = (
        sa.select(sa.func.count())
        .select_from(checkpoint_table)
        .join(session_table, S.pk == C.session_pk)
        .where(S.project == project, S.session_id == thread_id)
    )
    return int(conn.execute(query).scalar_one())


def session_entries(conn: Connection, session_pk: int) -> list[tuple[int, str]]:
    """(entry id, message JSON) of every entry of the session, in order."""
    query = sa.select(E.id, E.message).where(E.session_pk == session_pk).order_by(E.seq)
    return [(int(pk), str(text)) for pk, text in conn.execute(query)]


def copy_thread_rows(
    conn: Connection, source_pk: int, target_pk: int, entry_ids: Mapping[int, int]
) -> int:
    """Copy a session's checkpoints, writes and values to another session, the
    message lists rewritten to the entries ``entry_ids`` maps theirs to; returns
    the checkpoints copied."""
    copy_rows(conn, checkpoint_table, source_pk, target_pk)
    for table, column in ((write_table, W.type), (blob_table, B.type)):
        plain = column.not_in([_REFS, _WRITE_REFS, _VALUE_REFS])
        copy_rows(conn, table, source_pk, target_pk, plain)
        query = sa.select(table).where(table.c.session_pk == source_pk, ~plain)
        rows = []
        for row in conn.execute(query).mappings():
            value = json.loads(bytes(row["value"]))
            for key in ("refs", "add", "w"):
                if key in value:
                    value[key] = [_mapped(item, entry_ids) for item in value[key]]
            for name, items in value.get("v", {}).items():
                value["v"][name] = [_mapped(item, entry_ids) for item in items]
            encoded = json.dumps(value, separators=(",", ":")).encode()
            rows.append({**row, "session_pk": target_pk, "value": encoded})
        if rows:
            conn.execute(sa.insert(table), rows)
    count = sa.select(sa.func.count()).where(C.session_pk == target_pk)
    return int(conn.execute(count).scalar_one())


def _mapped(item: Any, entry_ids: Mapping[int, int]) -> Any:
    """A stored reference to an entry, pointed at its copy (a message kept inline,
    a JSON string, stays as it is)."""
    if isinstance(item, dict):
        return {key: _mapped(value, entry_ids) for key, value in item.items()}
    return entry_ids[item] if isinstance(item, int) else item


#: The type of a message list held as entry ids (see :mod:`tiermem._ops.threads`),
#: and of a pending write held so (:mod:`tiermem._ops.thread_writes`).
_REFS = "tiermem:refs"
_WRITE_REFS = "tiermem:write-refs"
_VALUE_REFS = "tiermem:value-refs"


def replace_write(conn: Connection, key: Mapping[str, Any], kind: str, value: bytes) -> None:
    """Rewrite one pending write's value in place (its messages kept as references)."""
    where = sa.and_(*(W[name] == value_ for name, value_ in key.items()))
    conn.execute(sa.update(write_table).where(where).values(type=kind, value=value))
