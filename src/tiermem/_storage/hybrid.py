"""Hybrid search over entries: BM25 fused with dense similarity.

The lexical list is the best :data:`POOL` (at least) entries by BM25
(:mod:`tiermem._storage.search`). The dense list depends on the scope:

* within a session, every vector of the session is scored exactly (cosine, with
  numpy) from a per-process cache that reads only the session's new vectors, and
  the :data:`POOL` most similar are kept, so an entry that shares no word with
  the query can still be found;
* across a project, the lexical candidates are re-ranked: their vectors are
  read by id and scored (reading every vector of a project per query would not
  stay fast).

Each candidate of either list then has a relevance (:func:`tiermem._core.dense.blend`)

    relevance = (words + dense_weight * meaning) / (1 + dense_weight)

where ``words`` is its BM25 and ``meaning`` its cosine similarity, each scaled to
0-1 between the worst (0) and the best (1) candidate of its list, and 0 for a
candidate that is not in that list (an entry without a vector of the model, not
embedded yet, takes part through its words alone). ``dense_weight`` (the
memory's argument, 1 by default) is thus how much a step in similarity counts
against the same step in BM25: 1 weighs them equally, 0 ranks by words alone
(the dense list still brings candidates), a large weight ranks by similarity
and breaks its ties by words. Scaled scores keep how far apart two candidates
are (rank fusion kept only their order): an entry far more similar to the query
than the others can win over one that matches the words a little better.

Relevance is then ranked as in lexical search (:func:`ranking.rank`): divided by
the best candidate's, plus the tier boost and a recency bonus of at most
:data:`RECENCY_BONUS` (lexical search's 0.5 would outweigh any difference of
meaning: the mean of two scaled scores spreads less than BM25 alone, and a
question about an older turn is common).
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
from .ranking import Candidate, epoch, rank
from .schema import entry_table, session_table
from .search import entry_candidates, entry_hits, session_candidates, session_counts

__all__ = ["POOL", "RECENCY_BONUS", "DenseQuery", "search_entries"]

E, S = entry_table.c, session_table.c

#: How many candidates each list contributes at least (more for a larger limit).
POOL = 100
#: The largest recency bonus of a hybrid search (an entry created just now), falling
#: to 0 over :data:`ranking.RECENCY_WINDOW` as in lexical search.
RECENCY_BONUS = 0.1


@dataclass(frozen=True, slots=True)
class DenseQuery:
    """The dense half of a search.

    Attributes:
        vector: the query's stored-form vector (:func:`tiermem._core.dense.encode_all`).
        model: the id of the model that embedded it.
        weight: the scaled similarity's weight in the fusion (scaled BM25's is 1).
        cache: the memory's cache of session vectors.
    """

    vector: bytes
    model: str
    weight: float
    cache: dense.VectorCache


def _similar(
    conn: Connection,
    query: DenseQuery,
    session_pk: int | None,
    lexical: Sequence[int],
    pool: int,
) -> dict[int, float]:
    """The dense list: entry id -> cosine similarity (see the module docstring)."""
    if session_pk is None:
        found = vectors.entry_vectors(conn, lexical, query.model)
        return dict(dense.nearest(found, query.vector, len(found)))
    version = vectors.session_version(conn, session_pk, query.model)
    part = query.cache.get(
        (session_pk, query.model),
        version,
        lambda after: vectors.session_vectors(conn, session_pk, query.model, after),
        len(query.vector),
    )
    return dict(dense.top(part.ids, part.matrix, query.vector, pool))


def _times(conn: Connection, ids: Sequence[int]) -> dict[int, tuple[float, float | None]]:
    rows = conn.execute(
        sa.select(E.id, E.timestamp, S.last_accessed)
        .join(session_table, S.pk == E.session_pk)
        .where(E.id.in_(list(ids)), E.retired_at.is_(None))
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
    last_id: int | None = None,
    local: bool = False,
    floor: float = 0.0,
) -> list[SearchHit]:
    """Entries of ``project`` (or of one session) best matching ``query``, by words
    and by meaning, best first (see the module docstring); with ``floor``, only
    those whose relevance is at least that share of the best one's. ``local`` (with
    a session): the words half is recall's ranking by words alone
    (:func:`~tiermem._storage.search.session_candidates`), not the index-wide one."""
    counts: list[Any] = session_counts(conn, project, session_id)
    if not counts:
        return []
    session_pk = counts[0][0] if session_id is not None else None
    pool = min(max(POOL, 4 * limit), 1 << 31)
    words = fts.query_words(query)
    lexical: list[Candidate] = []
    if words:
        if local and session_pk is not None:
            found = session_candidates(conn, project, words, counts, session_pk, pool, last_id)
        else:
            found = entry_candidates(conn, project, words, counts, session_pk, pool, last_id)
        lexical = sorted(found, key=lambda c: (-c.relevance, -c.id))[:pool]
    similar = _similar(conn, dense_query, session_pk, [c.id for c in lexical], pool)
    if session_pk is not None and last_id is not None:
        similar = {key: value for key, value in similar.items() if key <= last_id}
    words_of = {candidate.id: candidate.relevance for candidate in lexical}
    fused = dense.blend(words_of, similar, dense_query.weight)
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
    ranked = rank(candidates, as_utc(now), policy, limit, recency=RECENCY_BONUS, floor=floor)
    return entry_hits(conn, ranked)
