"""Full-text search over conversation entries (compressed originals included), and
the ranking every search shares (entries, layer items, working memory).

The database finds, for each query word, the rows containing it (see
:mod:`tiermem._storage.fts`); each matching row is a :class:`Candidate` with a bit
mask of its words. Each scores

* its text relevance: the sum of the inverse document frequencies (BM25's
  IDF, taken inside the collection searched: the session, the project or
  the scope's layer) of the query words it contains, divided by the best
  candidate's, so the best match has 1.0 and a rare word outweighs a
  common one;
* plus the recency bonus: 0.5 for an item created now, falling linearly to
  0 at 24 hours;
* plus the tier boost (:func:`~tiermem.tiers.tier_boost`) of the tier its
  last access gives now (for a conversation entry, its session's).

Best first, ties newest (highest id) first. The same numbers on SQLite and
PostgreSQL.
"""

from __future__ import annotations

import functools
import heapq
import json
import math
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._core.clock import as_utc
from ..tiers import DEFAULT_POLICY, MemoryTier, TierPolicy, tier_boost
from ..types import SearchHit
from . import fts
from .schema import entry_table, session_table
from .store import entry_from_row

__all__ = [
    "RECENCY_BONUS",
    "RECENCY_WINDOW",
    "Candidate",
    "epoch",
    "in_ids",
    "json_ids",
    "pg_candidates",
    "rank",
    "recency_bonus",
    "search_entries",
    "sqlite_epoch",
    "tier_bands",
]

E, S = entry_table.c, session_table.c

#: The largest recency bonus (an item created just now).
RECENCY_BONUS = 0.5
#: The bonus falls linearly to 0 over this window.
RECENCY_WINDOW = timedelta(hours=24)
_MAX_BONUS = RECENCY_BONUS + max(tier_boost(tier) for tier in MemoryTier)


def recency_bonus(created_at: datetime, now: datetime) -> float:
    """The recency bonus: 0.5 when ``created_at`` is now (or later), linearly
    down to 0 at 24 hours and after."""
    age = (now - created_at) / RECENCY_WINDOW
    return RECENCY_BONUS * min(max(1.0 - age, 0.0), 1.0)


def tier_bands(
    column: sa.ColumnElement[datetime], now: datetime, policy: TierPolicy = DEFAULT_POLICY
) -> list[tuple[MemoryTier, sa.ColumnElement[bool]]]:
    """For each tier, the SQL condition on a ``last_accessed`` column that
    :func:`~tiermem.tiers.calculate_tier` maps to it (set-based tier updates)."""
    now = as_utc(now)
    active, recent = now - policy.active_within, now - policy.recent_within
    expired = now - policy.expired_after
    return [
        (MemoryTier.ACTIVE, column > active),
        (MemoryTier.RECENT, sa.and_(column <= active, column > recent)),
        (MemoryTier.ARCHIVED, sa.and_(column <= recent, column >= expired)),
        (MemoryTier.EXPIRED, column < expired),
    ]


class Candidate(NamedTuple):
    """A row that matched at least one query word.

    Attributes:
        id: the row's id.
        created: when it was stored, in epoch seconds (the recency bonus).
        accessed: its (or its session's) last access in epoch seconds, if any
            (the tier boost).
        mask: bit ``i`` is set when it contains query word ``i``.
    """

    id: int
    created: float
    accessed: float | None
    mask: int


def epoch(moment: datetime) -> float:
    """Epoch seconds of an aware datetime (or a naive one read back as UTC)."""
    return as_utc(moment).timestamp()


