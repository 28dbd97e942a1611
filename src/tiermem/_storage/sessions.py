"""The writes of the sessions table (``tiermem_session``), and its rows read.

A session's row is its lock, its counters and its tier: it is created on a first
write, touched by an access, reserves an append's seqs, holds the pending tool
calls and a compression's claim, moves between tiers, comes with an import and
changes id with a rename. Every statement that writes it is here; the modules that
decide those changes (appends, compression, tiers, imports, renames) call these.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from .._core.clock import as_utc
from ..errors import SessionNotFound, StorageBusy
from ..tiers import MemoryTier
from ..types import SessionInfo, SessionStats
from . import _fast as _driver
from . import statements as _sql
from .rows import SessionRecord
from .schema import dialect_insert, session_table

S = session_table.c

#: Inserts a writer creating a session tries before it gives up (``StorageBusy``):
#: each one after the first follows a concurrent create and clear of that session.
CREATE_ATTEMPTS = 5


def get_session(
    conn: Connection,
    project: str,
    session_id: str,
    *,
    lock: bool = True,
    create: bool = False,
    now: datetime | None = None,
    encoding: str = "",
) -> SessionRecord:
    """The session row, locked for this transaction on PostgreSQL.

    Raises:
        SessionNotFound: if it does not exist and ``create`` is false.
        StorageBusy: if ``create`` is true and concurrent clears deleted the
            session each of :data:`CREATE_ATTEMPTS` times this call created it.
    """
    query = (
        _sql.SELECT_SESSION_FOR_UPDATE
        if lock and conn.dialect.name == "postgresql"
        else _sql.SELECT_SESSION
    )
    keys = {"project": project, "session_id": session_id}
    row = _driver.first(conn, query, keys)
    # ON CONFLICT DO NOTHING: two processes creating one id both end with one row.
    # On PostgreSQL the row the insert found may belong to another writer's new
    # session that a concurrent clear holds and then deletes, so the locking SELECT
    # finds nothing: insert again (each retry needs another create and clear to
    # race this one, so a few attempts end it).
    for _ in range(CREATE_ATTEMPTS if create else 0):
        if row is not None:
            break
        assert now is not None
        conn.execute(
            dialect_insert(conn, session_table)
            .values(
                project=project,
                session_id=session_id,
                created_at=now,
                last_accessed=now,
                access_count=0,
                memory_tier=MemoryTier.ACTIVE.value,
                encoding=encoding,
            )
            .on_conflict_do_nothing()
        )
        row = _driver.first(conn, query, keys)
    if row is None and create:
        raise StorageBusy(
            f"session {session_id!r} in project {project!r} was created and cleared by "
            f"other writers {CREATE_ATTEMPTS} times while this one created it; retry"
        )
    if row is None:
        raise SessionNotFound(f"no session {session_id!r} in project {project!r}")
    return SessionRecord.from_row(row)


def session_stats(session: SessionRecord) -> SessionStats:
    """Counters of a session row."""
    return SessionStats(
        total_entries=session.entry_count,
        active_entries=session.active_count,
        compressed_entries=session.entry_count - session.active_count,
        summaries=session.summary_count,
        total_tokens=session.entry_tokens,
        active_tokens=session.active_tokens,
        summary_tokens=session.summary_tokens,
        context_tokens=session.context_tokens,
        memory_tier=session.memory_tier,
        last_accessed=as_utc(session.last_accessed),
        access_count=session.access_count,
    )


#: An access on PostgreSQL's clock (never before ``created_at``, stamped by the application).
_SERVER_NOW = sa.func.greatest(sa.func.now(), S.created_at)


@functools.cache
def _on_server_clock(statement: sa.Update) -> sa.Update:
    return statement.values(last_accessed=_SERVER_NOW)


def _clocked(conn: Connection, statement: sa.Update) -> sa.Update:
    """``statement``, stamping the access with the server's ``now()`` when the
    memory has no injected clock (``Database(server_time=True)``, PostgreSQL)."""
    if conn.get_execution_options().get("tiermem_server_time"):
        return _on_server_clock(statement)
    return statement


def touch(conn: Connection, session: SessionRecord, now: Any) -> tuple[SessionRecord, str | None]:
    """Record an access on the session row and :func:`activate` it (``session``: the
    row as read in this transaction); returns what :func:`activate` returns."""
    _driver.write(conn, _clocked(conn, _sql.TOUCH), {"pk_": session.pk, "now": now})
    return activate(conn, session)


def activate(conn: Connection, session: SessionRecord) -> tuple[SessionRecord, str | None]:
    """Make an accessed session ACTIVE (``session``: its row as the access read it).

    Returns the row as it is now, and the tier it had when that was another one
    (the row is updated to ACTIVE), else ``None``; only then is a statement run.
    """
    previous = session.memory_tier
    if previous == MemoryTier.ACTIVE.value:
        return session, None
    _driver.write(conn, _sql.ACTIVATE, {"pk_": session.pk, "tier": MemoryTier.ACTIVE.value})
    return dataclasses.replace(session, memory_tier=MemoryTier.ACTIVE.value), previous


def session_info(session: SessionRecord) -> SessionInfo:
    """The public view of a session row."""
    return SessionInfo(
        session_id=session.session_id,
        project=session.project,
        created_at=as_utc(session.created_at),
        last_accessed=as_utc(session.last_accessed),
        access_count=session.access_count,
        memory_tier=session.memory_tier,
        total_entries=session.entry_count,
        context_tokens=session.context_tokens,
    )


def list_sessions(
    conn: Connection, project: str, limit: int | None, offset: int
) -> list[SessionInfo]:
    """Sessions of a project, most recently accessed first."""
    query = (
        sa.select(session_table)
        .where(S.project == project)
        .order_by(S.last_accessed.desc(), S.session_id)
        .offset(offset)
    )
    if limit is not None:
        query = query.limit(limit)
    return [session_info(SessionRecord.from_row(row)) for row in conn.execute(query).mappings()]


def reserve(
    conn: Connection, project: str, session_id: str, count: int, tokens: int, now: datetime
) -> SessionRecord | None:
    """Allocate seqs for ``count`` entries of ``tokens`` tokens and add them to the
    session's counters in one ``UPDATE ... RETURNING`` (which locks the row on
    PostgreSQL); the tier is left to :func:`activate`.

    Returns the updated row, or ``None`` if the session does not exist.
    """
    params = {
        "b_project": project,
        "b_session_id": session_id,
        "n": count,
        "tokens": tokens,
        "now": now,
    }
    row = _driver.first(conn, _clocked(conn, _sql.RESERVE), params)
    return None if row is None else SessionRecord.from_row(row)


def release(conn: Connection, session: SessionRecord, count: int, tokens: int) -> SessionRecord:
    """Give back what :func:`reserve` counted for ``count`` entries of ``tokens``
    tokens, which are not appended after all (``session``: the row it returned; the
    row stays locked). Returns the updated row."""
    params = {"pk_": session.pk, "n": count, "tokens": tokens}
    row = _driver.first(conn, _sql.RELEASE, params)
    assert row is not None  # the row is locked by this transaction
    return SessionRecord.from_row(row)


def touch_session(
    conn: Connection, project: str, session_id: str, now: datetime
) -> SessionRecord | None:
    """Record an access and return the session row, or ``None`` if it does not exist
    (the tier is left to :func:`activate`).

    For reads: when the session is ACTIVE, so that the transaction writes nothing but
    the access record, it commits without waiting for the disk
    (:func:`tiermem._storage.database.commit_without_waiting`; on PostgreSQL set by
    this same statement)."""
    params = {
        "b_project": project,
        "b_session_id": session_id,
        "now": now,
    }
    if conn.dialect.name != "postgresql":
        row = _driver.first(conn, _clocked(conn, _sql.TOUCH_RETURNING), params)
    else:
        row = _driver.first(conn, _clocked(conn, _sql.TOUCH_RETURNING_RELAXED), params)
        if row is not None:
            del row[_sql.COMMIT_MODE]
    return None if row is None else SessionRecord.from_row(row)


def set_pending_calls(conn: Connection, session: SessionRecord, pending: str) -> SessionRecord:
    """Store the session's pending tool calls (JSON, in call order); the row as it is
    then."""
    _driver.write(conn, _sql.SET_PENDING, {"pk_": session.pk, "pending": pending})
    return dataclasses.replace(session, pending_calls=pending)


def leave_active(conn: Connection, session_pk: int, count: int, tokens: int) -> None:
    """Take ``count`` entries of ``tokens`` tokens out of the session's active
    counters (retired entries: no longer part of the context)."""
    conn.execute(
        sa.update(session_table)
        .where(S.pk == session_pk)
        .values(active_count=S.active_count - count, active_tokens=S.active_tokens - tokens)
    )


# --------------------------------------------------------------------------- compression


def set_claim(conn: Connection, session_pk: int, token: str, expires_at: datetime) -> None:
    """Give the session's compression claim to ``token`` until ``expires_at``."""
    _driver.write(conn, _sql.CLAIM, {"pk_": session_pk, "token": token, "expires": expires_at})


