"""calculate_tier, TierPolicy and TierStats: pure, no database."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest

from tiermem import MemoryTier, TierPolicy, TierStats, calculate_tier
from tiermem.errors import InvalidArgument
from tiermem.tiers import tier_boost

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)
HOUR, DAY = timedelta(hours=1), timedelta(days=1)


@pytest.mark.parametrize(
    ("age", "tier"),
    [
        (timedelta(0), MemoryTier.ACTIVE),
        (HOUR - SECOND, MemoryTier.ACTIVE),
        (HOUR, MemoryTier.RECENT),
        (HOUR + SECOND, MemoryTier.RECENT),
        (DAY - SECOND, MemoryTier.RECENT),
        (DAY, MemoryTier.ARCHIVED),
        (DAY + SECOND, MemoryTier.ARCHIVED),
        (30 * DAY - SECOND, MemoryTier.ARCHIVED),
        (30 * DAY, MemoryTier.ARCHIVED),
        (30 * DAY + SECOND, MemoryTier.EXPIRED),
        (400 * DAY, MemoryTier.EXPIRED),
    ],
)
def test_thresholds_one_second_either_side(age: timedelta, tier: MemoryTier) -> None:
    """Each threshold age falls in the older tier, except 30 d exactly, which is not yet expired."""
    assert calculate_tier(NOW - age, NOW) is tier


def test_never_accessed_is_archived() -> None:
    """A session never accessed is ARCHIVED, as in the seed."""
    assert calculate_tier(None, NOW) is MemoryTier.ARCHIVED


@pytest.mark.parametrize("ahead", [SECOND, DAY, 3650 * DAY])
def test_future_access_counts_as_now(ahead: timedelta) -> None:
    """A last access in the future is ACTIVE (age clamped to zero), never something newer."""
    assert calculate_tier(NOW + ahead, NOW) is MemoryTier.ACTIVE


def test_other_offsets_compare_as_instants() -> None:
    """Aware datetimes in other zones compare by instant, not by wall-clock time."""
    plus_two = timezone(timedelta(hours=2))
    moment = (NOW - 2 * HOUR).astimezone(plus_two)
    assert calculate_tier(moment, NOW) is MemoryTier.RECENT


@pytest.mark.parametrize(
    ("last", "now"),
    [(datetime(2026, 1, 1), NOW), (NOW, datetime(2026, 1, 1)), (None, datetime(2026, 1, 1))],
)
def test_naive_datetimes_are_refused(last: datetime | None, now: datetime) -> None:
    """Naive datetimes raise InvalidArgument instead of comparing wrongly."""
    with pytest.raises(InvalidArgument):
        calculate_tier(last, now)


def test_custom_policy_moves_the_boundaries() -> None:
    """A custom TierPolicy's thresholds are the ones applied."""
    policy = TierPolicy(
        active_within=timedelta(minutes=5),
        recent_within=timedelta(minutes=10),
        expired_after=timedelta(minutes=20),
    )
    ages = [4, 5, 9, 10, 20, 21]
    tiers = [calculate_tier(NOW - timedelta(minutes=m), NOW, policy) for m in ages]
    assert tiers == [
        MemoryTier.ACTIVE,
        MemoryTier.RECENT,
        MemoryTier.RECENT,
        MemoryTier.ARCHIVED,
        MemoryTier.ARCHIVED,
        MemoryTier.EXPIRED,
    ]


@pytest.mark.parametrize(
    ("active", "recent", "expired"),
    [(0, 1, 2), (2, 1, 3), (1, 3, 2), (-1, 1, 2)],
)
def test_policy_rejects_unordered_thresholds(active: int, recent: int, expired: int) -> None:
    """TierPolicy needs 0 < active_within <= recent_within <= expired_after."""
    with pytest.raises(InvalidArgument):
        TierPolicy(
            active_within=timedelta(hours=active),
            recent_within=timedelta(hours=recent),
            expired_after=timedelta(hours=expired),
        )


def test_tier_boosts_follow_the_seed() -> None:
    """Ranking boosts are ACTIVE +0.3, RECENT +0.1, ARCHIVED 0 and EXPIRED -0.2."""
    assert [tier_boost(t) for t in MemoryTier] == [0.3, 0.1, 0.0, -0.2]
    assert tier_boost("recent") == 0.1


def test_tier_stats_is_a_frozen_value() -> None:
    """TierStats compares by value and cannot be modified."""
    stats = TierStats(total=3, active=1, recent=1, archived=1, expired=0)
    assert stats == TierStats(3, 1, 1, 1, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stats.total = 4  # type: ignore[misc]
