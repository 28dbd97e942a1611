"""SQL of ``forget`` (:mod:`tiermem._ops.forget`): erasing a person's sessions, layer
scopes, documents, vectors and events in one transaction, and scrubbing what the
database files still hold of them.

:func:`erase` runs inside the transaction ``Database.run`` opened and deletes (or,
for a dry run, counts) set-based: each table in one statement over the sessions',
scopes' or namespaces' keys. The rows that reference sessions are deleted by the
cascade of :mod:`tiermem._storage.cascade`.

On SQLite a deleted row's bytes stay in the file (in its page, or on a free page)
until they are overwritten, and a full-text index keeps the words of deleted rows
in its older segments until they are merged. tiermem's connections run with
``PRAGMA secure_delete`` on (:mod:`tiermem._storage.database`: what they delete or
overwrite is zeroed), and the erasing transaction turns it on for itself too
whatever the connection's setting; it also merges the full-text index of each kind
of thing named (entries for sessions, items for scopes, documents for namespaces:
FTS5 ``optimize``, which drops the words of every deleted row, those deleted earlier
too; it rewrites that index, so its cost follows the index's size). After the commit :func:`scrub`
checkpoints the WAL and truncates it; with ``vacuum`` it rewrites the whole file
first (``VACUUM``), which also clears what was deleted or overwritten earlier
without ``secure_delete`` (a file written by an older tiermem or another program).
PostgreSQL keeps deleted rows as dead tuples until ``VACUUM`` reclaims them;
``vacuum`` runs ``VACUUM FULL`` on the tables rows were deleted from, which
rewrites them.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection, Engine

from . import cascade
from . import failpoints as _failpoints
from .document_schema import document_table
from .documents import under_prefix
from .event_schema import event_table
from .layer_schema import item_table, scope_table
from .schema import entry_table, session_table
from .tables import FULL_TEXT_INDEXES
from .vector_schema import item_vector_table

__all__ = ["Found", "Named", "erase", "find", "scrub"]

logger = logging.getLogger(__name__)

S, SC, D, V = session_table.c, scope_table.c, document_table.c, event_table.c


@dataclass(frozen=True, slots=True)
class Named:
    """What a request names: session ids, scopes and namespace prefixes (stored text)."""

    sessions: tuple[str, ...]
    scopes: tuple[str, ...]
    prefixes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Found:
    """What of a request is stored: sessions and scopes (pks and names, in name
    order) and the prefixes that hold documents. Events are matched by ``named``
    (what was asked), since they outlive what they name: a session cleared earlier
    leaves its events, with their content, for the retention period."""

    named: Named
    session_pks: tuple[int, ...]
    session_ids: tuple[str, ...]
    scope_pks: tuple[int, ...]
    scopes: tuple[str, ...]
    prefixes: tuple[str, ...]


def _text_values(conn: Connection, column: Any, values: Sequence[str]) -> Any:
    return cascade.in_values(conn, column, values, sa.Text())


def find(conn: Connection, project: str, named: Named, *, lock: bool) -> Found:
    """The stored sessions, scopes and document namespaces among those named; with
    ``lock`` their session and scope rows are locked first on PostgreSQL (a write
    that committed first is erased too, a later one waits for the erasure)."""
    sessions, scopes, prefixes = named.sessions, named.scopes, named.prefixes
    session_query = (
        sa.select(S.pk, S.session_id)
        .where(S.project == project, _text_values(conn, S.session_id, sessions))
        .order_by(S.session_id)
    )
    scope_query = (
        sa.select(SC.pk, SC.scope)
        .where(SC.project == project, _text_values(conn, SC.scope, scopes))
        .order_by(SC.scope)
    )
    if lock and conn.dialect.name == "postgresql":
        session_query = session_query.with_for_update()
        scope_query = scope_query.with_for_update()
    found_sessions = conn.execute(session_query).all() if sessions else []
    found_scopes = conn.execute(scope_query).all() if scopes else []
    held = [
        prefix
        for prefix in prefixes
        if conn.execute(
            sa.select(D.id).where(D.project == project, under_prefix(prefix)).limit(1)
        ).first()
        is not None
    ]
    return Found(
        named=named,
        session_pks=tuple(int(row.pk) for row in found_sessions),
        session_ids=tuple(row.session_id for row in found_sessions),
        scope_pks=tuple(int(row.pk) for row in found_scopes),
        scopes=tuple(row.scope for row in found_scopes),
        prefixes=tuple(held),
    )


def _json_text(conn: Connection, payload: Any, *path: str | int) -> Any:
    """The text at ``path`` of a JSON payload column (``NULL`` when absent)."""
    if conn.dialect.name == "postgresql":
        document = sa.cast(payload, postgresql.JSONB)
        return sa.func.jsonb_extract_path_text(document, *[str(step) for step in path])
    steps = "".join(f"[{step}]" if isinstance(step, int) else f".{step}" for step in path)
    return sa.func.json_extract(payload, "$" + steps)


def _events_of(conn: Connection, project: str, named: Named) -> sa.ColumnElement[bool]:
    """Events naming the sessions, or whose payload names a scope or a namespace
    under a prefix (layer and document events have no session)."""
    matches: list[sa.ColumnElement[bool]] = []
    if named.sessions:
        matches.append(_text_values(conn, V.session_id, named.sessions))
    unowned: list[sa.ColumnElement[bool]] = []
    if named.scopes:
        unowned.append(_text_values(conn, _json_text(conn, V.payload, "scope"), named.scopes))
    for prefix in named.prefixes:
        labels = prefix.split(".")
        unowned.append(
            sa.and_(
                *[
                    _json_text(conn, V.payload, "namespace", index) == label
                    for index, label in enumerate(labels)
                ]
            )
        )
    if unowned:
        matches.append(sa.and_(V.session_id.is_(None), sa.or_(*unowned)))
    if not matches:
        return sa.false()
    return sa.and_(V.project == project, sa.or_(*matches))


def _targets(conn: Connection, project: str, found: Found) -> list[tuple[sa.Table, Any]]:
    """Each table other than the sessions' with the condition of the rows to erase,
    in the order they are deleted."""
    documents = (
        sa.and_(D.project == project, sa.or_(*[under_prefix(p) for p in found.prefixes]))
        if found.prefixes
        else sa.false()
    )
    scope_pks = list(found.scope_pks)
    return [
        (item_vector_table, cascade.in_values(conn, item_vector_table.c.scope_pk, scope_pks)),
        (item_table, cascade.in_values(conn, item_table.c.scope_pk, scope_pks)),
        (scope_table, cascade.in_values(conn, SC.pk, scope_pks)),
        (document_table, documents),
        (event_table, _events_of(conn, project, found.named)),
    ]


def erase(conn: Connection, project: str, found: Found, *, dry_run: bool) -> dict[str, int]:
    """Delete what ``found`` names (the sessions through the cascade, then the scopes'
    items and vectors, the documents and the events), or with ``dry_run`` count it.
    Returns the rows per table. On SQLite the deletions overwrite the rows' bytes and
    the full-text indexes are merged (see the module's docstring)."""
    if dry_run:
        rows = cascade.count_session_rows(conn, list(found.session_pks))
        for table, where in _targets(conn, project, found):
            count = sa.select(sa.func.count()).select_from(table).where(where)
            rows[table.name] = int(conn.execute(count).scalar_one())
        return rows
    with _secure_delete(conn):
        rows = cascade.delete_sessions(conn, list(found.session_pks))
        _failpoints.hit("forget.after_sessions")
        for table, where in _targets(conn, project, found):
            rows[table.name] = conn.execute(sa.delete(table).where(where)).rowcount
        if conn.dialect.name == "sqlite":
            # Also when nothing was deleted now: rows deleted earlier (a cleared session,
            # a cleared layer, a deleted document) leave their words in older segments.
            named = found.named
            asked = {
                entry_table.name: named.sessions,
                item_table.name: named.scopes,
                document_table.name: named.prefixes,
            }
            for index in FULL_TEXT_INDEXES:
                if asked.get(index.table.name):
                    conn.exec_driver_sql(
                        f"INSERT INTO {index.name}({index.name}) VALUES ('optimize')"
                    )
    return rows


@contextlib.contextmanager
def _secure_delete(conn: Connection) -> Iterator[None]:
    """SQLite: overwrite deleted content with zeros while the block runs (the
    connection's own setting is restored after, also when the block fails)."""
    if conn.dialect.name != "sqlite":
        yield
        return
    before = int(conn.exec_driver_sql("PRAGMA secure_delete").scalar_one())
    conn.exec_driver_sql("PRAGMA secure_delete = 1")
    try:
        yield
    finally:
        conn.exec_driver_sql(f"PRAGMA secure_delete = {before}")


def scrub(engine: Engine, tables: Sequence[str], *, vacuum: bool) -> bool:
    """After an erasure committed, make the database files forget it too: SQLite's WAL
    checkpointed and truncated (with ``vacuum``, the file rewritten first); with
    ``vacuum`` on PostgreSQL, ``VACUUM FULL`` of ``tables``. Runs outside any
    transaction. Returns whether it completed (``False``: a reader kept the WAL
    busy; the rows are gone, and a later checkpoint writes the zeros over them)."""
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if conn.dialect.name == "postgresql":
                for table in tables if vacuum else ():
                    conn.exec_driver_sql(f"VACUUM FULL {table}")
                return True
            if vacuum:
                conn.exec_driver_sql("VACUUM")
            busy = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").first()
            return busy is None or int(busy[0]) == 0
    except exc.SQLAlchemyError:  # the erasure committed: never report it as failed
        logger.warning("tiermem forget: scrubbing the database files failed", exc_info=True)
        return False
