"""SQL of graph checkpoints (:mod:`tiermem._storage.checkpoint_schema`), on one open
transaction. Every statement names the thread's session (``session_pk``) first, the
leading column of each table's key, so a thread's rows are one index range."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._core.messages import StoredMessage, full_json, store_text, stored_message
from . import _fast as _driver
from . import checkpoint_statements as _sql
from .checkpoint_schema import blob_table, checkpoint_table, write_table
from .schema import entry_table, session_table
from .statements import ids_value

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
CHECKPOINT_COLUMNS = _sql.CHECKPOINT_COLUMNS


def put_checkpoint(conn: Connection, row: Mapping[str, Any]) -> None:
    """Insert a checkpoint (``row``: every column but ``pk``), or replace the one of
    the same id (a checkpoint put again)."""
    statement = _sql.upsert_checkpoint(conn.dialect.name)
    _driver.write(conn, statement, row, column_keys=tuple(row))


def _insert_rows(conn: Connection, statement: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    """Run an INSERT for each of ``rows`` (all with the same columns): on SQLite a
    statement per row on the driver connection, elsewhere one executemany (a round
    trip per row would cost more there)."""
    if conn.dialect.name == "sqlite":
        for row in rows:
            _driver.write(conn, statement, row, column_keys=tuple(row))
    elif rows:
        conn.execute(statement, list(rows))


def insert_blobs(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert channel values (all with the same columns); a (channel, version)
    stored already keeps its value (a version is written once)."""
    _insert_rows(conn, _sql.insert_blob(conn.dialect.name), rows)


def insert_delta(conn: Connection, row: Mapping[str, Any], base: str) -> bool:
    """Insert a message list stored as a delta on version ``base`` of its channel,
    with the root of ``base``'s chain, if ``base`` is stored; whether it was."""
    values = {
        "pk_": row["session_pk"],
        "ns": row["checkpoint_ns"],
        "channel_": row["channel"],
        "version_": row["version"],
        "type_": row["type"],
        "value_": row["value"],
        "base": base,
    }
    return bool(_driver.fetch_rows(conn, _sql.insert_delta(conn.dialect.name), values))


def replace_blob(conn: Connection, row: Mapping[str, Any]) -> None:
    """Rewrite one channel value in place (a message chain made a full list)."""
    columns = tuple(name for name in row if name not in _BLOB_KEY)
    values = {f"{name}_": value for name, value in row.items()}
    _driver.write(conn, _sql.update_blob(columns), values)


_BLOB_KEY = ("session_pk", "checkpoint_ns", "channel", "version")


def insert_writes(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert pending writes as LangGraph keys them (all with the same columns): a
    regular write (index >= 0) stored already is kept, a special one (error,
    interrupt, ...: index < 0) replaced."""
    dialect = conn.dialect.name
    _insert_rows(conn, _sql.insert_write(dialect), [row for row in rows if row["idx"] >= 0])
    for row in rows:
        if row["idx"] < 0:
            _driver.write(conn, _sql.upsert_write(dialect), row, column_keys=tuple(row))


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
    values: dict[str, Any] = {
        "project": project,
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "before": before,
        "limit": limit,
    }
    if after_key is not None:
        values["after_thread"], values["after_ns"], values["after_id"] = after_key
    query = _sql.select_checkpoints(
        thread_id is not None,
        checkpoint_ns is not None,
        checkpoint_id is not None,
        before is not None,
        after_key is not None,
        limit is not None,
    )
    return _driver.fetch_rows(conn, query, values)


def blob_rows(
    conn: Connection, session_pk: int, checkpoint_ns: str, keys: Sequence[tuple[str, str]]
) -> list[Any]:
    """(channel, version, type, value, root) of the channel values named by ``keys``."""
    if not keys:
        return []
    if len(keys) > _sql.MAX_KEYS:  # a prune's: not worth a statement of its own
        pairs = sa.tuple_(B.channel, B.version).in_([sa.tuple_(*key) for key in keys])
        query = sa.select(B.channel, B.version, B.type, B.value, B.root).where(
            B.session_pk == session_pk, B.checkpoint_ns == checkpoint_ns, pairs
        )
        return list(conn.execute(query).all())
    values: dict[str, Any] = {"pk_": session_pk, "ns": checkpoint_ns}
    for n, (channel, version) in enumerate(keys):
        values[f"c{n}"], values[f"v{n}"] = channel, version
    return _driver.fetch_rows(conn, _sql.select_blobs(len(keys)), values)


def chain_rows(
    conn: Connection, session_pk: int, checkpoint_ns: str, channel: str, root: str
) -> list[Any]:
    """(version, value) of every message list of the chain that starts at ``root``."""
    values = {"pk_": session_pk, "ns": checkpoint_ns, "channel_": channel, "root_": root}
    return _driver.fetch_rows(conn, _sql.select_chain(conn.dialect.name), values)


def write_rows(
    conn: Connection, session_pk: int, checkpoint_ns: str, checkpoint_ids: Sequence[str]
) -> list[Any]:
    """(checkpoint id, task id, channel, type, value, task path) of the checkpoints'
    pending writes, in LangGraph's order (task path, task id, index)."""
    if not checkpoint_ids:
        return []
    dialect = conn.dialect.name
    values = {"pk_": session_pk, "ns": checkpoint_ns, "ids": ids_value(dialect, checkpoint_ids)}
    return _driver.fetch_rows(conn, _sql.select_writes(dialect), values)


def entry_messages(conn: Connection, entry_ids: Iterable[int]) -> dict[int, StoredMessage]:
    """The stored message of each entry of ``entry_ids``, in one statement."""
    ids = sorted(set(entry_ids))
    if not ids:
        return {}
    dialect = conn.dialect.name
    rows = _driver.fetch_rows(conn, _sql.select_entries(dialect), {"ids": ids_value(dialect, ids)})
    return {pk: stored_message(stored, text) for pk, stored, text in rows}


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
    dialect = conn.dialect.name
    thread = {"project": project, "thread_id": thread_id}
    if dialect == "postgresql":
        _driver.fetch_rows(conn, _sql.LOCK_THREAD, thread)
    query = _sql.select_entries_by_message_id(dialect)
    rows = _driver.fetch_rows(conn, query, {**thread, "ids": ids_value(dialect, stored)})
    return [
        (int(pk), str(mid), full_json(stored_message(body, text)), bool(gone))
        for pk, mid, body, text, gone in rows
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


def session_entries(conn: Connection, session_pk: int) -> list[tuple[int, StoredMessage]]:
    """(entry id, stored message) of every entry of the session, in order."""
    query = sa.select(E.id, E.message, E.content).where(E.session_pk == session_pk).order_by(E.seq)
    return [(int(pk), stored_message(body, text)) for pk, body, text in conn.execute(query)]


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
    """Rewrite one pending write's value in place (its messages kept as references;
    ``key``: its session pk, namespace, checkpoint id, task id and index)."""
    values = {f"{name}_": item for name, item in key.items()}
    _driver.write(conn, _sql.REPLACE_WRITE, {**values, "type_": kind, "value_": value})
