"""Access tiers and lifecycle maintenance of a :class:`~tiermem.ConversationMemory`.

Every session carries ``memory_tier``, ``last_accessed`` and ``access_count``.
Reads and writes record an access and make the stored tier ACTIVE; the methods
here record an access explicitly, refresh the stored tiers of a project, report
its tier distribution, list the least recently used sessions of a tier and
delete the expired ones.

Time comes from one place: the memory's clock (``clock=``), except on
PostgreSQL with no injected clock, where the server's ``now()`` stamps accesses
and sets every cutoff, so application hosts with skewed clocks agree. A
``last_accessed`` in the future counts as "now" (ACTIVE, never expired) and
:func:`recalculate` clamps it to now, so a wrong clock
never makes a session immortal.

The stored items of the project's memory layers (episodic, semantic,
procedural) follow the same tier, expiry and prune rules: recalculation and
pruning handle them after the sessions, and the statistics count them apart.

Maintenance is set-based SQL run in batches, each batch its own short
transaction, so writers never wait long behind a large run; the signals of a
batch are sent after it commits (``tier_changed`` once per tier with the
batch's session ids, ``pruned`` once with its session or item ids).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from .. import signals
from .._core.context import MemoryContext
from .._core.messages import validate_session_id
from .._core.runner import Op
from .._core.validate import MAX_SQL_INT, check_int, check_optional_int
from .._storage import documents as document_store
from .._storage import failpoints as _failpoints
from .._storage import items as layer_store
from .._storage import sessions
from .._storage.database import Connection
from .._storage.tiers import (
    Changed,
    clamp_future,
    count_expired,
    cutoffs,
    least_recently_used,
    load_sessions,
    prune_batch,
    recalculate_batch,
    tier_counts,
)
from ..errors import InvalidArgument
from ..events import Event, Pruned, TierChanged
from ..tiers import MemoryTier
from ..types import LoadedSession, SessionInfo, TierStats
from . import feed

__all__ = [
    "DEFAULT_LOAD_LIMIT",
    "DEFAULT_PRUNE_BATCH",
    "DEFAULT_RECALC_BATCH",
    "Progress",
    "load_context",
    "lru",
    "prune",
    "recalculate",
    "tier_stats",
    "track",
]

#: Sessions ``load_context`` returns when no limit is given.
DEFAULT_LOAD_LIMIT = 10
#: Sessions (a pk range) or layer items (an id range) whose tier one
#: ``recalculate_tiers`` transaction examines.
DEFAULT_RECALC_BATCH = 20_000
#: Sessions (with their entries and summaries) or layer items one ``prune_expired``
#: transaction deletes.
DEFAULT_PRUNE_BATCH = 2_000
#: A progress callback: ``(done, total)``, called after each committed batch.
Progress = Callable[[int, int], None]


def _check_progress(progress: object) -> None:
    if progress is not None and not callable(progress):
        raise InvalidArgument("progress must be a callable (done, total) or None")


def _tier_arg(tier: object) -> MemoryTier:
    if isinstance(tier, str) and tier in {t.value for t in MemoryTier}:
        return MemoryTier(tier)
    names = ", ".join(t.value for t in MemoryTier)
    raise InvalidArgument(f"tier must be a MemoryTier ({names}), got {tier!r}")


def _project_arg(ctx: MemoryContext, project: str | None) -> str:
    return ctx.project if project is None else validate_session_id(project, "project")


def track(ctx: MemoryContext, session_id: str) -> Op[SessionInfo]:
    """Record an access of a session without reading it."""
    validate_session_id(session_id)
    now = ctx.now()

    def work(conn: Connection) -> tuple[SessionInfo, list[Event]]:
        _, woken = sessions.touch(conn, sessions.get_session(conn, ctx.project, session_id), now)
        _failpoints.hit("touch.after_update")
        info = sessions.session_info(
            sessions.get_session(conn, ctx.project, session_id, lock=False)
        )
        return info, feed.woken(ctx, session_id, woken)

    return (yield from feed.transact_recorded(ctx, work))


def load_context(ctx: MemoryContext, limit: int) -> Op[list[LoadedSession]]:
    """Load the project's sessions that are not expired, by tier (ACTIVE, RECENT,
    ARCHIVED) then recency, recording an access of each.

    A tier is a range of ``last_accessed``, so that order is ``last_accessed``
    descending, served by the ``(project, last_accessed)`` index. EXPIRED sessions are
    never loaded: loading one would revive what ``prune_expired`` is about to delete.
    The accesses are one set-based ``UPDATE`` in the transaction that picked the
    sessions (re-checking expiry); ``tier_changed`` is sent once, after the commit.
    There is no query, so no relevance score: the tier order is what the tier boosts
    of :func:`~tiermem.tiers.tier_boost` amount to among equally relevant sessions.
    """
    if check_int("limit", limit) == 0:
        return []
    moment = ctx.moment()
    cut = cutoffs(moment, ctx.config.tier_policy)

    def work(conn: Connection) -> tuple[list[LoadedSession], list[Event]]:
        loaded, woken = load_sessions(
            conn,
            project=ctx.project,
            cut=cut,
            limit=min(limit, MAX_SQL_INT),
            server_time=ctx.database.server_time,
        )
        if not woken:
            return loaded, []
        return loaded, [TierChanged(woken, MemoryTier.ACTIVE.value, ctx.project)]

    return (yield from feed.transact_recorded(ctx, work))


def recalculate(
    ctx: MemoryContext, project: str | None, batch_size: int, progress: Progress | None
) -> Op[int]:
    """Store the tier every session and stored layer item of a project has now."""
    project = _project_arg(ctx, project)
    check_int("batch_size", batch_size, minimum=1)
    _check_progress(progress)
    cut = cutoffs(ctx.moment(), ctx.config.tier_policy)

    Bounds = tuple[int, int] | None

    def clamp(conn: Connection) -> tuple[Bounds, Bounds, Bounds]:
        # One transaction, sessions first: every write unit takes the session lock first.
        return (
            clamp_future(conn, project=project, cut=cut),
            layer_store.clamp_future_items(conn, project=project, cut=cut),
            document_store.clamp_future_documents(conn, project=project, cut=cut),
        )

    sessions, items, documents = yield from ctx.transact(clamp)
    total = sum(last - first + 1 for first, last in filter(None, (sessions, items, documents)))
    changed = done = 0
    # Session ids are read back only when the feed or a receiver needs them.
    returning = ctx.config.change_feed or signals.tier_changed.has_receivers_for(ctx.owner)
    for low, high in _ranges(sessions, batch_size):

        def batch(conn: Connection, low: int = low, high: int = high) -> tuple[int, list[Event]]:
            count, rows = recalculate_batch(
                conn, project=project, low=low, high=high, cut=cut, returning=returning
            )
            return count, _tier_signals(rows, project) if rows else []

        changed += yield from feed.transact_recorded(ctx, batch)
        done += high - low + 1
        if progress is not None:
            progress(done, total)
    for low, high in _ranges(items, batch_size):
        changed += yield from ctx.transact(
            partial(
                layer_store.recalculate_item_batch, project=project, cut=cut, low=low, high=high
            )
        )
        done += high - low + 1
        if progress is not None:
            progress(done, total)
    for low, high in _ranges(documents, batch_size):
        changed += yield from ctx.transact(
            partial(
                document_store.recalculate_document_batch,
                project=project,
                cut=cut,
                low=low,
                high=high,
            )
        )
        done += high - low + 1
        if progress is not None:
            progress(done, total)
    return changed


def tier_stats(ctx: MemoryContext, project: str | None) -> Op[TierStats]:
    """How many sessions and stored layer items of a project are in each tier."""
    project = _project_arg(ctx, project)
    cut = cutoffs(ctx.moment(), ctx.config.tier_policy)
    counts = yield from ctx.transact(
        lambda conn: (
            tier_counts(conn, project=project, cut=cut)
            + document_store.count_by_tier(conn, project=project, cut=cut)
        ),
        write=False,
    )
    return TierStats(*counts)


def lru(ctx: MemoryContext, tier: MemoryTier | str, limit: int) -> Op[list[SessionInfo]]:
    """The sessions of a tier, least recently accessed first; not an access."""
    wanted = _tier_arg(tier)
    if check_int("limit", limit) == 0:
        return []
    cut = cutoffs(ctx.moment(), ctx.config.tier_policy)
    return (
        yield from ctx.transact(
            lambda conn: least_recently_used(
                conn, project=ctx.project, tier=wanted, cut=cut, limit=min(limit, MAX_SQL_INT)
            ),
            write=False,
        )
    )


def prune(
    ctx: MemoryContext,
    limit: int | None,
    dry_run: bool,
    batch_size: int,
    progress: Progress | None,
) -> Op[int]:
    """Delete the project's expired sessions, then its expired layer items and
    documents, then the change-feed events past their retention."""
    check_optional_int("limit", limit)
    if not isinstance(dry_run, bool):
        raise InvalidArgument(f"dry_run must be a bool, got {dry_run!r}")
    check_int("batch_size", batch_size, minimum=1)
    _check_progress(progress)
    if limit == 0:
        return 0
    project = ctx.project
    cut = cutoffs(ctx.moment(), ctx.config.tier_policy)
    cutoff = cut.expired
    planned = 0
    if dry_run or progress is not None:

        def count(conn: Connection) -> int:
            return (
                count_expired(conn, project=project, cutoff=cutoff)
                + layer_store.count_expired_items(conn, project=project, cut=cut)
                + document_store.count_expired_documents(conn, project=project, now=cut.now)
            )

        expired = yield from ctx.transact(count, write=False)
        planned = expired if limit is None else min(expired, limit)
        if dry_run:
            return planned
    removed = 0
    per_batch = min(batch_size, MAX_SQL_INT)
    while limit is None or removed < limit:
        want = per_batch if limit is None else min(per_batch, limit - removed)

        def sessions(
            conn: Connection, want: int = want
        ) -> tuple[tuple[str, ...] | None, list[Event]]:
            batch = prune_batch(conn, project=project, cutoff=cutoff, want=want)
            return batch, [Pruned(batch, (), project)] if batch else []

        batch = yield from feed.transact_recorded(ctx, sessions)
        if batch is None:
            break
        removed += len(batch)
        if progress is not None:
            progress(removed, max(planned, removed))
    while limit is None or removed < limit:
        want = per_batch if limit is None else min(per_batch, limit - removed)

        def layer_items(conn: Connection, want: int = want) -> tuple[tuple[int, ...], list[Event]]:
            items = layer_store.prune_item_batch(conn, project=project, cut=cut, want=want)
            return items, [Pruned((), items, project)] if items else []

        items = yield from feed.transact_recorded(ctx, layer_items)
        if not items:
            break
        removed += len(items)
        if progress is not None:
            progress(removed, max(planned, removed))
    while limit is None or removed < limit:
        want = per_batch if limit is None else min(per_batch, limit - removed)
        gone = yield from ctx.transact(
            partial(document_store.prune_document_batch, project=project, now=cut.now, want=want)
        )
        if not gone:
            break
        removed += len(gone)
        if progress is not None:
            progress(removed, max(planned, removed))
    if limit is None:
        # Retention of the change feed, after a whole prune only: a limited prune is a
        # bounded step of work, and counts sessions and items, not events.
        yield from feed.prune_events(ctx, None)
    return removed


def _ranges(bounds: tuple[int, int] | None, size: int) -> list[tuple[int, int]]:
    """``first..last`` of ``bounds`` cut into consecutive ranges of ``size`` ids."""
    if bounds is None:
        return []
    first, last = bounds
    return [(low, min(low + size - 1, last)) for low in range(first, last + 1, size)]


def _tier_signals(rows: Changed, project: str) -> list[Event]:
    """One ``tier_changed`` per new tier of a batch, with that tier's session ids."""
    by_tier: dict[str, list[str]] = {}
    for row in rows:
        by_tier.setdefault(row.memory_tier, []).append(row.session_id)
    return [
        TierChanged(tuple(by_tier[tier.value]), tier.value, project)
        for tier in MemoryTier
        if tier.value in by_tier
    ]