def drop_claim(
    conn: Connection, session_pk: int, failures: int, backoff_until: datetime | None
) -> None:
    """Drop the session's compression claim after a failure, counting ``failures`` and
    pausing automatic compression until ``backoff_until``."""
    conn.execute(
        sa.update(session_table)
        .where(S.pk == session_pk)
        .values(
            claim_token=None,
            claim_expires_at=None,
            failures=failures,
            backoff_until=backoff_until,
        )
    )


def finish_claim(conn: Connection, session: SessionRecord) -> SessionRecord:
    """Store the counters and ``compressed_seq`` of ``session`` and drop its claim; the
    row as it is then."""
    values = {
        "pk_": session.pk,
        "active_count": session.active_count,
        "active_tokens": session.active_tokens,
        "summary_count": session.summary_count,
        "summary_tokens": session.summary_tokens,
        "compressed_seq": session.compressed_seq,
    }
    _driver.write(conn, _sql.FINISH_CLAIM, values)
    return dataclasses.replace(
        session, claim_token=None, claim_expires_at=None, failures=0, backoff_until=None
    )


def set_compressed_seqs(conn: Connection) -> None:
    """Set every session's ``compressed_seq`` to the end of its level-1 summaries (the
    column's first fill, :func:`tiermem._storage.coverage.install`)."""
    conn.execute(sa.update(session_table).values(compressed_seq=_sql.LEVEL_ONE_END))


