"""Hybrid search over one scope's layer: BM25 fused with dense similarity.

The same fusion as for entries (:mod:`tiermem._storage.hybrid`): the lexical
list is the layer's items matching any of the query's words with their BM25
(:func:`tiermem._storage.items.item_candidates`); the dense list is the
:data:`~tiermem._storage.hybrid.POOL` items most similar to the query, scored
exactly over every vector of the scope's layer (numpy, from the per-process
cache that reads only the layer's new vectors), so an item that shares no word
with the query is found. A scope's layer is small next to a session (thousands
of items, not a hundred thousand), so the exact scan costs well under a
millisecond and nothing is lost to a re-rank of word matches only.

Each candidate's relevance is its scaled BM25 and scaled similarity averaged
with the memory's ``dense_weight`` (:func:`tiermem._core.dense.blend`); an item
not embedded yet takes part through its words alone. Expired items are never
candidates: those among the most similar are dropped before the fusion. The
ranking adds the tier boost and a recency bonus of at most
:data:`~tiermem._storage.hybrid.RECENCY_BONUS`, as hybrid entry search does.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._core import dense
from .._core.clock import as_utc
from ..tiers import TierPolicy
from . import item_vectors
from .hybrid import POOL, RECENCY_BONUS, DenseQuery
from .items import item_candidates, live_since, touch_ranked
from .ranking import Candidate, rank
from .rows import ItemRecord

__all__ = ["search_items"]


def _seconds(dialect: str, column: str) -> str:
    """SQL of a time column as seconds since the epoch (no datetime per row in Python)."""
    if dialect == "postgresql":
        return f"extract(epoch FROM {column})"
    return f"(julianday({column}) - 2440587.5) * 86400.0"


@functools.cache
def _live_statement(dialect: str) -> sa.TextClause:
    # The cutoff is typed: on SQLite it is bound in the one text format times are stored in.
    return sa.text(
        f"SELECT id, {_seconds(dialect, 'created_at')}, {_seconds(dialect, 'last_accessed')} "
        "FROM tiermem_layer_item WHERE id IN :ids AND scope_pk = :pk AND layer = :layer "
        "AND last_accessed >= :since"
    ).bindparams(
        sa.bindparam("ids", expanding=True),
        sa.bindparam("since", type_=sa.DateTime(timezone=True)),
    )


def _live(
    conn: Connection, pk: int, layer: str, ids: Sequence[int], since: datetime
) -> dict[int, tuple[float, float]]:
    """Of the items ``ids``, those of the scope's layer that are not expired: id ->
    (created, last accessed) in seconds since the epoch."""
    params = {"ids": list(ids), "pk": pk, "layer": layer, "since": as_utc(since)}
    rows = conn.execute(_live_statement(conn.dialect.name), params)
    return {int(row[0]): (float(row[1]), float(row[2])) for row in rows}


def _similar(
    conn: Connection, pk: int, layer: str, query: DenseQuery, pool: int
) -> dict[int, float]:
    """The ``pool`` items of the scope's layer most similar to the query (item id ->
    cosine similarity), from every vector of the query's model."""
    version = item_vectors.layer_version(conn, pk, layer, query.model)
    part = query.cache.get(
        ("layer", pk, layer, query.model),
        version,
        lambda after: item_vectors.layer_vectors(conn, pk, layer, query.model, after),
        len(query.vector),
    )
    return dict(dense.top(part.ids, part.matrix, query.vector, pool))


def search_items(
    conn: Connection,
    pk: int,
    layer: str,
    words: Sequence[str],
    limit: int,
    now: datetime,
    policy: TierPolicy,
    dense_query: DenseQuery,
) -> list[tuple[ItemRecord, float]]:
    """The best ``limit`` items of a scope's layer by words and by meaning with their
    scores, best first (see the module docstring); each hit's access is recorded."""
    since, policy = live_since(now, policy, layer), policy.for_layer(layer)
    pool = min(max(POOL, 4 * limit), 1 << 31)
    lexical: list[Candidate] = []
    if words:
        found = item_candidates(conn, pk, layer, words, since)
        lexical = sorted(found, key=lambda c: (-c.relevance, -c.id))[:pool]
    similar = _similar(conn, pk, layer, dense_query, pool)
    times = {candidate.id: (candidate.created, candidate.accessed) for candidate in lexical}
    missing = [item_id for item_id in similar if item_id not in times]
    if missing:
        times.update(_live(conn, pk, layer, missing, since))
    similar = {item_id: score for item_id, score in similar.items() if item_id in times}
    words_of = {candidate.id: candidate.relevance for candidate in lexical}
    fused = dense.blend(words_of, similar, dense_query.weight)
    if not fused:
        return []
    candidates = [
        Candidate(item_id, times[item_id][0], times[item_id][1], score)
        for item_id, score in fused.items()
    ]
    ranked = rank(candidates, as_utc(now), policy, limit, recency=RECENCY_BONUS)
    return touch_ranked(conn, ranked, now)
