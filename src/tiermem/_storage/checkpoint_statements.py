"""Prebuilt statements of graph checkpoints (:mod:`tiermem._storage.checkpoints`).

A checkpoint put or read runs a handful of statements, and building each as a
SQLAlchemy expression (an upsert's ``excluded`` columns, an ``IN`` list expanded to
hundreds of placeholders) cost more than SQLite spent executing it. They are built
once here, per dialect where the dialects differ, with bound parameters only, so
:mod:`tiermem._storage._fast` compiles each once and runs it on the driver
connection. A list of ids is one parameter (:func:`~.statements.in_ids`).
"""

from __future__ import annotations

import functools
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from .checkpoint_schema import blob_table, checkpoint_table, write_table
from .schema import entry_table, session_table
from .statements import ids_type, in_ids

__all__ = [
    "CHECKPOINT_COLUMNS",
    "CHECKPOINT_KEY",
    "LOCK_THREAD",
    "MAX_KEYS",
    "REPLACE_WRITE",
    "insert_blob",
    "insert_delta",
    "insert_write",
    "select_blobs",
    "select_chain",
    "select_checkpoints",
    "select_entries",
    "select_entries_by_message_id",
    "select_writes",
    "update_blob",
    "upsert_checkpoint",
    "upsert_write",
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
#: The columns a checkpoint is found by (its unique key).
CHECKPOINT_KEY = ("session_pk", "checkpoint_ns", "checkpoint_id")
_WRITE_KEY = ("session_pk", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
#: Most (channel, version) pairs :func:`select_blobs` names one by one.
MAX_KEYS = 32


def _insert(dialect: str) -> Any:
    module = postgresql if dialect == "postgresql" else sqlite
    return module.insert


def _bind(name: str, column: sa.Column[Any]) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=column.type)


@functools.cache
def select_checkpoints(
    thread: bool, namespace: bool, checkpoint: bool, before: bool, after: bool, limit: bool
) -> sa.Select[Any]:
    """Checkpoints of :project, newest first within each thread and namespace; each
    flag adds its filter: :thread_id, :checkpoint_ns, :checkpoint_id, ids before
    :before, after (:after_thread, :after_ns, :after_id), at most :limit rows."""
    thread_id: sa.ColumnElement[Any] = S.session_id
    if thread:
        # The thread's session is looked up first, so that its checkpoints are read
        # newest first from their unique index and a LIMIT stops there; joined, the
        # database sorts every checkpoint of the thread to find its newest, a cost
        # that grows with the thread.
        thread_id = _bind("thread_id", S.session_id)
        session = sa.select(S.pk).where(
            S.project == _bind("project", S.project), S.session_id == thread_id
        )
        columns = (thread_id.label("session_id"), *CHECKPOINT_COLUMNS[1:])
        query = sa.select(*columns).where(C.session_pk == session.scalar_subquery())
    else:
        query = sa.select(*CHECKPOINT_COLUMNS).join(session_table, S.pk == C.session_pk)
        query = query.where(S.project == _bind("project", S.project))
    if namespace:
        query = query.where(C.checkpoint_ns == _bind("checkpoint_ns", C.checkpoint_ns))
    if checkpoint:
        query = query.where(C.checkpoint_id == _bind("checkpoint_id", C.checkpoint_id))
    if before:
        query = query.where(C.checkpoint_id < _bind("before", C.checkpoint_id))
    if after:
        last_thread = _bind("after_thread", S.session_id)
        last_ns = _bind("after_ns", C.checkpoint_ns)
        query = query.where(
            sa.or_(
                thread_id > last_thread,
                sa.and_(thread_id == last_thread, C.checkpoint_ns > last_ns),
                sa.and_(
                    thread_id == last_thread,
                    C.checkpoint_ns == last_ns,
                    C.checkpoint_id < _bind("after_id", C.checkpoint_id),
                ),
            )
        )
    if thread:
        query = query.order_by(C.checkpoint_ns, C.checkpoint_id.desc())
    else:
        query = query.order_by(S.session_id, C.checkpoint_ns, C.checkpoint_id.desc())
    if limit:
        query = query.limit(sa.bindparam("limit", type_=sa.Integer))
    return query


@functools.lru_cache(maxsize=MAX_KEYS)
def select_blobs(keys: int) -> sa.CompoundSelect[Any]:
    """(channel, version, type, value, root) of the values of session :pk_ in
    namespace :ns named by ``keys`` pairs (:c0, :v0), (:c1, :v1), ...: one primary
    key lookup each (SQLite reads a ``(channel, version) IN (...)`` by scanning the
    namespace's values, every version of every channel)."""
    one = sa.select(B.channel, B.version, B.type, B.value, B.root).where(
        B.session_pk == _bind("pk_", B.session_pk),
        B.checkpoint_ns == _bind("ns", B.checkpoint_ns),
    )
    return sa.union_all(
        *(
            one.where(
                B.channel == _bind(f"c{n}", B.channel), B.version == _bind(f"v{n}", B.version)
            )
            for n in range(keys)
        )
    )


#: The index of the message lists' chains (session, namespace, channel, root).
_CHAIN_INDEX = "ix_tiermem_checkpoint_blob_root"


@functools.cache
def select_chain(dialect: str) -> sa.Executable:
    """(version, value) of every message list of session :pk_, namespace :ns,
    channel :channel_ whose chain starts at version :root_. On SQLite through the
    chains' index, by name: without it SQLite reads the channel's values by primary
    key, every version the thread ever stored."""
    binds = {"pk_": "session_pk", "ns": "checkpoint_ns", "channel_": "channel", "root_": "root"}
    if dialect != "sqlite":
        return sa.select(B.version, B.value).where(
            *(B[column] == _bind(name, B[column]) for name, column in binds.items())
        )
    assert _CHAIN_INDEX in {index.name for index in blob_table.indexes}
    where = " AND ".join(f"{column} = :{name}" for name, column in binds.items())
    sql = f"SELECT version, value FROM {blob_table.name} INDEXED BY {_CHAIN_INDEX} WHERE {where}"
    params = [_bind(name, B[column]) for name, column in binds.items()]
    return sa.text(sql).bindparams(*params).columns(B.version, B.value)


@functools.cache
def select_writes(dialect: str) -> sa.Select[Any]:
    """The pending writes of session :pk_, namespace :ns, to the checkpoints :ids
    (one parameter), in LangGraph's order."""
    ids = sa.bindparam("ids", type_=ids_type(dialect, sa.String()))
    return (
        sa.select(W.checkpoint_id, W.task_id, W.channel, W.type, W.value, W.task_path)
        .where(
            W.session_pk == _bind("pk_", W.session_pk),
            W.checkpoint_ns == _bind("ns", W.checkpoint_ns),
            in_ids(dialect, W.checkpoint_id, ids),
        )
        .order_by(W.checkpoint_id, W.task_path, W.task_id, W.idx)
    )


@functools.cache
def select_entries(dialect: str) -> sa.Select[Any]:
    """(id, message JSON, text) of the entries :ids (one parameter)."""
    ids = sa.bindparam("ids", type_=ids_type(dialect))
    return sa.select(E.id, E.message, E.content).where(in_ids(dialect, E.id, ids))


#: Lock the session of thread :thread_id of :project (PostgreSQL).
LOCK_THREAD = (
    sa.select(S.pk)
    .where(
        S.project == _bind("project", S.project),
        S.session_id == _bind("thread_id", S.session_id),
    )
    .with_for_update()
)


@functools.cache
def select_entries_by_message_id(dialect: str) -> sa.Select[Any]:
    """(id, message id, message JSON, text, retired) of the entries of thread
    :thread_id of :project whose stored message id is among :ids (one parameter)."""
    ids = sa.bindparam("ids", type_=ids_type(dialect, sa.Text()))
    return (
        sa.select(E.id, E.message_id, E.message, E.content, E.retired_at.is_not(None))
        .join(session_table, S.pk == E.session_pk)
        .where(
            S.project == _bind("project", S.project),
            S.session_id == _bind("thread_id", S.session_id),
            in_ids(dialect, E.message_id, ids),
        )
    )


@functools.cache
def upsert_checkpoint(dialect: str) -> Any:
    """Insert a checkpoint (every column but ``pk``, by name), or replace the one of
    the same id."""
    insert = _insert(dialect)(checkpoint_table)
    changed = {
        column.name: insert.excluded[column.name]
        for column in checkpoint_table.c
        if column.name not in ("pk", *CHECKPOINT_KEY)
    }
    return insert.on_conflict_do_update(index_elements=list(CHECKPOINT_KEY), set_=changed)


@functools.cache
def insert_blob(dialect: str) -> Any:
    """Insert a channel value (columns by name) unless its version is stored."""
    return _insert(dialect)(blob_table).on_conflict_do_nothing()


@functools.cache
def insert_delta(dialect: str) -> Any:
    """Insert message list :value_ of channel :channel_ at :version_ (session :pk_,
    namespace :ns, type :type_), a delta on version :base, with the root of
    :base's chain, if :base is stored as a list; returns the version inserted."""
    found = blob_table.alias("base")
    select = sa.select(
        _bind("pk_", B.session_pk),
        _bind("ns", B.checkpoint_ns),
        _bind("channel_", B.channel),
        _bind("version_", B.version),
        _bind("type_", B.type),
        _bind("value_", B.value),
        found.c.root,
    ).where(
        found.c.session_pk == _bind("pk_", B.session_pk),
        found.c.checkpoint_ns == _bind("ns", B.checkpoint_ns),
        found.c.channel == _bind("channel_", B.channel),
        found.c.version == _bind("base", B.version),
        found.c.type == _bind("type_", B.type),
        found.c.root.is_not(None),
    )
    names = ["session_pk", "checkpoint_ns", "channel", "version", "type", "value", "root"]
    insert = _insert(dialect)(blob_table).from_select(names, select).on_conflict_do_nothing()
    # RETURNING rather than the row count (psycopg reports -1 for INSERT ... SELECT).
    return insert.returning(B.version)


@functools.cache
def insert_write(dialect: str) -> Any:
    """Insert a pending write (columns by name) unless it is stored."""
    return _insert(dialect)(write_table).on_conflict_do_nothing()


@functools.cache
def upsert_write(dialect: str) -> Any:
    """Insert a pending write (columns by name), or replace the stored one."""
    insert = _insert(dialect)(write_table)
    changed = {name: insert.excluded[name] for name in ("channel", "type", "value", "task_path")}
    return insert.on_conflict_do_update(index_elements=list(_WRITE_KEY), set_=changed)


#: Set the :type_ and :value_ of one pending write (its key: :session_pk_,
#: :checkpoint_ns_, :checkpoint_id_, :task_id_, :idx_).
REPLACE_WRITE = (
    sa.update(write_table)
    .where(*(W[name] == _bind(f"{name}_", W[name]) for name in _WRITE_KEY))
    .values(type=_bind("type_", W.type), value=_bind("value_", W.value))
)


@functools.cache
def update_blob(columns: tuple[str, ...]) -> sa.Update:
    """Set ``columns`` (each from :<column>_) of one channel value (its key:
    :session_pk_, :checkpoint_ns_, :channel_, :version_)."""
    key = ("session_pk", "checkpoint_ns", "channel", "version")
    return (
        sa.update(blob_table)
        .where(*(B[name] == _bind(f"{name}_", B[name]) for name in key))
        .values({name: _bind(f"{name}_", B[name]) for name in columns})
    )