# --------------------------------------------------------------------------- tiers


def clamp_future_accesses(conn: Connection, project: str, now: datetime) -> None:
    """Clamp the accesses (and creations) of ``project``'s sessions stamped after
    ``now`` (another host's clock) to ``now``."""
    conn.execute(
        sa.update(session_table)
        .where(S.project == project, S.last_accessed > now)
        .values(
            last_accessed=now,
            created_at=sa.case((S.created_at > now, now), else_=S.created_at),
        )
    )


def set_tiers(
    conn: Connection,
    where: Sequence[sa.ColumnElement[bool]],
    tier: sa.ColumnElement[str],
    *,
    returning: bool,
) -> tuple[int, Sequence[Row[tuple[str, str]]]]:
    """Set the tier of the sessions ``where`` holds to ``tier`` (an expression), where
    it differs. Returns how many changed and, with ``returning``, their ids and tiers."""
    statement = (
        sa.update(session_table).where(*where, S.memory_tier != tier).values(memory_tier=tier)
    )
    if not returning:
        return conn.execute(statement).rowcount, []
    rows = conn.execute(statement.returning(S.session_id, S.memory_tier)).all()
    return len(rows), rows


def touch_many(
    conn: Connection, where: Sequence[sa.ColumnElement[bool]], stamp: sa.ColumnElement[Any]
) -> list[SessionRecord]:
    """Record an access (at ``stamp``) of the sessions ``where`` holds and make them
    ACTIVE; their rows as they are then."""
    touched = conn.execute(
        sa.update(session_table)
        .where(*where)
        .values(
            last_accessed=stamp,
            access_count=S.access_count + 1,
            memory_tier=MemoryTier.ACTIVE.value,
        )
        .returning(session_table)
    ).mappings()
    return [SessionRecord.from_row(row) for row in touched]


# --------------------------------------------------------------------------- imports, renames


def insert_imported(conn: Connection, values: dict[str, Any]) -> int | None:
    """Insert an imported session's row (``values``: its columns); its pk, or ``None``
    when a session with that id exists."""
    pk = conn.execute(
        dialect_insert(conn, session_table)
        .values(**values)
        .on_conflict_do_nothing()
        .returning(S.pk)
    ).scalar_one_or_none()
    return None if pk is None else int(pk)


def rename(conn: Connection, project: str, session_id: str, new_id: str) -> int:
    """Give ``project``'s session ``session_id`` the id ``new_id``; how many rows
    changed (0 or 1). A taken id fails on the unique constraint (``IntegrityError``)."""
    return conn.execute(
        sa.update(session_table)
        .where(S.project == project, S.session_id == session_id)
        .values(session_id=new_id)
    ).rowcount
