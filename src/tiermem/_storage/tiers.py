"""Set-based statements of the access-tier operations (:mod:`tiermem._ops.tiers`).

Every function runs on a connection inside the transaction ``Database.run``
opened and touches rows only through single statements over a pk range, a
``(project, last_accessed)`` index range or a list of pks; none loops over rows.
Times are datetimes (the memory's clock) or SQL on the server's ``now()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from ..errors import StorageBusy
from ..tiers import MemoryTier, TierPolicy
from ..types import LoadedSession, SessionInfo
from . import failpoints as _failpoints
from . import sessions
from .cascade import delete_sessions
from .layer_schema import in_project, item_table
from .rows import SessionRecord
from .schema import entry_table, session_table, summary_table
from .sessions import session_info
from .statements import ids_type, ids_value, in_ids

__all__ = [
    "Changed",
    "Cutoffs",
    "clamp_future",
    "count_expired",
    "cutoffs",
    "delete_locked",
    "least_recently_used",
    "load_sessions",
    "prune_batch",
    "recalculate_batch",
    "item_ages",
    "tier_case",
    "tier_counts",
    "tier_predicates",
]

S, E, M = session_table.c, entry_table.c, summary_table.c

#: (session_id, new tier) of the sessions a recalculation batch changed.
Changed = Sequence[Row[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class Cutoffs:
    """``now`` and the tier boundaries: datetimes, or SQL on the server's ``now()``;
    and the memory layers whose items expire (``TierPolicy.expiring_layers``)."""

    now: Any
    active: Any
    recent: Any
    expired: Any
    expiring_layers: tuple[str, ...] = ()


def cutoffs(moment: Any, policy: TierPolicy) -> Cutoffs:
    """The boundaries of ``policy`` as seen at ``moment``."""
    return Cutoffs(
        now=moment,
        active=moment - policy.active_within,
        recent=moment - policy.recent_within,
        expired=moment - policy.expired_after,
        expiring_layers=tuple(sorted(policy.expiring_layers)),
    )


def tier_predicates(
    cut: Cutoffs,
    accessed: sa.ColumnElement[Any] = S.last_accessed,
    ages: sa.ColumnElement[bool] | None = None,
) -> dict[MemoryTier, sa.ColumnElement[bool]]:
    """Each tier as a range of ``accessed`` (a session's ``last_accessed`` by default;
    the boundaries of ``calculate_tier``). With ``ages``, only rows it holds for
    expire; the others are ARCHIVED at most (layer items of a layer that persists)."""
    kept = accessed >= cut.expired
    expired = accessed < cut.expired  # strictly older than expired_after
    if ages is not None:
        kept, expired = sa.or_(kept, sa.not_(ages)), sa.and_(ages, expired)
    return {
        MemoryTier.ACTIVE: accessed > cut.active,  # a future access counts as now
        MemoryTier.RECENT: sa.and_(accessed > cut.recent, accessed <= cut.active),
        MemoryTier.ARCHIVED: sa.and_(kept, accessed <= cut.recent),
        MemoryTier.EXPIRED: expired,
    }


def tier_case(
    cut: Cutoffs,
    accessed: sa.ColumnElement[Any] = S.last_accessed,
    ages: sa.ColumnElement[bool] | None = None,
) -> sa.Case[Any]:
    """The tier of a row as a SQL ``CASE`` over ``accessed`` (a session's
    ``last_accessed`` by default); with ``ages``, only rows it holds for expire."""
    kept = accessed >= cut.expired
    return sa.case(
        (accessed.is_(None), MemoryTier.ARCHIVED.value),  # never accessed: never expired by age
        (accessed > cut.active, MemoryTier.ACTIVE.value),
        (accessed > cut.recent, MemoryTier.RECENT.value),
        (kept if ages is None else sa.or_(kept, sa.not_(ages)), MemoryTier.ARCHIVED.value),
        else_=MemoryTier.EXPIRED.value,
    )


def item_ages(cut: Cutoffs) -> sa.ColumnElement[bool]:
    """Whether a layer item's layer expires by age (``TierPolicy.expiring_layers``)."""
    return item_table.c.layer.in_(cut.expiring_layers)


