"""Everything tiermem creates in a database, listed in one place.

:data:`TABLES` names every table, :data:`FULL_TEXT_INDEXES` every full-text
index (with its view, triggers or generated column, see :mod:`tiermem._storage.fts`)
and :data:`EXTRA_DDL` every other object (a trigger and its function).
:func:`create_tables`, the doctor's checks (:mod:`tiermem._storage.checks`) and the
migrations read these tuples; no module adds to them, so what a database gets never
depends on which modules a process happened to import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from . import coverage, fts
from .checkpoint_schema import blob_table, checkpoint_table, write_table
from .document_schema import DOCUMENT_INDEX, document_table
from .event_schema import NOTIFY_TRIGGER, consumer_table, event_table, install_notify
from .layer_schema import ITEM_INDEX, item_table, scope_table
from .schema import entry_table, session_table, summary_table
from .vector_schema import entry_vector_table, item_vector_table

__all__ = [
    "EXTRA_DDL",
    "FULL_TEXT_INDEXES",
    "SCHEMA_LOCK_KEY",
    "TABLES",
    "ExtraDdl",
    "create_tables",
    "lock_schema",
]


@dataclass(frozen=True, slots=True)
class ExtraDdl:
    """An object beyond tables and full-text indexes.

    Attributes:
        name: the object (a trigger, with a function of the same name).
        dialect: the only backend that has it.
        install: creates it if it is missing (idempotent).
    """

    name: str
    dialect: str
    install: Callable[[Connection], None]


#: Every table, each after the tables its foreign keys name.
TABLES: tuple[sa.Table, ...] = (
    session_table,
    summary_table,
    entry_table,
    scope_table,
    item_table,
    document_table,
    entry_vector_table,
    item_vector_table,
    event_table,
    consumer_table,
    checkpoint_table,
    blob_table,
    write_table,
)

#: Every full-text index, created once the tables exist.
FULL_TEXT_INDEXES: tuple[fts.FtsIndex, ...] = (fts.ENTRY_INDEX, ITEM_INDEX, DOCUMENT_INDEX)

#: Every other object, created last.
EXTRA_DDL: tuple[ExtraDdl, ...] = (ExtraDdl(NOTIFY_TRIGGER, "postgresql", install_notify),)

#: PostgreSQL advisory lock key serializing schema creation and migrations ("tier").
SCHEMA_LOCK_KEY = 0x7469_6572


def lock_schema(conn: Connection) -> None:
    """Serialize schema changes with other processes until the transaction ends
    (PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` or the file lock of the first DDL
    already does)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK_KEY)))


def create_tables(bind: Engine | Connection) -> None:
    """Create what :data:`TABLES`, :data:`FULL_TEXT_INDEXES` and :data:`EXTRA_DDL`
    list (and only that) where it is missing. Safe when several processes do it at once."""
    if isinstance(bind, Engine):
        # One transaction. On PostgreSQL the advisory lock serializes creators; on a
        # plain SQLite engine (no BEGIN IMMEDIATE) a creator that loses the race to
        # CREATE a table retries and then finds it.
        for attempt in range(5):
            try:
                with bind.begin() as conn:
                    create_tables(conn)
                return
            except sa.exc.DBAPIError as error:
                text = str(error.orig).lower()
                if attempt == 4 or ("already exists" not in text and "duplicate" not in text):
                    raise
        return
    lock_schema(bind)
    TABLES[0].metadata.create_all(bind, tables=list(TABLES))
    for index in FULL_TEXT_INDEXES:
        fts.install_index(bind, index)
    coverage.install(bind)
    for extra in EXTRA_DDL:
        if extra.dialect == bind.dialect.name:
            extra.install(bind)
