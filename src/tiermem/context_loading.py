"""``load_context``: a project's sessions, most relevant first, each load an access.

The order is by tier, then recency: ACTIVE sessions first, then RECENT, then
ARCHIVED, each tier most recently accessed first. A session's tier is a range
of its ``last_accessed`` (:func:`~tiermem.tiers.calculate_tier`), so that order
is ``last_accessed`` descending, which the ``(project, last_accessed)`` index
serves without a sort. EXPIRED sessions are never loaded: they are what
``prune_expired`` deletes, and loading one would revive it (an expired layer
fact is not revived by ``recall`` either).

Loading records an access of each session loaded, as ``track_access`` does
("frequently accessed, higher tier, easier to access"): ``last_accessed``
becomes now, ``access_count`` grows by one, the stored tier becomes ACTIVE, and
``tier_changed`` is sent once, after the commit, with the ids of the sessions
whose stored tier was another one. Two statements in one write transaction,
both set-based: a ``SELECT ... LIMIT`` picks the sessions and one ``UPDATE``
over their pks records the accesses (re-checking expiry, so a session pruned
or expired in between is skipped, never revived).

There is no relevance score here (no query): the tier boosts of
:func:`~tiermem.tiers.tier_boost` (+0.3 ACTIVE, +0.1 RECENT, -0.2 EXPIRED) rank
the searches (:mod:`tiermem.search`), and the tier order above is what they
amount to when every candidate is equally relevant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ._ops import Emit, Op
from ._tier_sql import Cutoffs, _among, cutoffs, session_info, tier_case
from .errors import InvalidArgument
from .models import SessionInfo
from .tables import session_table
from .tiers import MemoryTier

if TYPE_CHECKING:
    from .lifecycle import LifecycleMixin

__all__ = ["DEFAULT_LOAD_LIMIT", "LoadedSession", "load_sessions", "op_load_context"]

S = session_table.c

#: Sessions ``load_context`` returns when no limit is given.
DEFAULT_LOAD_LIMIT = 10
# SQLite's LIMIT is a signed 64-bit integer.
_MAX_LIMIT = 2**62


@dataclass(frozen=True, slots=True)
class LoadedSession:
    """A session ``load_context`` loaded.

    Attributes:
        session: the session as stored after this load (tier ACTIVE, the access
            counted).
        tier: the tier it was loaded from: the one its ``last_accessed`` gave
            before this load (ACTIVE, RECENT or ARCHIVED; never EXPIRED).
    """

    session: SessionInfo
    tier: MemoryTier


def load_sessions(
    conn: Connection, *, project: str, cut: Cutoffs, limit: int, stamp: Any
) -> tuple[list[LoadedSession], tuple[str, ...]]:
    """Pick up to ``limit`` sessions of ``project`` that are not expired, by tier then
    recency, and record an access of each (``stamp``: the time written).

    Returns:
        The sessions loaded, in order, and the ids of those whose stored tier was
        not ACTIVE before (they are ACTIVE now).
    """
    picked = conn.execute(
        sa.select(S.pk, S.memory_tier, tier_case(cut).label("loaded_tier"))
        .where(S.project == project, S.last_accessed >= cut.expired)
        .order_by(S.last_accessed.desc(), S.pk.desc())
        .limit(limit)
    ).all()
    if not picked:
        return [], ()
    rows = (
        conn.execute(
            sa.update(session_table)
            .where(_among(conn, S.pk, [row.pk for row in picked]), S.last_accessed >= cut.expired)
            .values(
                last_accessed=stamp,
                access_count=S.access_count + 1,
                memory_tier=MemoryTier.ACTIVE.value,
            )
            .returning(session_table)
        )
        .mappings()
        .all()
    )
    updated = {row["pk"]: row for row in rows}
    loaded = [
        LoadedSession(session_info(updated[row.pk]), MemoryTier(row.loaded_tier))
        for row in picked
        if row.pk in updated
    ]
    woken = tuple(
        updated[row.pk]["session_id"]
        for row in picked
        if row.pk in updated and row.memory_tier != MemoryTier.ACTIVE.value
    )
    return loaded, woken


def op_load_context(memory: LifecycleMixin, limit: int) -> Op[list[LoadedSession]]:
    """The operation of ``ConversationMemory.load_context`` and its async twin."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidArgument(f"limit must be an int >= 0, got {limit!r}")
    if limit == 0:
        return []
    moment = memory._moment()
    cut = cutoffs(moment, memory.config.tier_policy)
    # On the server's clock an access is never stamped before the session's creation,
    # as store.touch stamps it.
    stamp = sa.func.greatest(moment, S.created_at) if memory._db.server_time else moment
    loaded, woken = memory._db.run(
        lambda conn: load_sessions(
            conn, project=memory.project, cut=cut, limit=min(limit, _MAX_LIMIT), stamp=stamp
        )
    )
    if woken:
        payload = {"session_ids": woken, "tier": MemoryTier.ACTIVE.value, "project": memory.project}
        yield Emit([("tier_changed", payload)])
    return loaded