def _tier_boosts(now: float, policy: TierPolicy) -> Callable[[float | None], float]:
    """:func:`~tiermem.tiers.tier_boost` of :func:`~tiermem.tiers.calculate_tier`, on
    epoch seconds (the hot loop of ranking)."""
    active, recent = policy.active_within.total_seconds(), policy.recent_within.total_seconds()
    expired = policy.expired_after.total_seconds()
    boosts = {tier: tier_boost(tier) for tier in MemoryTier}

    def boost(accessed: float | None) -> float:
        if accessed is None:
            return boosts[MemoryTier.ARCHIVED]
        age = max(now - accessed, 0.0)
        if age < active:
            return boosts[MemoryTier.ACTIVE]
        if age < recent:
            return boosts[MemoryTier.RECENT]
        if age > expired:
            return boosts[MemoryTier.EXPIRED]
        return boosts[MemoryTier.ARCHIVED]

    return boost


def rank(
    candidates: Sequence[Candidate],
    total: int,
    now: datetime,
    policy: TierPolicy,
    limit: int,
) -> list[tuple[Candidate, float]]:
    """The best ``limit`` candidates with their scores (see the module docstring).

    Args:
        total: how many rows the searched collection holds (for the IDF).
    """
    if not candidates:
        return []
    population = max(total, len(candidates))
    groups: dict[int, list[Candidate]] = {}
    for candidate in candidates:
        groups.setdefault(candidate.mask, []).append(candidate)
    per_word: dict[int, int] = {}
    for mask, members in groups.items():
        while mask:
            bit = mask & -mask
            per_word[bit] = per_word.get(bit, 0) + len(members)
            mask ^= bit
    idf = {
        bit: math.log(1 + (population - count + 0.5) / (count + 0.5))
        for bit, count in per_word.items()
    }
    weights = {mask: sum(value for bit, value in idf.items() if mask & bit) for mask in groups}
    best = max(weights.values()) or 1.0
    moment, window = epoch(now), RECENCY_WINDOW.total_seconds()
    boost = _tier_boosts(moment, policy)
    scored: list[tuple[float, int, Candidate]] = []
    for mask in sorted(groups, key=weights.__getitem__, reverse=True):
        relevance = weights[mask] / best
        # Bonuses are bounded: once relevance + the largest bonus cannot reach the
        # current limit-th score, no less relevant candidate can either.
        if len(scored) >= limit and relevance + _MAX_BONUS < scored[0][0]:
            break
        for candidate in groups[mask]:
            age = (moment - candidate.created) / window
            recency = RECENCY_BONUS * min(max(1.0 - age, 0.0), 1.0)
            entry = (relevance + recency + boost(candidate.accessed), candidate.id, candidate)
            if len(scored) < limit:
                heapq.heappush(scored, entry)
            elif entry > scored[0]:
                heapq.heapreplace(scored, entry)
    ranked = sorted(scored, key=lambda item: (-item[0], -item[1]))
    return [(candidate, score) for score, _, candidate in ranked]


_PG_CANDIDATES = """\
SELECT {id}, extract(epoch FROM {created}), extract(epoch FROM {accessed}), {total}, {checks}
FROM {source}
WHERE {fts} @@ to_tsquery('simple', :any) AND {where}"""


@functools.cache
def _pg_statement(count: int, **parts: str) -> sa.TextClause:
    checks = ", ".join(f"{parts['fts']} @@ to_tsquery('simple', :w{i})" for i in range(count))
    return sa.text(_PG_CANDIDATES.format(checks=checks, **parts))


def pg_candidates(
    conn: Connection, words: Sequence[str], params: dict[str, Any], **parts: str
) -> tuple[list[Candidate], int | None]:
    """PostgreSQL: the rows of ``parts["source"]`` matching any of ``words``, with
    their masks, in one statement (``parts`` name the SQL of each column; an
    optional ``total`` counts the collection in the same statement)."""
    parts.setdefault("total", "NULL")
    statement = _pg_statement(len(words), **parts)
    # A prepared statement's generic plan cannot see the words: it would AND a GIN
    # scan of every row holding a common word with the scope. Plan with the words.
    conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_custom_plan")
    bound = {f"w{i}": fts.tsquery_any([word]) for i, word in enumerate(words)}
    rows = conn.execute(statement, {**params, **bound, "any": fts.tsquery_any(words)}).all()
    candidates = [
        Candidate(
            row[0],
            float(row[1]),
            _float(row[2]),
            sum(1 << i for i, hit in enumerate(row[4:]) if hit),
        )
        for row in rows
    ]
    return candidates, (None if not rows or rows[0][3] is None else int(rows[0][3]))


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def sqlite_epoch(column: sa.ColumnElement[datetime]) -> sa.ColumnElement[float]:
    """SQLite: epoch seconds of a stored UTC datetime, computed by the database."""
    return sa.type_coerce((sa.func.julianday(column) - 2440587.5) * 86400.0, sa.Float)


