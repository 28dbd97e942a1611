"""The shared search ranking: BM25 relevance plus recency bonus plus tier boost."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from tiermem._storage.ranking import Candidate, bm25, epoch, rank, recency_bonus
from tiermem.tiers import DEFAULT_POLICY, calculate_tier, tier_boost

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
OLD = NOW - timedelta(days=3)


def _candidate(
    row_id: int,
    relevance: float,
    *,
    created: datetime = OLD,
    accessed: datetime | None = OLD,
) -> Candidate:
    return Candidate(
        row_id, epoch(created), None if accessed is None else epoch(accessed), relevance
    )


def test_bm25_is_the_textbook_formula() -> None:
    """One term, tf 2, a document of average length, 1 of 10 documents holding it."""
    (score,) = bm25([{"walrus": 2}], [5.0], total=10, average=5.0)
    idf = math.log(1 + (10 - 1 + 0.5) / (1 + 0.5))
    assert score == pytest.approx(idf * 2 * 2.2 / (2 + 1.2))


def test_bm25_rare_terms_outweigh_common_ones() -> None:
    """Of documents of the same length, the one with the rare term scores highest."""
    docs = [{"common": 1} for _ in range(89)] + [{"rare": 1}]
    scores = bm25(docs, [10.0] * 90, total=100, average=10.0)
    assert scores[-1] > 4 * scores[0]


def test_bm25_rewards_more_terms_and_repetition_with_saturation() -> None:
    """Two terms beat one; a repeated term beats one occurrence, but less than twice."""
    both, one, twice = bm25(
        [{"a": 1, "b": 1}, {"a": 1}, {"a": 2}, {"b": 1}], [4.0] * 4, total=20, average=4.0
    )[:3]
    assert both > one
    assert one < twice < 2 * one


def test_bm25_prefers_the_shorter_document() -> None:
    """The same term once in a short and in a long document: the short one scores higher."""
    short, long = bm25([{"a": 1}, {"a": 1}], [2.0, 40.0], total=10, average=10.0)
    assert short > long


def test_best_relevance_ranks_first_at_one() -> None:
    """Relevance is normalized by the best candidate's, so the best has 1.0 (plus bonuses)."""
    ranked = rank(
        [_candidate(1, 2.0), _candidate(2, 8.0), _candidate(3, 4.0)], NOW, DEFAULT_POLICY, 3
    )
    assert [c.id for c, _ in ranked] == [2, 3, 1]
    boost = tier_boost(calculate_tier(OLD, NOW))
    assert [s for _, s in ranked] == pytest.approx([1.0 + boost, 0.5 + boost, 0.25 + boost])


def test_bonuses_follow_creation_and_last_access() -> None:
    """Score = relevance + recency bonus (creation) + tier boost (last access)."""
    fresh = _candidate(1, 1, created=NOW, accessed=NOW)
    half = _candidate(2, 1, created=NOW - timedelta(hours=12), accessed=NOW - timedelta(hours=2))
    stale = _candidate(3, 1, created=NOW - timedelta(days=60), accessed=NOW - timedelta(days=31))
    never = _candidate(4, 1, accessed=None)
    scores = {c.id: s for c, s in rank([fresh, half, stale, never], NOW, DEFAULT_POLICY, 10)}
    assert scores == pytest.approx({1: 1.8, 2: 1.35, 3: 0.8, 4: 1.0})
    assert recency_bonus(NOW + timedelta(hours=1), NOW) == 0.5


def test_ties_go_to_the_newest_and_limit_applies() -> None:
    """Equal scores order by id, highest first, and at most limit come back."""
    ranked = rank([_candidate(n, 1) for n in range(1, 8)], NOW, DEFAULT_POLICY, 3)
    assert [c.id for c, _ in ranked] == [7, 6, 5]


def test_no_candidates_rank_to_nothing() -> None:
    """An empty candidate list gives an empty ranking."""
    assert rank([], NOW, DEFAULT_POLICY, 5) == []


