"""SQL of the memory layers, on a connection inside ``Database.run``'s transaction.

Statements are set-based and go through the ``(scope_pk, layer, id)`` index,
so their cost follows one scope's layer, never the whole table.

Items obey the access-tier rules of sessions: an item of a layer that expires
(``TierPolicy.expiring_layers``, the episodic layer by default) last accessed strictly
longer than ``expired_after`` ago is expired, and reads (search, recent, recall,
compaction) never return it nor count it as accessed; it stays stored until
``prune_expired`` deletes it. Items of the other layers (learned facts and rules by
default) are never expired by age: ARCHIVED at most. ``recalculate_tiers`` / ``prune_expired``
run :func:`clamp_future_items`, :func:`recalculate_item_batch` and
:func:`prune_item_batch` in batches after the sessions;
:func:`recalculate_item_tiers` and :func:`prune_expired_items` do the same in
the caller's one transaction.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from .._core.clock import as_utc
from .._core.messages import store_text
from ..errors import CompressionConflict
from ..tiers import MemoryTier, TierPolicy
from . import fts
from .item_vectors import forget_item_vectors
from .layer_schema import ITEM_INDEX, in_project, item_partition, item_table, scope_table
from .ranking import Candidate, rank
from .rows import ItemRecord
from .schema import dialect_insert
from .search import pg_candidates
from .tiers import Cutoffs, cutoffs, delete_locked, item_ages, tier_case

__all__ = [
    "NewItem",
    "clamp_future_items",
    "clear_items",
    "count_expired_items",
    "drop_older",
    "ensure_scope_pk",
    "get_scope_pk",
    "in_project",
    "insert_item",
    "item_candidates",
    "layer_totals",
    "live_since",
    "older_items",
    "prune_expired_items",
    "prune_item_batch",
    "read_items",
    "recalculate_item_batch",
    "recalculate_item_tiers",
    "recall_fact",
    "recent_items",
    "replace_with_summary",
    "search_items",
    "touch_items",
    "touch_ranked",
    "upsert_fact",
]

IC, SC = item_table.c, scope_table.c


def live_since(now: datetime, policy: TierPolicy, layer: str) -> datetime:
    """The oldest ``last_accessed`` of an item of ``layer`` that is not expired at ``now``
    (a century ago for a layer that does not expire)."""
    return as_utc(now) - policy.for_layer(layer).expired_after


@dataclass(frozen=True, slots=True)
class NewItem:
    """An item validated and counted, ready to insert (built outside the transaction)."""

    layer: str
    key: str | None
    content: str
    meta: str
    token_count: int
    byte_size: int


def get_scope_pk(conn: Connection, project: str, scope: str) -> int | None:
    """The scope's pk, or ``None`` before anything was stored in it."""
    query = sa.select(SC.pk).where(SC.project == project, SC.scope == scope)
    pk = conn.execute(query).scalar()
    return None if pk is None else int(pk)


def ensure_scope_pk(conn: Connection, project: str, scope: str, now: datetime) -> int:
    """The scope's pk, its row made first if missing (two creators end with one row)."""
    pk = get_scope_pk(conn, project, scope)
    if pk is None:
        conn.execute(
            dialect_insert(conn, scope_table)
            .values(project=project, scope=scope, created_at=as_utc(now))
            .on_conflict_do_nothing()
        )
        pk = conn.execute(
            sa.select(SC.pk).where(SC.project == project, SC.scope == scope)
        ).scalar_one()
    return int(pk)


def _values(pk: int, item: NewItem, now: datetime) -> dict[str, object]:
    now = as_utc(now)
    return {
        "scope_pk": pk,
        "layer": item.layer,
        "item_key": None if item.key is None else store_text(item.key),
        "content": store_text(item.content),
        "meta": item.meta,
        "token_count": item.token_count,
        "byte_size": item.byte_size,
        "created_at": now,
        "updated_at": now,
        "last_accessed": now,
        "access_count": 0,
        "memory_tier": MemoryTier.ACTIVE.value,
    }


_INSERT = sa.insert(item_table).returning(*item_table.c)