def json_ids(ids: Iterable[int]) -> str:
    """SQLite: the ``ids`` parameter of :func:`in_ids` (one bound JSON array)."""
    return json.dumps(list(ids))


def in_ids(column: sa.ColumnElement[int]) -> sa.ColumnElement[bool]:
    """SQLite: ``column IN`` the JSON array bound as ``ids`` (any length, one parameter)."""
    values = sa.func.json_each(sa.bindparam("ids")).table_valued("value")
    return column.in_(sa.select(values.c.value))


_SQLITE_ENTRY_META = (
    sa.select(E.id, sqlite_epoch(E.timestamp), sqlite_epoch(S.last_accessed))
    .join(session_table, S.pk == E.session_pk)
    .where(S.project == sa.bindparam("project"), in_ids(E.id))
)


def _entry_candidates(
    conn: Connection, project: str, words: Sequence[str], session_pk: int | None
) -> list[Candidate]:
    if conn.dialect.name == "postgresql":
        where = "s.project = :project"
        params: dict[str, Any] = {"project": project}
        if session_pk is not None:
            where += " AND e.session_pk = :session_pk"
            params["session_pk"] = session_pk
        candidates, _ = pg_candidates(
            conn,
            words,
            params,
            id="e.id",
            created="e.timestamp",
            accessed="s.last_accessed",
            fts="e.fts",
            source="tiermem_entry e JOIN tiermem_session s ON s.pk = e.session_pk",
            where=where,
        )
        return candidates
    found = fts.sqlite_matches(conn, fts.ENTRY_INDEX, words, session_pk)
    if not found:
        return []
    rows = conn.execute(_SQLITE_ENTRY_META, {"project": project, "ids": json_ids(found)}).all()
    return [Candidate(row[0], row[1], row[2], found[row[0]]) for row in rows]


def search_entries(
    conn: Connection,
    project: str,
    query: str,
    session_id: str | None,
    limit: int,
    *,
    now: datetime | None = None,
    policy: TierPolicy = DEFAULT_POLICY,
) -> list[SearchHit]:
    """Entries of ``project`` (or of one session) containing any word of ``query``,
    compressed originals included, best first.

    Args:
        now: the memory's clock (recency and tiers); the current time by default.
        policy: the tier thresholds of the tier boost.
    """
    found = fts.tokenize(query)
    if not found:
        return []
    sessions = sa.select(S.pk, S.entry_count).where(S.project == project)
    if session_id is not None:
        sessions = sessions.where(S.session_id == session_id)
    counts = conn.execute(sessions).all()
    if not counts:
        return []
    session_pk = counts[0][0] if session_id is not None else None
    total = sum(row[1] for row in counts)
    candidates = _entry_candidates(conn, project, found, session_pk)
    ranked = rank(candidates, total, as_utc(now or datetime.now(UTC)), policy, limit)
    if not ranked:
        return []
    scores = {candidate.id: score for candidate, score in ranked}
    rows = conn.execute(
        sa.select(entry_table, S.session_id.label("sid"))
        .join(session_table, S.pk == E.session_pk)
        .where(E.id.in_(list(scores)))
    ).mappings()
    hits = [
        SearchHit(entry=entry_from_row(row["sid"], row), score=scores[row["id"]]) for row in rows
    ]
    hits.sort(key=lambda hit: (-hit.score, -hit.entry.id))
    return hits