@pytest.mark.parametrize("seed", range(20))
def test_pruned_ranking_equals_scoring_everything(seed: int) -> None:
    """Skipping hopeless candidates never changes the result (checked against brute force)."""
    rng = random.Random(seed)
    candidates = [
        _candidate(
            n,
            rng.uniform(0.1, 6.0),
            created=NOW - timedelta(hours=rng.uniform(0, 48)),
            accessed=NOW - timedelta(days=rng.uniform(0, 40)),
        )
        for n in range(1, rng.randrange(2, 300))
    ]
    limit = rng.randrange(1, 12)
    full = rank(candidates, NOW, DEFAULT_POLICY, len(candidates))
    best = max(score - _bonus(c) for c, score in full)
    assert best == pytest.approx(1.0)
    expected = sorted(full, key=lambda pair: (-pair[1], -pair[0].id))[:limit]
    assert rank(candidates, NOW, DEFAULT_POLICY, limit) == expected


def test_a_smaller_recency_bonus_scales_it_and_prunes_alike() -> None:
    """``recency=`` replaces the largest recency bonus (hybrid search's 0.1): a fresh
    candidate 0.2 less relevant wins with 0.5 and loses with 0.1, and pruning still
    returns what scoring everything returns."""
    fresh, older = _candidate(1, 0.8, created=NOW), _candidate(2, 1.0)
    assert [c.id for c, _ in rank([fresh, older], NOW, DEFAULT_POLICY, 1)] == [1]
    scores = {c.id: s for c, s in rank([fresh, older], NOW, DEFAULT_POLICY, 2, recency=0.1)}
    boost = tier_boost(calculate_tier(OLD, NOW))
    assert scores == pytest.approx({1: 0.9 + boost, 2: 1.0 + boost})
    rng = random.Random(7)
    for _ in range(20):
        candidates = [
            _candidate(
                n,
                rng.uniform(0.1, 1.0),
                created=NOW - timedelta(hours=rng.uniform(0, 48)),
                accessed=NOW - timedelta(days=rng.uniform(0, 40)),
            )
            for n in range(1, rng.randrange(2, 300))
        ]
        limit = rng.randrange(1, 12)
        full = rank(candidates, NOW, DEFAULT_POLICY, len(candidates), recency=0.1)
        expected = sorted(full, key=lambda pair: (-pair[1], -pair[0].id))[:limit]
        assert rank(candidates, NOW, DEFAULT_POLICY, limit, recency=0.1) == expected


def _bonus(candidate: Candidate) -> float:
    accessed = candidate.accessed
    last = None if accessed is None else datetime.fromtimestamp(accessed, UTC)
    tier = calculate_tier(last, NOW, DEFAULT_POLICY)
    return recency_bonus(datetime.fromtimestamp(candidate.created, UTC), NOW) + tier_boost(tier)


@pytest.mark.parametrize(
    "age",
    [
        timedelta(0),
        timedelta(minutes=59, seconds=59),
        timedelta(hours=1),
        timedelta(hours=23, minutes=59),
        timedelta(hours=24),
        timedelta(days=30),
        timedelta(days=30, seconds=1),
        timedelta(hours=-2),
    ],
)
def test_tier_boost_matches_calculate_tier_at_the_boundaries(age: timedelta) -> None:
    """The ranking's tier boost is calculate_tier's, thresholds included."""
    candidate = _candidate(1, 1, created=OLD, accessed=NOW - age)
    ((_, score),) = rank([candidate], NOW, DEFAULT_POLICY, 1)
    assert score == pytest.approx(1.0 + tier_boost(calculate_tier(NOW - age, NOW)))


def test_a_floor_leaves_out_candidates_far_weaker_than_the_best() -> None:
    """With ``floor``, a candidate under that share of the best relevance is left out,
    however fresh; one at or above it stays."""
    weak_but_fresh = _candidate(3, 2.0, created=NOW, accessed=NOW)
    candidates = [_candidate(1, 10.0), _candidate(2, 4.0), weak_but_fresh]
    assert [c.id for c, _ in rank(candidates, NOW, DEFAULT_POLICY, 10)] == [3, 1, 2]
    ranked = rank(candidates, NOW, DEFAULT_POLICY, 10, floor=0.3)
    assert [c.id for c, _ in ranked] == [1, 2]