@functools.cache
def _upsert(dialect: str) -> Any:
    module = postgresql if dialect == "postgresql" else sqlite
    statement = module.insert(item_table)
    fresh = statement.excluded
    # An expired fact is gone for every reader: storing its key again starts a new one.
    expired = IC.last_accessed < sa.bindparam("since", type_=sa.DateTime(timezone=True))
    return statement.on_conflict_do_update(
        index_elements=[IC.scope_pk, IC.layer, IC.item_key],
        # Literal SQL: a bound parameter here would stop PostgreSQL from matching the
        # partial unique index once the statement is prepared.
        index_where=sa.text("layer = 'semantic'"),
        set_={
            "content": fresh.content,
            "meta": fresh.meta,
            "token_count": fresh.token_count,
            "byte_size": fresh.byte_size,
            "updated_at": fresh.updated_at,
            "last_accessed": fresh.last_accessed,
            "created_at": sa.case((expired, fresh.created_at), else_=IC.created_at),
            "access_count": sa.case((expired, 0), else_=IC.access_count + 1),
            "memory_tier": MemoryTier.ACTIVE.value,
        },
    ).returning(*item_table.c)


def insert_item(conn: Connection, pk: int, item: NewItem, now: datetime) -> ItemRecord:
    """Insert one item; returns its row."""
    return ItemRecord.from_row(conn.execute(_INSERT, _values(pk, item, now)).mappings().one())


def upsert_fact(
    conn: Connection, pk: int, item: NewItem, now: datetime, policy: TierPolicy
) -> ItemRecord:
    """Insert a semantic item, or replace the value stored under its key (an access; a
    fact that had expired is replaced by a new one, created now, never accessed). A
    new value deletes the vector of the old one."""
    params = {**_values(pk, item, now), "since": live_since(now, policy, item.layer)}
    # Locked on PostgreSQL: nothing changes the value between this read and the
    # upsert, so an unchanged value keeps its vector rightly.
    key = {"scope_pk": pk, "item_key": params["item_key"]}
    old = conn.execute(_old_value(conn.dialect.name), key).scalar()
    row = ItemRecord.from_row(conn.execute(_upsert(conn.dialect.name), params).mappings().one())
    if old != row.content:  # a new fact (None) or a new value
        forget_item_vectors(conn, [row.id])
    return row


@functools.cache
def _old_value(dialect: str) -> sa.Select[Any]:
    query = sa.select(IC.content).where(
        IC.scope_pk == sa.bindparam("scope_pk"),
        IC.layer == "semantic",
        IC.item_key == sa.bindparam("item_key"),
    )
    return query.with_for_update() if dialect == "postgresql" else query


_ACCESS = (
    sa.update(item_table)
    .values(
        last_accessed=sa.bindparam("now"),
        access_count=IC.access_count + 1,
        memory_tier=MemoryTier.ACTIVE.value,
    )
    .returning(*item_table.c)
)
_LOCKED = item_table.alias("locked")
#: The rows are locked in id order first (on PostgreSQL; SQLite has one writer at a
#: time): an ``UPDATE`` locks rows in the order it meets them on disk, which moves as
#: they are updated, and two searches touching the same items in different orders
#: could each hold a row the other waits for.
_TOUCH_IDS = _ACCESS.where(
    IC.id.in_(
        sa.select(_LOCKED.c.id)
        .where(_LOCKED.c.id.in_(sa.bindparam("ids", expanding=True)))
        .order_by(_LOCKED.c.id)
        .with_for_update()
    )
)
_TOUCH_KEY = _ACCESS.where(
    IC.scope_pk == sa.bindparam("pk"),
    IC.layer == "semantic",
    IC.item_key == sa.bindparam("key"),
    IC.last_accessed >= sa.bindparam("since"),
)


def touch_items(conn: Connection, ids: Sequence[int], now: datetime) -> list[ItemRecord]:
    """Record an access of the items ``ids``; returns their updated rows."""
    rows = conn.execute(_TOUCH_IDS, {"ids": list(ids), "now": as_utc(now)}).mappings()
    return [ItemRecord.from_row(row) for row in rows]


def recall_fact(
    conn: Connection, pk: int, key: str, now: datetime, policy: TierPolicy
) -> ItemRecord | None:
    """The semantic item stored under ``key`` (an access), or ``None`` (also when it
    is expired: an expired item is never read, nor saved by the attempt)."""
    params = {
        "pk": pk,
        "key": store_text(key),
        "now": as_utc(now),
        "since": live_since(now, policy, "semantic"),
    }
    row = conn.execute(_TOUCH_KEY, params).mappings().first()
    return None if row is None else ItemRecord.from_row(row)


