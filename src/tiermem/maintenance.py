"""Keeping a :class:`~tiermem.ConversationMemory` in shape: access tiers
(``track_access``, ``load_context``, ``recalculate_tiers``, ``get_tier_stats``,
``least_recently_used``, ``prune_expired``), embeddings (``embed_missing``) and the
projects a database holds (``list_projects``). Each has its async twin.

These are methods of :class:`~tiermem.ConversationMemory`, defined here to keep
the facade short; the batch sizes and the progress callback type are public here,
and so is :func:`upgrade_schema` (``tiermem db upgrade``).
"""

from __future__ import annotations

from collections.abc import Callable

from ._core.runner import arun, run
from ._ops import embed, projects, tiers
from ._ops.projects import ProjectCounts
from ._ops.tiers import DEFAULT_LOAD_LIMIT, DEFAULT_PRUNE_BATCH, DEFAULT_RECALC_BATCH, Progress
from .forgetting import HasContext
from .tiers import MemoryTier
from .types import LoadedSession, SessionInfo, TierStats

__all__ = [
    "DEFAULT_LOAD_LIMIT",
    "DEFAULT_PRUNE_BATCH",
    "DEFAULT_RECALC_BATCH",
    "EmbedProgress",
    "ProjectCounts",
    "Progress",
    "aembed_missing",
    "aget_tier_stats",
    "aleast_recently_used",
    "alist_projects",
    "aload_context",
    "aprune_expired",
    "arecalculate_tiers",
    "atrack_access",
    "embed_missing",
    "get_tier_stats",
    "least_recently_used",
    "list_projects",
    "load_context",
    "prune_expired",
    "recalculate_tiers",
    "track_access",
    "upgrade_schema",
]

#: ``embed_missing``'s progress callback: called with the vectors stored so far.
EmbedProgress = Callable[[int], None]


def track_access(memory: HasContext, session_id: str) -> SessionInfo:
    """Record an access without reading: ``last_accessed`` becomes now,
    ``access_count`` grows and the tier becomes ACTIVE (``tier_changed`` if it
    was another). Returns the session as stored after the access;
    ``SessionNotFound`` for an unknown session (or one pruned meanwhile)."""
    return run(tiers.track(memory.context, session_id))


async def atrack_access(memory: HasContext, session_id: str) -> SessionInfo:
    """Async :meth:`track_access`."""
    return await arun(tiers.track(memory.context, session_id))


def load_context(memory: HasContext, limit: int = DEFAULT_LOAD_LIMIT) -> list[LoadedSession]:
    """The project's sessions, most relevant first (ACTIVE, RECENT, then ARCHIVED,
    each most recently accessed first; never EXPIRED), each load recorded as an
    access; returns them as stored after it, with the tier they were loaded from."""
    return run(tiers.load_context(memory.context, limit))


async def aload_context(memory: HasContext, limit: int = DEFAULT_LOAD_LIMIT) -> list[LoadedSession]:
    """Async :meth:`load_context`."""
    return await arun(tiers.load_context(memory.context, limit))


def recalculate_tiers(
    memory: HasContext,
    project: str | None = None,
    *,
    batch_size: int = DEFAULT_RECALC_BATCH,
    progress: Progress | None = None,
) -> int:
    """Store the tier every session and stored layer item of ``project`` (default:
    this memory's) has by its ``last_accessed``: set-based ``UPDATE`` statements
    over id ranges of ``batch_size`` sessions or items, one transaction each,
    ``tier_changed`` sent once per new tier after each session batch, and
    ``progress(done, total)`` called; future accesses are clamped to now first.
    Returns how many sessions and layer items changed tier."""
    return run(tiers.recalculate(memory.context, project, batch_size, progress))


