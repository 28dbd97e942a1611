"""get_tier_stats and least_recently_used, by current last_accessed, on both backends."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from tiermem import MemoryTier, TierPolicy, TierStats
from tiermem.errors import InvalidArgument
from tiermem.testing import ManualClock

from ..conftest import MemoryFactory
from .test_tiers_recalc import add_at, statements


def test_stats_count_current_tiers_without_recalculation(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """The distribution follows last_accessed even when stored tiers are stale."""
    memory = make_memory()
    now = clock.now + timedelta(days=90)
    ages = {"a1": 0, "a2": 59, "r1": 61, "h1": 60 * 30, "x1": 60 * 24 * 31, "x2": 60 * 24 * 80}
    for session_id, minutes in ages.items():
        add_at(memory, clock, session_id, now - timedelta(minutes=minutes))
    clock.set(now)
    stats = memory.get_tier_stats()
    assert stats == TierStats(total=6, active=2, recent=1, archived=1, expired=2)
    assert memory.recalculate_tiers() == 4
    assert memory.get_tier_stats() == stats


def test_stats_of_another_or_empty_project(make_memory: MemoryFactory) -> None:
    """get_tier_stats(project) counts that project; an empty one is all zeros."""
    alpha = make_memory(project="alpha")
    beta = make_memory(project="beta")
    beta.add_user_message("b1", "hi")
    beta.add_user_message("b2", "hi")
    assert alpha.get_tier_stats() == TierStats(0, 0, 0, 0, 0)
    assert alpha.get_tier_stats("beta") == TierStats(2, 2, 0, 0, 0)
    with pytest.raises(InvalidArgument):
        alpha.get_tier_stats("")


def test_stats_follow_a_custom_policy(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """The memory's tier_policy thresholds decide the counts."""
    from tiermem import MemoryConfig

    policy = TierPolicy(
        active_within=timedelta(minutes=1),
        recent_within=timedelta(minutes=2),
        expired_after=timedelta(minutes=3),
    )
    memory = make_memory(config=MemoryConfig(tier_policy=policy))
    memory.add_user_message("s", "hi")
    clock.advance(minutes=2)
    assert memory.get_tier_stats().archived == 1
    clock.advance(minutes=1, seconds=1)
    assert memory.get_tier_stats().expired == 1


def test_lru_lists_a_tier_oldest_first(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """least_recently_used returns one tier's sessions, least recently accessed first."""
    memory = make_memory()
    now = clock.now + timedelta(days=90)
    ages_h = {"new": 0, "r-young": 2, "r-old": 20, "r-mid": 10, "arch": 48, "exp": 24 * 40}
    for session_id, hours in ages_h.items():
        add_at(memory, clock, session_id, now - timedelta(hours=hours))
    clock.set(now)
    recent = memory.least_recently_used(MemoryTier.RECENT, limit=10)
    assert [info.session_id for info in recent] == ["r-old", "r-mid", "r-young"]
    assert [info.session_id for info in memory.least_recently_used("recent", 2)] == [
        "r-old",
        "r-mid",
    ]
    assert [i.session_id for i in memory.least_recently_used("expired")] == ["exp"]
    assert [i.session_id for i in memory.least_recently_used("archived")] == ["arch"]
    assert [i.session_id for i in memory.least_recently_used("active")] == ["new"]


def test_lru_breaks_ties_by_creation_and_is_no_access(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Sessions accessed at the same instant come in creation order; listing them is no access."""
    memory = make_memory()
    for session_id in ("c", "a", "b"):
        memory.add_user_message(session_id, "same instant")
    listed = memory.least_recently_used(MemoryTier.ACTIVE, 5)
    assert [info.session_id for info in listed] == ["c", "a", "b"]
    assert all(info.access_count == 1 for info in memory.least_recently_used("active", 5))


def test_lru_limits(make_memory: MemoryFactory) -> None:
    """limit=0 returns nothing and a huge limit is accepted without overflow."""
    memory = make_memory()
    memory.add_user_message("s", "hi")
    assert memory.least_recently_used("active", 0) == []
    assert len(memory.least_recently_used("active", 2**63)) == 1


#: (tier, limit) pairs least_recently_used refuses.
BAD_ARGUMENTS: list[tuple[Any, Any]] = [
    ("hot", 1),
    (3, 1),
    (None, 1),
    ("active", -1),
    ("active", True),
    ("active", 1.5),
]


def test_lru_refuses_bad_arguments_before_sql(make_memory: MemoryFactory, engine: Engine) -> None:
    """An unknown tier or a bad limit raises InvalidArgument and runs no SQL."""
    memory = make_memory()
    for tier, limit in BAD_ARGUMENTS:
        with statements(engine) as seen, pytest.raises(InvalidArgument):
            memory.least_recently_used(tier, limit)
        assert seen == [], (tier, limit)


async def test_async_twins_answer_the_same(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """aget_tier_stats and aleast_recently_used match their sync twins."""
    memory = make_memory()
    await memory.aadd_user_message("s", "hi")
    clock.advance(hours=3)
    assert await memory.aget_tier_stats() == memory.get_tier_stats()
    assert await memory.aleast_recently_used("recent") == memory.least_recently_used("recent")