def recent_items(
    conn: Connection, pk: int, layer: str, n: int, now: datetime, policy: TierPolicy
) -> list[ItemRecord]:
    """The ``n`` newest items of a layer that are not expired, oldest first."""
    query = (
        sa.select(item_table)
        .where(
            IC.scope_pk == pk,
            IC.layer == layer,
            IC.last_accessed >= live_since(now, policy, layer),
        )
        .order_by(IC.id.desc())
        .limit(n)
    )
    return [ItemRecord.from_row(row) for row in reversed(conn.execute(query).mappings().all())]


def read_items(conn: Connection, ids: Sequence[int]) -> list[ItemRecord]:
    """Items by id, in id order."""
    query = sa.select(item_table).where(IC.id.in_(list(ids))).order_by(IC.id)
    return [ItemRecord.from_row(row) for row in conn.execute(query).mappings()]


_SIZE = sa.select(sa.func.count(), sa.func.coalesce(sa.func.avg(IC.byte_size), 0)).where(
    IC.scope_pk == sa.bindparam("pk"), IC.layer == sa.bindparam("layer")
)


def item_candidates(
    conn: Connection, pk: int, layer: str, words: Sequence[str], since: datetime
) -> list[Candidate]:
    """The matching items that are not expired, with their BM25."""
    params = {"pk": pk, "layer": layer, "since": since}
    if conn.dialect.name == "postgresql":
        # The layer's statistics count every stored item: filtering them by expiry
        # would double their cost.
        total, average = conn.execute(_SIZE, params).one()
        return pg_candidates(
            conn,
            words,
            params,
            int(total),
            float(average),
            id="i.id",
            created="i.created_at",
            accessed="i.last_accessed",
            length="i.byte_size",
            fts="i.fts",
            source="tiermem_layer_item i",
            where="i.scope_pk = :pk AND i.layer = :layer AND i.last_accessed >= :since",
        )
    low, high = fts.partition_range(item_partition(pk, layer))
    statement = _SQLITE_CANDIDATES
    rows = conn.execute(statement, {**params, "q": fts.fts5_any(words), "low": low, "high": high})
    return [Candidate(row[0], row[1], row[2], row[3]) for row in rows]


_NAME = ITEM_INDEX.name
#: SQLite: each matching item of a scope's layer with its BM25, read from the FTS5
#: partition and the covering index. The cutoff is typed: it is bound in the one text
#: format SQLite stores times in.
_SQLITE_CANDIDATES = sa.text(
    f"WITH m AS MATERIALIZED (SELECT rowid, -bm25({_NAME}) AS score FROM {_NAME} "
    f"WHERE {_NAME} MATCH :q AND rowid BETWEEN :low AND :high) "
    "SELECT i.id, (julianday(i.created_at) - 2440587.5) * 86400.0, "
    "(julianday(i.last_accessed) - 2440587.5) * 86400.0, m.score "
    "FROM m JOIN tiermem_layer_item AS i INDEXED BY ix_tiermem_layer_item_scope "
    f"ON i.scope_pk = :pk AND i.layer = :layer AND i.id = (m.rowid & {(1 << 32) - 1}) "
    "AND i.last_accessed >= :since"
).bindparams(sa.bindparam("since", type_=sa.DateTime(timezone=True)))


def search_items(
    conn: Connection,
    pk: int,
    layer: str,
    words: Sequence[str],
    limit: int,
    now: datetime,
    policy: TierPolicy,
) -> list[tuple[ItemRecord, float]]:
    """The best ``limit`` items of a layer containing any of ``words`` with their
    scores, best first (:func:`tiermem._storage.ranking.rank`); each hit's access is recorded.
    Expired items are never candidates."""
    candidates = item_candidates(conn, pk, layer, words, live_since(now, policy, layer))
    if not candidates:
        return []
    return touch_ranked(conn, rank(candidates, as_utc(now), policy.for_layer(layer), limit), now)


def touch_ranked(
    conn: Connection, ranked: Sequence[tuple[Candidate, float]], now: datetime
) -> list[tuple[ItemRecord, float]]:
    """The rows of ranked candidates with their scores, best first (ties: newest
    first); each one's access is recorded."""
    scores = {candidate.id: score for candidate, score in ranked}
    rows = touch_items(conn, list(scores), now)
    hits = [(row, scores[row.id]) for row in rows]
    hits.sort(key=lambda hit: (-hit[1], -hit[0].id))
    return hits


