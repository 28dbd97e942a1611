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
:meth:`~LifecycleMixin.recalculate_tiers` clamps it to now, so a wrong clock
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
from dataclasses import dataclass
from functools import partial
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import _failpoints, document_store, layer_store, signals, store
from ._messages import validate_session_id
from ._ops import Emit, Op, OpRunner
from ._tier_sql import (
    Changed,
    clamp_future,
    count_expired,
    cutoffs,
    prune_batch,
    recalculate_batch,
    session_info,
    tier_predicates,
)
from .errors import InvalidArgument
from .layer_tables import item_table
from .models import SessionInfo
from .tables import session_table
from .tiers import MemoryTier

__all__ = ["DEFAULT_PRUNE_BATCH", "DEFAULT_RECALC_BATCH", "LifecycleMixin", "Progress", "TierStats"]

S = session_table.c

#: Sessions (a pk range) or layer items (an id range) whose tier one
#: ``recalculate_tiers`` transaction examines.
DEFAULT_RECALC_BATCH = 20_000
#: Sessions (with their entries and summaries) or layer items one ``prune_expired``
#: transaction deletes.
DEFAULT_PRUNE_BATCH = 2_000
#: A progress callback: ``(done, total)``, called after each committed batch.
Progress = Callable[[int, int], None]
# Larger limits are clamped: SQLite's LIMIT is a signed 64-bit integer.
_MAX_LIMIT = 2**62


@dataclass(frozen=True, slots=True)
class TierStats:
    """How many sessions, and how many stored layer items, of a project are in each
    tier, by their current ``last_accessed``.

    Attributes:
        total: every session of the project.
        active: accessed within ``active_within`` (default 1 h), or in the future.
        recent: older than that, within ``recent_within`` (24 h).
        archived: older than that, but not more than ``expired_after`` (30 d).
        expired: last accessed strictly longer ago than ``expired_after`` (30 d).
        items / active_items / recent_items / archived_items / expired_items: the
            same for the project's episodic, semantic and procedural items (every
            scope; working memory is not stored). Expired items are counted until
            ``prune_expired`` deletes them, though no read returns them.
        documents / active_documents / recent_documents / archived_documents /
            expired_documents: the same for the project's stored JSON documents
            (``tiermem-langgraph``); a document is expired only once its time to
            live has passed, never by age.
    """

    total: int
    active: int
    recent: int
    archived: int
    expired: int
    items: int = 0
    active_items: int = 0
    recent_items: int = 0
    archived_items: int = 0
    expired_items: int = 0
    documents: int = 0
    active_documents: int = 0
    recent_documents: int = 0
    archived_documents: int = 0
    expired_documents: int = 0


