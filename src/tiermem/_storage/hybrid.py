"""Hybrid search over entries: BM25 fused with dense similarity.

The lexical list is the best :data:`POOL` (at least) entries by BM25
(:mod:`tiermem._storage.search`). The dense list depends on the scope:

* within a session, every vector of the session is scored exactly (cosine, with
  numpy) from a per-process cache that reads only the session's new vectors, so
  an entry that shares no word with the query can still be found;
* across a project, the lexical candidates are re-ranked: their vectors are
  read by id and scored (reading every vector of a project per query would not
  stay fast).

The two lists are fused by reciprocal rank fusion (the dense list weighted
``weight``), the fused score normalized by the best, and then the recency
bonus and tier boost are added as for lexical search (:func:`search.rank`).
Entries without a vector of the model (not embedded yet) take part through the
lexical list alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._core import dense
from .._core.clock import as_utc
from ..tiers import TierPolicy
from ..types import SearchHit
from . import fts, vectors
from .schema import entry_table, session_table
from .search import Candidate, entry_candidates, entry_hits, epoch, rank, session_counts

__all__ = ["POOL", "DenseQuery", "search_entries"]

E, S = entry_table.c, session_table.c

#: How many candidates each list contributes at least (more for a larger limit).
POOL = 100


@dataclass(frozen=True, slots=True)
class DenseQuery:
    """The dense half of a search.

    Attributes:
        vector: the query's stored-form vector (:func:`tiermem._core.dense.encode_all`).
        model: the id of the model that embedded it.
        weight: the dense list's weight in the fusion (the lexical list's is 1).
        cache: the memory's cache of session vectors.
    """

    vector: bytes
    model: str
    weight: float
    cache: dense.VectorCache


def _dense_ids(
    conn: Connection,
    query: DenseQuery,
    session_pk: int | None,
    lexical: Sequence[int],
    pool: int,
) -> list[int]:
    if session_pk is None:
        found = vectors.entry_vectors(conn, lexical, query.model)
        return [entry_id for entry_id, _ in dense.nearest(found, query.vector, pool)]
    version = vectors.session_version(conn, session_pk, query.model)
    part = query.cache.get(
        (session_pk, query.model),
        version,
        lambda after: vectors.session_vectors(conn, session_pk, query.model, after),
    )
    return [entry_id for entry_id, _ in dense.top(part.ids, part.matrix, query.vector, pool)]


def _times(conn: Connection, ids: Sequence[int]) -> dict[int, tuple[float, float | None]]:
    rows = conn.execute(
        sa.select(E.id, E.timestamp, S.last_accessed)
        .join(session_table, S.pk == E.session_pk)
        .where(E.id.in_(list(ids)))
    )
    return {int(row[0]): (epoch(row[1]), None if row[2] is None else epoch(row[2])) for row in rows}


def search_entries(
    conn: Connection,
    project: str,
    query: str,
    session_id: str | None,
    limit: int,
    *,
    now: datetime,
    policy: TierPolicy,
    dense_query: DenseQuery,
) -> list[SearchHit]:
    """Entries of ``project`` (or of one session) best matching ``query``, by words
    and by meaning, best first (see the module docstring)."""
    counts: list[Any] = session_counts(conn, project, session_id)
    if not counts:
        return []
    session_pk = counts[0][0] if session_id is not None else None
    pool = min(max(POOL, 4 * limit), 1 << 31)
    words = fts.query_words(query)
    lexical: list[Candidate] = []
    if words:
        found = entry_candidates(conn, project, words, counts, session_pk, pool)
        lexical = sorted(found, key=lambda c: (-c.relevance, -c.id))[:pool]
    lexical_ids = [candidate.id for candidate in lexical]
    dense_ids = _dense_ids(conn, dense_query, session_pk, lexical_ids, pool)
    fused = dense.fuse([(1.0, lexical_ids), (dense_query.weight, dense_ids)])
    if not fused:
        return []
    known = {candidate.id for candidate in lexical}
    missing = [entry_id for entry_id in fused if entry_id not in known]
    times = _times(conn, missing) if missing else {}
    for candidate in lexical:
        times[candidate.id] = (candidate.created, candidate.accessed)
    candidates = [
        Candidate(entry_id, times[entry_id][0], times[entry_id][1], score)
        for entry_id, score in fused.items()
        if entry_id in times
    ]
    return entry_hits(conn, rank(candidates, as_utc(now), policy, limit))