def layer_totals(conn: Connection, pk: int) -> dict[str, tuple[int, int]]:
    """Per layer: (items, bytes)."""
    query = (
        sa.select(IC.layer, sa.func.count(), sa.func.coalesce(sa.func.sum(IC.byte_size), 0))
        .where(IC.scope_pk == pk)
        .group_by(IC.layer)
    )
    return {layer: (int(count), int(size)) for layer, count, size in conn.execute(query)}


def clear_items(conn: Connection, pk: int, layer: str | None) -> int:
    """Delete a scope's items (of one layer, or all); returns how many."""
    where = IC.scope_pk == pk if layer is None else sa.and_(IC.scope_pk == pk, IC.layer == layer)
    return int(conn.execute(sa.delete(item_table).where(where)).rowcount)


def _newest_ids(pk: int, layer: str, keep: int) -> sa.Select[tuple[int]]:
    return (
        sa.select(IC.id)
        .where(IC.scope_pk == pk, IC.layer == layer)
        .order_by(IC.id.desc())
        .limit(keep)
    )


def drop_older(conn: Connection, pk: int, layer: str, keep: int) -> int:
    """Delete all but the ``keep`` newest items of a layer; returns how many went."""
    statement = sa.delete(item_table).where(
        IC.scope_pk == pk, IC.layer == layer, IC.id.not_in(_newest_ids(pk, layer, keep))
    )
    return int(conn.execute(statement).rowcount)


def older_items(
    conn: Connection, pk: int, layer: str, keep: int, token_budget: int, since: datetime
) -> tuple[list[ItemRecord], int]:
    """The oldest items outside the ``keep`` newest, of those last accessed at or after
    ``since`` (expired ones are left to pruning, never folded into a live summary):
    at least two (when there are), then more while their tokens fit
    ``token_budget``. Returns them and how many older items there are in all."""
    live = (IC.scope_pk == pk, IC.layer == layer, IC.last_accessed >= as_utc(since))
    total = conn.execute(sa.select(sa.func.count()).where(*live)).scalar_one()
    older = max(int(total) - keep, 0)
    if older < 2:
        return [], older
    sizes = conn.execute(sa.select(IC.id, IC.token_count).where(*live).order_by(IC.id).limit(older))
    chosen: list[int] = []
    used = 0
    for item_id, tokens in sizes:
        if len(chosen) >= 2 and used + tokens > token_budget:
            break
        chosen.append(item_id)
        used += tokens
    return read_items(conn, chosen), older


def replace_with_summary(
    conn: Connection,
    pk: int,
    layer: str,
    batch: Sequence[ItemRecord],
    summary: NewItem,
    last_accessed: datetime,
    tier: MemoryTier,
    now: datetime,
) -> ItemRecord:
    """Turn the first item of ``batch`` into ``summary`` and delete the rest, if they
    are all still there unchanged.

    Raises:
        CompressionConflict: another writer changed or removed them meanwhile.
    """
    first, rest = batch[0], [row.id for row in batch[1:]]
    deleted = conn.execute(
        sa.delete(item_table).where(IC.scope_pk == pk, IC.layer == layer, IC.id.in_(rest))
    ).rowcount
    updated = (
        conn.execute(
            sa.update(item_table)
            .where(IC.id == first.id, IC.updated_at == first.updated_at)
            .values(
                content=store_text(summary.content),
                meta=summary.meta,
                token_count=summary.token_count,
                byte_size=summary.byte_size,
                updated_at=as_utc(now),
                last_accessed=as_utc(last_accessed),
                memory_tier=tier.value,
            )
            .returning(*item_table.c)
        )
        .mappings()
        .all()
    )
    if deleted != len(rest) or len(updated) != 1:
        raise CompressionConflict(
            "the layer's items changed while the summarizer ran; nothing was written"
        )
    forget_item_vectors(conn, [first.id])  # the deleted ones' go with them
    return ItemRecord.from_row(updated[0])


# --------------------------------------------------------------------------- maintenance