def _check_count(name: str, value: object, *, minimum: int = 0, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgument(f"{name} must be an int >= {minimum}, got {value!r}")


def _check_progress(progress: object) -> None:
    if progress is not None and not callable(progress):
        raise InvalidArgument("progress must be a callable (done, total) or None")


def _tier_arg(tier: object) -> MemoryTier:
    if isinstance(tier, str) and tier in {t.value for t in MemoryTier}:
        return MemoryTier(tier)
    names = ", ".join(t.value for t in MemoryTier)
    raise InvalidArgument(f"tier must be a MemoryTier ({names}), got {tier!r}")


# --------------------------------------------------------------------------- mixin


class LifecycleMixin(OpRunner):
    """The access-tier half of ``ConversationMemory``: tracking, tiers, statistics, pruning."""

    def _moment(self) -> Any:
        """Now as the database should see it: the server's ``now()`` or the memory's clock."""
        if self._db.server_time:
            return sa.func.now()
        return self.now()

    def _project_arg(self, project: str | None) -> str:
        return self.project if project is None else validate_session_id(project, "project")

    # ------------------------------------------------------------------ access

    def _op_track(self, session_id: str) -> Op[SessionInfo]:
        validate_session_id(session_id)
        now = self.now()

        def work(conn: Connection) -> tuple[str | None, SessionInfo]:
            session = dict(self._session(conn, session_id))
            woken = store.touch(conn, session, now)
            _failpoints.hit("touch.after_update")
            return woken, session_info(self._session(conn, session_id, lock=False))

        woken, info = self._db.run(work)
        yield from self._woken(session_id, woken)
        return info

    def track_access(self, session_id: str) -> SessionInfo:
        """Record an access of a session without reading it: ``last_accessed``
        becomes now, ``access_count`` grows by one and the tier becomes ACTIVE
        (signalling ``tier_changed`` if it was another tier).

        Returns:
            The session as stored after the access.

        Raises:
            InvalidSessionId: for a malformed id.
            SessionNotFound: for an unknown session (or one pruned meanwhile).
        """
        return self._run(self._op_track(session_id))

    async def atrack_access(self, session_id: str) -> SessionInfo:
        """Async :meth:`track_access`."""
        return await self._arun(self._op_track(session_id))

    # ------------------------------------------------------------------ tiers

    def _op_recalculate(
        self, project: str | None, batch_size: int, progress: Progress | None
    ) -> Op[int]:
        project = self._project_arg(project)
        _check_count("batch_size", batch_size, minimum=1)
        _check_progress(progress)
        cut = cutoffs(self._moment(), self.config.tier_policy)

        def clamp(conn: Connection) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
            return (
                clamp_future(conn, project=project, cut=cut),
                layer_store.clamp_future_items(conn, project=project, cut=cut),
            )

        sessions, items = self._db.run(clamp)
        documents = self._db.run(
            partial(document_store.clamp_future_documents, project=project, cut=cut)
        )
        total = sum(last - first + 1 for first, last in filter(None, (sessions, items, documents)))
        changed = done = 0
        for low, high in _ranges(sessions, batch_size):
            # Session ids are read back only when someone listens for them.
            returning = signals.tier_changed.has_receivers_for(self)
            count, rows = self._db.run(
                partial(
                    recalculate_batch,
                    project=project,
                    low=low,
                    high=high,
                    cut=cut,
                    returning=returning,
                )
            )
            changed += count
            if rows:
                yield Emit(_tier_signals(rows, project))
            done += high - low + 1
            if progress is not None:
                progress(done, total)
        for low, high in _ranges(items, batch_size):
            changed += self._db.run(
                partial(
                    layer_store.recalculate_item_batch, project=project, cut=cut, low=low, high=high
                )
            )
            done += high - low + 1
            if progress is not None:
                progress(done, total)
        for low, high in _ranges(documents, batch_size):
            changed += self._db.run(
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

    def recalculate_tiers(
        self,
        project: str | None = None,
        *,
        batch_size: int = DEFAULT_RECALC_BATCH,
        progress: Progress | None = None,
    ) -> int:
        """Store the tier every session and every stored layer item of a project has
        by its ``last_accessed``.

        Runs set-based ``UPDATE`` statements over pk ranges of ``batch_size``
        sessions, then over id ranges of ``batch_size`` layer items, one
        transaction each; only stale rows are written. After each session batch
        commits, ``tier_changed`` is sent once per new tier with the ids of that
        batch (layer items send no signal). Accesses stamped in the future are
        clamped to now first.

        Args:
            project: the project to refresh (default: this memory's).
            batch_size: sessions (a pk range) or items (an id range) per transaction.
            progress: called as ``progress(done, total)`` after each batch, counting
                the session pks and item ids of the ranges examined.

        Returns:
            The number of sessions and layer items whose stored tier changed.

        Raises:
            InvalidArgument: for a bad argument (before any SQL runs).
        """
        return self._run(self._op_recalculate(project, batch_size, progress))

    async def arecalculate_tiers(
        self,
        project: str | None = None,
        *,
        batch_size: int = DEFAULT_RECALC_BATCH,
        progress: Progress | None = None,
    ) -> int:
        """Async :meth:`recalculate_tiers`."""
        return await self._arun(self._op_recalculate(project, batch_size, progress))

    def _op_tier_stats(self, project: str | None) -> Op[TierStats]:
        project = self._project_arg(project)
        cut = cutoffs(self._moment(), self.config.tier_policy)
        queries = [
            sa.select(sa.func.count(), *(sa.func.count().filter(p) for p in predicates.values()))
            .select_from(table)
            .where(where)
            for table, where, predicates in (
                (session_table, S.project == project, tier_predicates(cut)),
                (
                    item_table,
                    layer_store.in_project(project),
                    tier_predicates(cut, item_table.c.last_accessed),
                ),
            )
        ]
        queries.append(document_store.tier_counts(project, cut))
        rows = self._db.run(
            lambda conn: [value for query in queries for value in conn.execute(query).one()],
            write=False,
        )
        return TierStats(*(int(value) for value in rows))
        yield  # pragma: no cover - makes this a generator

    def get_tier_stats(self, project: str | None = None) -> TierStats:
        """How many sessions, and how many stored layer items, of a project are in
        each tier, by their current ``last_accessed`` (no need to run
        :meth:`recalculate_tiers` first).

        Args:
            project: the project to count (default: this memory's).
        """
        return self._run(self._op_tier_stats(project))

    async def aget_tier_stats(self, project: str | None = None) -> TierStats:
        """Async :meth:`get_tier_stats`."""
        return await self._arun(self._op_tier_stats(project))

    def _op_lru(self, tier: MemoryTier | str, limit: int) -> Op[list[SessionInfo]]:
        wanted = _tier_arg(tier)
        _check_count("limit", limit)
        if limit == 0:
            return []
        predicate = tier_predicates(cutoffs(self._moment(), self.config.tier_policy))[wanted]
        query = (
            sa.select(session_table)
            .where(S.project == self.project, predicate)
            .order_by(S.last_accessed, S.pk)
            .limit(min(limit, _MAX_LIMIT))
        )
        rows = self._db.run(lambda conn: list(conn.execute(query).mappings()), write=False)
        return [session_info(row) for row in rows]
        yield  # pragma: no cover

    def least_recently_used(self, tier: MemoryTier | str, limit: int = 10) -> list[SessionInfo]:
        """The sessions of this project in ``tier`` (by their current
        ``last_accessed``), least recently accessed first. Not an access.

        Raises:
            InvalidArgument: for an unknown tier or a limit that is not an int >= 0.
        """
        return self._run(self._op_lru(tier, limit))

    async def aleast_recently_used(
        self, tier: MemoryTier | str, limit: int = 10
    ) -> list[SessionInfo]:
        """Async :meth:`least_recently_used`."""
        return await self._arun(self._op_lru(tier, limit))

    # ------------------------------------------------------------------ pruning

    def _op_prune(
        self, limit: int | None, dry_run: bool, batch_size: int, progress: Progress | None
    ) -> Op[int]:
        _check_count("limit", limit, allow_none=True)
        if not isinstance(dry_run, bool):
            raise InvalidArgument(f"dry_run must be a bool, got {dry_run!r}")
        _check_count("batch_size", batch_size, minimum=1)
        _check_progress(progress)
        if limit == 0:
            return 0
        project = self.project
        cut = cutoffs(self._moment(), self.config.tier_policy)
        cutoff = cut.expired
        planned = 0
        if dry_run or progress is not None:

            def count(conn: Connection) -> int:
                return (
                    count_expired(conn, project=project, cutoff=cutoff)
                    + layer_store.count_expired_items(conn, project=project, cutoff=cutoff)
                    + document_store.count_expired_documents(conn, project=project, now=cut.now)
                )

            expired = self._db.run(count, write=False)
            planned = expired if limit is None else min(expired, limit)
            if dry_run:
                return planned
        removed = 0
        per_batch = min(batch_size, _MAX_LIMIT)
        while limit is None or removed < limit:
            want = per_batch if limit is None else min(per_batch, limit - removed)
            batch = self._db.run(partial(prune_batch, project=project, cutoff=cutoff, want=want))
            if batch is None:
                break
            removed += len(batch)
            if batch:
                yield Emit([("pruned", _pruned(project, sessions=batch))])
            if progress is not None:
                progress(removed, max(planned, removed))
        while limit is None or removed < limit:
            want = per_batch if limit is None else min(per_batch, limit - removed)
            items = self._db.run(
                partial(layer_store.prune_item_batch, project=project, cutoff=cutoff, want=want)
            )
            if not items:
                break
            removed += len(items)
            yield Emit([("pruned", _pruned(project, items=items))])
            if progress is not None:
                progress(removed, max(planned, removed))
        while limit is None or removed < limit:
            want = per_batch if limit is None else min(per_batch, limit - removed)
            gone = self._db.run(
                partial(
                    document_store.prune_document_batch, project=project, now=cut.now, want=want
                )
            )
            if not gone:
                break
            removed += len(gone)
            if progress is not None:
                progress(removed, max(planned, removed))
        return removed

    def prune_expired(
        self,
        limit: int | None = None,
        dry_run: bool = False,
        *,
        batch_size: int = DEFAULT_PRUNE_BATCH,
        progress: Progress | None = None,
    ) -> int:
        """Delete this project's expired sessions with their entries and summaries,
        then its expired layer items (episodic, semantic and procedural, of every
        scope) with their full-text index rows, then its stored JSON documents whose
        time to live has passed (``tiermem-langgraph``; no signal).

        A session or item is expired when its *current* ``last_accessed``
        (re-checked by the ``DELETE`` itself) is strictly older than
        ``expired_after``: an access that commits first saves it, and one that
        comes later finds it gone. Oldest first, ``batch_size`` sessions or items
        per transaction, ``pruned`` sent after each batch (``session_ids`` of a
        session batch, ``item_ids`` of an item batch, the other one empty).
        Running it again deletes nothing new (idempotent).

        Args:
            limit: delete at most this many sessions and items together, sessions
                first (``None``: all; ``0``: none).
            dry_run: only count what would be deleted.
            batch_size: sessions or items per transaction.
            progress: called as ``progress(done, total)`` after each batch.

        Returns:
            The number of sessions and layer items deleted (or, with ``dry_run``,
            that would be).

        Raises:
            InvalidArgument: for a limit that is not an int >= 0 (or a bool), or
                another bad argument; raised before any SQL runs.
        """
        return self._run(self._op_prune(limit, dry_run, batch_size, progress))

    async def aprune_expired(
        self,
        limit: int | None = None,
        dry_run: bool = False,
        *,
        batch_size: int = DEFAULT_PRUNE_BATCH,
        progress: Progress | None = None,
    ) -> int:
        """Async :meth:`prune_expired`."""
        return await self._arun(self._op_prune(limit, dry_run, batch_size, progress))


def _ranges(bounds: tuple[int, int] | None, size: int) -> list[tuple[int, int]]:
    """``first..last`` of ``bounds`` cut into consecutive ranges of ``size`` ids."""
    if bounds is None:
        return []
    first, last = bounds
    return [(low, min(low + size - 1, last)) for low in range(first, last + 1, size)]


def _pruned(
    project: str, *, sessions: tuple[str, ...] = (), items: tuple[int, ...] = ()
) -> dict[str, Any]:
    """The keyword arguments of a ``pruned`` signal: one batch's session or item ids."""
    return {"session_ids": sessions, "item_ids": items, "project": project}


def _tier_signals(rows: Changed, project: str) -> list[signals.Pending]:
    """One ``tier_changed`` per new tier of a batch, with that tier's session ids."""
    by_tier: dict[str, list[str]] = {}
    for row in rows:
        by_tier.setdefault(row.memory_tier, []).append(row.session_id)
    return [
        (
            "tier_changed",
            {"session_ids": tuple(by_tier[tier.value]), "tier": tier.value, "project": project},
        )
        for tier in MemoryTier
        if tier.value in by_tier
    ]
