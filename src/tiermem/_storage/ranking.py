"""The ranking every search shares (conversation entries, layer items, working
memory): BM25 over the words each candidate holds, then a score of

* its text relevance: its BM25 divided by the best candidate's, so the best
  match has 1.0 and a match on rare words outweighs one on common words;
* plus the recency bonus: 0.5 for an item created now, falling linearly to
  0 at 24 hours;
* plus the tier boost (:func:`~tiermem.tiers.tier_boost`) of the tier its
  last access gives now (for a conversation entry, its session's).

Best first, ties newest (highest id) first.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

from .._core.clock import as_utc
from ..tiers import MemoryTier, TierPolicy, tier_boost

__all__ = [
    "BM25_B",
    "BM25_K1",
    "MAX_BONUS",
    "RECENCY_BONUS",
    "RECENCY_WINDOW",
    "Candidate",
    "bm25",
    "epoch",
    "rank",
    "recency_bonus",
]

#: The largest recency bonus (an item created just now).
RECENCY_BONUS = 0.5
#: The bonus falls linearly to 0 over this window.
RECENCY_WINDOW = timedelta(hours=24)
#: BM25's term frequency saturation and length normalization (FTS5's values).
BM25_K1, BM25_B = 1.2, 0.75
_MAX_BOOST = max(tier_boost(tier) for tier in MemoryTier)
#: The most the bonuses add to a candidate's relevance.
MAX_BONUS = RECENCY_BONUS + _MAX_BOOST


def recency_bonus(created_at: datetime, now: datetime) -> float:
    """The recency bonus: 0.5 when ``created_at`` is now (or later), linearly
    down to 0 at 24 hours and after."""
    age = (now - created_at) / RECENCY_WINDOW
    return RECENCY_BONUS * min(max(1.0 - age, 0.0), 1.0)


class Candidate(NamedTuple):
    """A row that matched at least one query word.

    Attributes:
        id: the row's id.
        created: when it was stored, in epoch seconds (the recency bonus).
        accessed: its (or its session's) last access in epoch seconds, if any
            (the tier boost).
        relevance: its BM25 score for the query (positive).
    """

    id: int
    created: float
    accessed: float | None
    relevance: float


def bm25(
    frequencies: Sequence[dict[str, int]], lengths: Sequence[float], total: int, average: float
) -> list[float]:
    """BM25 of each document of a collection that matched a query.

    Args:
        frequencies: per document, how often each query term occurs in it.
        lengths: per document, its length (any unit ``average`` shares).
        total: how many documents the collection holds.
        average: their average length.
    """
    population = max(total, len(frequencies))
    counts: dict[str, int] = {}
    for terms in frequencies:
        for term in terms:
            counts[term] = counts.get(term, 0) + 1
    idf = {
        term: math.log(1 + (population - count + 0.5) / (count + 0.5))
        for term, count in counts.items()
    }
    average = average if average > 0 else 1.0
    scores = []
    for terms, length in zip(frequencies, lengths, strict=True):
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average)
        scores.append(
            sum(idf[term] * tf * (BM25_K1 + 1) / (tf + norm) for term, tf in terms.items())
        )
    return scores


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
    now: datetime,
    policy: TierPolicy,
    limit: int,
    *,
    recency: float = RECENCY_BONUS,
    floor: float = 0.0,
) -> list[tuple[Candidate, float]]:
    """The best ``limit`` candidates with their scores (see the module docstring);
    ``recency`` is the largest recency bonus (hybrid search's is smaller). With
    ``floor``, a candidate whose relevance is under ``floor`` of the best one's is
    left out, whatever its bonuses."""
    if not candidates:
        return []
    ordered = sorted(candidates, key=lambda candidate: candidate.relevance, reverse=True)
    best = ordered[0].relevance or 1.0
    moment, window = epoch(now), RECENCY_WINDOW.total_seconds()
    boost = _tier_boosts(moment, policy)
    most = recency + _MAX_BOOST
    scored: list[tuple[float, int, Candidate]] = []
    for candidate in ordered:
        relevance = candidate.relevance / best
        if relevance < floor:  # ordered: every later candidate is under it too
            break
        # Bonuses are bounded: once relevance + the largest bonus cannot reach the
        # current limit-th score, no less relevant candidate can either.
        if len(scored) >= limit and relevance + most < scored[0][0]:
            break
        age = (moment - candidate.created) / window
        bonus = recency * min(max(1.0 - age, 0.0), 1.0)
        entry = (relevance + bonus + boost(candidate.accessed), candidate.id, candidate)
        if len(scored) < limit:
            heapq.heappush(scored, entry)
        elif entry > scored[0]:
            heapq.heapreplace(scored, entry)
    ranked = sorted(scored, key=lambda item: (-item[0], -item[1]))
    return [(candidate, score) for score, _, candidate in ranked]