def clamp_future_items(conn: Connection, *, project: str, cut: Cutoffs) -> tuple[int, int] | None:
    """Clamp item accesses stamped in the future to now, as sessions' are; return the
    id range of the project's items (``None`` when it has none)."""
    conn.execute(
        sa.update(item_table)
        .where(in_project(project, by_scope=False), IC.last_accessed > cut.now)
        .values(
            last_accessed=cut.now,
            created_at=sa.case((IC.created_at > cut.now, cut.now), else_=IC.created_at),
            updated_at=sa.case((IC.updated_at > cut.now, cut.now), else_=IC.updated_at),
        )
    )
    low, high = conn.execute(
        sa.select(sa.func.min(IC.id), sa.func.max(IC.id)).where(in_project(project))
    ).one()
    return None if low is None else (int(low), int(high))


def recalculate_item_batch(
    conn: Connection,
    *,
    project: str | None,
    cut: Cutoffs,
    low: int | None = None,
    high: int | None = None,
) -> int:
    """Store the tier ``last_accessed`` gives at ``cut`` on the items of ``project``
    (``None``: every project) with ids ``low..high`` (default: all) whose stored tier
    is stale, in one ``UPDATE``. Returns how many changed."""
    tier = tier_case(cut, IC.last_accessed, item_ages(cut))
    ranged = low is not None and high is not None
    statement = sa.update(item_table).where(
        in_project(project, by_scope=not ranged), IC.memory_tier != tier
    )
    if ranged:
        statement = statement.where(IC.id.between(low, high))
    return int(conn.execute(statement.values(memory_tier=tier)).rowcount)


def _expired(cut: Cutoffs) -> sa.ColumnElement[bool]:
    """An item of a layer that expires, last accessed before ``cut.expired``."""
    return sa.and_(item_ages(cut), IC.last_accessed < cut.expired)


def count_expired_items(conn: Connection, *, project: str | None, cut: Cutoffs) -> int:
    """How many items of ``project`` (``None``: every project) are expired at ``cut``:
    of a layer that expires, last accessed before ``cut.expired``."""
    query = sa.select(sa.func.count()).where(in_project(project), _expired(cut))
    return int(conn.execute(query).scalar_one())


def prune_item_batch(
    conn: Connection, *, project: str | None, cut: Cutoffs, want: int | None
) -> tuple[int, ...]:
    """Delete up to ``want`` (``None``: every) items of ``project`` expired at ``cut``
    (of a layer that expires, last accessed before ``cut.expired``), oldest first; the
    full-text index follows in the same transaction.
    Returns their ids (none when none is left).

    As sessions are pruned: on PostgreSQL the candidates are locked first, and an
    access that committed first makes the lock wait re-evaluate the row, which is then
    no longer expired; a later access finds the item gone. The ``DELETE`` re-checks
    the expiry too. SQLite serializes writers.
    """
    chosen = (
        sa.select(IC.id)
        .where(in_project(project, by_scope=False), _expired(cut))
        .order_by(IC.last_accessed, IC.id)
    )
    if want is not None:
        chosen = chosen.limit(want)
    return delete_locked(conn, chosen, IC.id, _expired(cut))


def recalculate_item_tiers(
    conn: Connection, project: str | None, policy: TierPolicy, now: datetime
) -> int:
    """Store the tier each layer item's ``last_accessed`` gives at ``now``, in one
    set-based UPDATE touching only items whose tier changes.

    Args:
        project: only this project's items; ``None`` for every project.

    Returns:
        The number of items whose tier changed.
    """
    return recalculate_item_batch(conn, project=project, cut=cutoffs(as_utc(now), policy))


def prune_expired_items(
    conn: Connection,
    project: str | None,
    policy: TierPolicy,
    now: datetime,
    *,
    limit: int | None = None,
    dry_run: bool = False,
) -> int:
    """Delete layer items whose ``last_accessed`` is strictly more than
    ``policy.expired_after`` before ``now``, of the layers that expire
    (``policy.expiring_layers``), oldest first, at most ``limit``.

    Idempotent: a second call finds nothing more to delete.

    Args:
        project: only this project's items; ``None`` for every project.
        dry_run: count, delete nothing.

    Returns:
        The number of items deleted (or that would be).
    """
    cut = cutoffs(as_utc(now), policy)
    if dry_run:
        count = count_expired_items(conn, project=project, cut=cut)
        return count if limit is None else min(count, limit)
    return len(prune_item_batch(conn, project=project, cut=cut, want=limit))