def tier_counts(conn: Connection, *, project: str, cut: Cutoffs) -> list[int]:
    """The project's sessions and stored layer items: total, then per tier (ACTIVE,
    RECENT, ARCHIVED, EXPIRED), sessions first; one indexed count per table."""
    queries = [
        sa.select(sa.func.count(), *(sa.func.count().filter(p) for p in predicates.values()))
        .select_from(table)
        .where(where)
        for table, where, predicates in (
            (session_table, S.project == project, tier_predicates(cut)),
            (
                item_table,
                in_project(project),
                tier_predicates(cut, item_table.c.last_accessed, item_ages(cut)),
            ),
        )
    ]
    return [int(value) for query in queries for value in conn.execute(query).one()]


def least_recently_used(
    conn: Connection, *, project: str, tier: MemoryTier, cut: Cutoffs, limit: int
) -> list[SessionInfo]:
    """Up to ``limit`` sessions of ``project`` in ``tier``, least recently accessed first."""
    query = (
        sa.select(session_table)
        .where(S.project == project, tier_predicates(cut)[tier])
        .order_by(S.last_accessed, S.pk)
        .limit(limit)
    )
    return [session_info(SessionRecord.from_row(row)) for row in conn.execute(query).mappings()]


def clamp_future(conn: Connection, *, project: str, cut: Cutoffs) -> tuple[int, int] | None:
    """Clamp accesses stamped in the future to now; return the project's pk range."""
    sessions.clamp_future_accesses(conn, project, cut.now)
    low, high = conn.execute(
        sa.select(sa.func.min(S.pk), sa.func.max(S.pk)).where(S.project == project)
    ).one()
    return None if low is None else (int(low), int(high))


def recalculate_batch(
    conn: Connection, *, project: str, low: int, high: int, cut: Cutoffs, returning: bool
) -> tuple[int, Changed]:
    """Set the tier of the sessions in pks ``low..high`` whose stored tier is stale.

    Returns the number changed and, with ``returning``, their ids and new tiers.
    """
    tier = tier_case(cut)
    # ``project || ''`` keeps the planner on the pk range: SQLite, without ANALYZE
    # statistics, would otherwise walk the project's whole index for every batch.
    in_project = S.project.concat("") == project
    return sessions.set_tiers(
        conn, [S.pk.between(low, high), in_project], tier, returning=returning
    )


def count_expired(conn: Connection, *, project: str, cutoff: Any) -> int:
    """How many sessions of ``project`` were last accessed before ``cutoff``."""
    query = sa.select(sa.func.count()).where(S.project == project, S.last_accessed < cutoff)
    return int(conn.execute(query).scalar_one())


def among(
    conn: Connection, column: sa.ColumnElement[int], pks: Sequence[int]
) -> sa.ColumnElement[bool]:
    """``column IN pks`` (:func:`in_ids` with the pks bound)."""
    dialect = conn.dialect.name
    return in_ids(dialect, column, sa.literal(ids_value(dialect, pks), ids_type(dialect)))


def delete_locked(
    conn: Connection,
    chosen: sa.Select[Any],
    id_column: sa.Column[int],
    still: sa.ColumnElement[bool],
) -> tuple[int, ...]:
    """Delete the rows whose ids ``chosen`` selects, re-checking ``still`` in the
    ``DELETE``; their ids, sorted.

    On PostgreSQL the candidates are locked first: a write that committed first makes
    the lock wait re-evaluate the row (which may then no longer qualify), a later one
    finds it gone. SQLite serializes writers with ``BEGIN IMMEDIATE`` instead.
    """
    if conn.dialect.name == "postgresql":
        chosen = chosen.with_for_update()
    ids: list[int] = list(conn.execute(chosen).scalars())
    if not ids:
        return ()
    table = id_column.table
    statement = sa.delete(table).where(among(conn, id_column, ids), still).returning(id_column)
    return tuple(sorted(int(found) for found in conn.execute(statement).scalars()))