async def arecalculate_tiers(
    memory: HasContext,
    project: str | None = None,
    *,
    batch_size: int = DEFAULT_RECALC_BATCH,
    progress: Progress | None = None,
) -> int:
    """Async :meth:`recalculate_tiers`."""
    return await arun(tiers.recalculate(memory.context, project, batch_size, progress))


def get_tier_stats(memory: HasContext, project: str | None = None) -> TierStats:
    """How many sessions, and stored layer items, of ``project`` (default: this
    memory's) are in each tier by their current ``last_accessed`` (no need to
    run :meth:`recalculate_tiers` first)."""
    return run(tiers.tier_stats(memory.context, project))


async def aget_tier_stats(memory: HasContext, project: str | None = None) -> TierStats:
    """Async :meth:`get_tier_stats`."""
    return await arun(tiers.tier_stats(memory.context, project))


def least_recently_used(
    memory: HasContext, tier: MemoryTier | str, limit: int = 10
) -> list[SessionInfo]:
    """The sessions of this project in ``tier`` (by their current
    ``last_accessed``), least recently accessed first. Not an access."""
    return run(tiers.lru(memory.context, tier, limit))


async def aleast_recently_used(
    memory: HasContext, tier: MemoryTier | str, limit: int = 10
) -> list[SessionInfo]:
    """Async :meth:`least_recently_used`."""
    return await arun(tiers.lru(memory.context, tier, limit))


def prune_expired(
    memory: HasContext,
    limit: int | None = None,
    dry_run: bool = False,
    *,
    batch_size: int = DEFAULT_PRUNE_BATCH,
    progress: Progress | None = None,
) -> int:
    """Delete this project's expired sessions (with their entries and summaries),
    then its expired layer items and documents, ``batch_size`` per transaction,
    oldest first (``pruned`` after each), then, without ``limit``, change-feed
    events older than ``event_retention``; idempotent. An access that commits first
    saves a session. ``limit`` caps the sessions and items (sessions first);
    ``dry_run`` only counts; ``progress(done, total)`` follows each batch. Returns
    the number of sessions and items deleted (or, with ``dry_run``, that would be).
    """
    return run(tiers.prune(memory.context, limit, dry_run, batch_size, progress))


async def aprune_expired(
    memory: HasContext,
    limit: int | None = None,
    dry_run: bool = False,
    *,
    batch_size: int = DEFAULT_PRUNE_BATCH,
    progress: Progress | None = None,
) -> int:
    """Async :meth:`prune_expired`."""
    return await arun(tiers.prune(memory.context, limit, dry_run, batch_size, progress))


def embed_missing(memory: HasContext, *, progress: EmbedProgress | None = None) -> int:
    """Embed every entry and layer item of the project without a vector of this
    memory's model (older ones, or all after a model change); returns how many.
    ``progress(stored)`` follows each batch. ``EmbeddingFailed`` if the model fails
    (earlier batches stay stored)."""
    return run(embed.embed_missing(memory.context, progress=progress))


async def aembed_missing(memory: HasContext, *, progress: EmbedProgress | None = None) -> int:
    """Async :meth:`embed_missing`."""
    return await arun(embed.embed_missing(memory.context, progress=progress))


def list_projects(memory: HasContext) -> list[ProjectCounts]:
    """Every project of the database with sessions, layer items, documents or
    events, by name, with their counts; not an access."""
    return run(projects.list_projects(memory.context))


async def alist_projects(memory: HasContext) -> list[ProjectCounts]:
    """Async :meth:`list_projects`."""
    return await arun(projects.list_projects(memory.context))


def upgrade_schema(url: str | None = None, revision: str = "head") -> None:
    """Migrate tiermem's tables at ``url`` (default: the embedded SQLite file, created
    when missing) to ``revision``; idempotent.

    Raises:
        InvalidArgument: for a bad URL or an unknown revision.
        StorageError: (a subclass) when the database fails; nothing was migrated.
    """
    from ._storage.migrations import upgrade  # Alembic: loaded only to migrate

    upgrade(url, revision)
