"""The shared search ranking: BM25 over word presence plus recency bonus plus tier boost."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from tiermem._storage.search import Candidate, epoch, rank, recency_bonus
from tiermem.tiers import DEFAULT_POLICY, calculate_tier, tier_boost

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
OLD = NOW - timedelta(days=3)


def _candidate(
    row_id: int, mask: int, *, created: datetime = OLD, accessed: datetime | None = OLD
) -> Candidate:
    return Candidate(row_id, epoch(created), None if accessed is None else epoch(accessed), mask)


def test_rare_words_outweigh_common_ones() -> None:
    """A row with the rare word outranks rows with only the common word; best is 1.0."""
    common = [_candidate(n, 0b01) for n in range(1, 90)]
    rare = _candidate(500, 0b10)
    ranked = rank([*common, rare], total=100, now=NOW, policy=DEFAULT_POLICY, limit=3)
    assert ranked[0][0].id == 500
    assert ranked[0][1] == pytest.approx(1.0)
    assert ranked[1][1] < 0.1


def test_more_and_rarer_words_rank_higher() -> None:
    """Matching more query words scores higher, and a rarer word more than a common one."""
    both = _candidate(1, 0b11)
    rare = _candidate(2, 0b10)
    common = [_candidate(n, 0b01) for n in range(3, 9)]
    order = [c.id for c, _ in rank([*common, rare, both], 50, NOW, DEFAULT_POLICY, 3)]
    assert order == [1, 2, 8]


def test_bonuses_follow_creation_and_last_access() -> None:
    """Score = relevance + recency bonus (creation) + tier boost (last access)."""
    fresh = _candidate(1, 1, created=NOW, accessed=NOW)
    half = _candidate(2, 1, created=NOW - timedelta(hours=12), accessed=NOW - timedelta(hours=2))
    stale = _candidate(3, 1, created=NOW - timedelta(days=60), accessed=NOW - timedelta(days=31))
    never = _candidate(4, 1, accessed=None)
    scores = {c.id: s for c, s in rank([fresh, half, stale, never], 4, NOW, DEFAULT_POLICY, 10)}
    assert scores == pytest.approx({1: 1.8, 2: 1.35, 3: 0.8, 4: 1.0})
    assert recency_bonus(NOW + timedelta(hours=1), NOW) == 0.5


def test_ties_go_to_the_newest_and_limit_applies() -> None:
    """Equal scores order by id, highest first, and at most limit come back."""
    ranked = rank([_candidate(n, 1) for n in range(1, 8)], 7, NOW, DEFAULT_POLICY, 3)
    assert [c.id for c, _ in ranked] == [7, 6, 5]


def test_no_candidates_rank_to_nothing() -> None:
    """An empty candidate list gives an empty ranking."""
    assert rank([], 10, NOW, DEFAULT_POLICY, 5) == []


@pytest.mark.parametrize("seed", range(20))
def test_pruned_ranking_equals_scoring_everything(seed: int) -> None:
    """Skipping hopeless candidates never changes the result (checked against brute force)."""
    rng = random.Random(seed)
    candidates = [
        _candidate(
            n,
            rng.randrange(1, 16),
            created=NOW - timedelta(hours=rng.uniform(0, 48)),
            accessed=NOW - timedelta(days=rng.uniform(0, 40)),
        )
        for n in range(1, rng.randrange(2, 300))
    ]
    limit = rng.randrange(1, 12)
    full = rank(candidates, 400, NOW, DEFAULT_POLICY, len(candidates))
    best = max(score - _bonus(c) for c, score in full)
    assert best == pytest.approx(1.0)
    expected = sorted(full, key=lambda pair: (-pair[1], -pair[0].id))[:limit]
    assert rank(candidates, 400, NOW, DEFAULT_POLICY, limit) == expected


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
    ((_, score),) = rank([candidate], 1, NOW, DEFAULT_POLICY, 1)
    assert score == pytest.approx(1.0 + tier_boost(calculate_tier(NOW - age, NOW)))