def prune_batch(
    conn: Connection, *, project: str, cutoff: Any, want: int
) -> tuple[str, ...] | None:
    """Delete up to ``want`` sessions last accessed before ``cutoff``, oldest first, with
    their entries and summaries. Returns their ids; ``None`` when none is left."""
    query = (
        sa.select(S.pk)
        .where(S.project == project, S.last_accessed < cutoff)
        .order_by(S.last_accessed, S.pk)
        .limit(want)
    )
    if conn.dialect.name == "postgresql":
        # Lock the candidates: an access that committed first makes the lock wait
        # re-evaluate the WHERE on its row, which is then no longer expired; a later
        # one waits for this transaction and finds the session gone. SQLite
        # serializes writers with BEGIN IMMEDIATE instead.
        query = query.with_for_update()
    pks = list(conn.execute(query).scalars())
    if not pks:
        return None
    _failpoints.hit("prune.after_select")
    # Re-check expiry by the current last_accessed (selecting by pk alone keeps SQLite
    # on pk lookups), delete the children of exactly those sessions, then the sessions,
    # with the re-check once more in the DELETE itself. Under the locks taken above the
    # two checks agree; should they not, the batch is rolled back, never half done.
    rows = conn.execute(
        sa.select(S.pk, S.session_id)
        .where(among(conn, S.pk, pks), S.last_accessed < cutoff)
        .order_by(S.last_accessed, S.pk)
    ).all()
    doomed = [row.pk for row in rows]
    if doomed:
        deleted = delete_sessions(conn, doomed, still=S.last_accessed < cutoff)
        if deleted[session_table.name] != len(doomed):
            raise StorageBusy("sessions were accessed while being pruned; nothing was deleted")
    return tuple(row.session_id for row in rows)


def load_sessions(
    conn: Connection, *, project: str, cut: Cutoffs, limit: int, server_time: bool
) -> tuple[list[LoadedSession], tuple[str, ...]]:
    """Pick up to ``limit`` sessions of ``project`` that are not expired, by tier then
    recency, and record an access of each (stamped ``cut.now``, never before the
    session's creation, as :func:`sessions.touch` stamps it).

    Returns:
        The sessions loaded, in order, and the ids of those whose stored tier was
        not ACTIVE before (they are ACTIVE now).
    """
    # Never before the session's creation: the time was read before this transaction
    # waited for its lock, and another writer may have created a session meanwhile at
    # a later time of its own clock.
    if server_time:
        stamp: sa.ColumnElement[Any] = sa.func.greatest(cut.now, S.created_at)
    else:
        now = sa.literal(cut.now, S.last_accessed.type)
        stamp = sa.case((now < S.created_at, S.created_at), else_=now)
    picked = conn.execute(
        sa.select(S.pk, S.memory_tier, tier_case(cut).label("loaded_tier"))
        .where(S.project == project, S.last_accessed >= cut.expired)
        .order_by(S.last_accessed.desc(), S.pk.desc())
        .limit(limit)
    ).all()
    if not picked:
        return [], ()
    picked_pks = [row.pk for row in picked]
    touched = sessions.touch_many(
        conn, [among(conn, S.pk, picked_pks), S.last_accessed >= cut.expired], stamp
    )
    updated = {session.pk: session for session in touched}
    loaded = [
        LoadedSession(session_info(updated[row.pk]), MemoryTier(row.loaded_tier))
        for row in picked
        if row.pk in updated
    ]
    woken = tuple(
        updated[row.pk].session_id
        for row in picked
        if row.pk in updated and row.memory_tier != MemoryTier.ACTIVE.value
    )
    return loaded, woken
