"""Access tiers of layer items: set-based recalculation and pruning helpers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiermem import ConversationMemory, MemoryTier, TierPolicy, calculate_tier
from tiermem._storage.layer_schema import item_table
from tiermem.layers import prune_expired_items, recalculate_item_tiers
from tiermem.testing import ManualClock

from ..conftest import MemoryFactory

_BASE = datetime(2026, 3, 1, tzinfo=UTC)


def _tiers(memory: ConversationMemory) -> dict[str, str]:
    def read(conn: Connection) -> dict[str, str]:
        rows = conn.execute(sa.select(item_table.c.content, item_table.c.memory_tier))
        return {str(row[0]): str(row[1]) for row in rows}

    return memory.database.run(read, write=False)


def _stored(memory: ConversationMemory) -> list[str]:
    """The contents of every stored item, expired ones included, in id order."""

    def read(conn: Connection) -> list[str]:
        rows = conn.execute(sa.select(item_table.c.content).order_by(item_table.c.id))
        return [str(row[0]) for row in rows]

    return memory.database.run(read, write=False)


def _aged(memory: ConversationMemory, clock: ManualClock, scope: str = "t") -> None:
    """Items last accessed 40 d, 10 d, 5 h and 10 min before the clock's final time."""
    layers = memory.layers(scope)
    for label, age in (
        ("forty days", timedelta(days=40)),
        ("ten days", timedelta(days=10)),
        ("five hours", timedelta(hours=5)),
        ("ten minutes", timedelta(minutes=10)),
    ):
        clock.set(_BASE - age)
        layers.append("episodic", f"{scope} {label}")
    clock.set(_BASE)


def test_recalculate_item_tiers_matches_calculate_tier(
    memory: ConversationMemory, clock: ManualClock
) -> None:
    """Each item's stored tier becomes calculate_tier of its last access; the count is exact."""
    _aged(memory, clock)
    policy = memory.config.tier_policy
    changed = memory.database.run(
        lambda conn: recalculate_item_tiers(conn, memory.project, policy, clock.now)
    )
    assert changed == 3
    assert _tiers(memory) == {
        "t forty days": "expired",
        "t ten days": "archived",
        "t five hours": "recent",
        "t ten minutes": "active",
    }
    for item in memory.layers("t").recent("episodic"):
        assert item.memory_tier == calculate_tier(item.last_accessed, clock.now, policy).value
    again = memory.database.run(
        lambda conn: recalculate_item_tiers(conn, memory.project, policy, clock.now)
    )
    assert again == 0


def test_recalculation_honours_project_and_policy(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Only the named project changes (None: all), with the thresholds of the given policy."""
    ours, theirs = make_memory(project="ours"), make_memory(project="theirs")
    _aged(ours, clock, "a")
    _aged(theirs, clock, "b")
    strict = TierPolicy(
        active_within=timedelta(minutes=5),
        recent_within=timedelta(minutes=30),
        expired_after=timedelta(days=1),
    )
    changed = ours.database.run(
        lambda conn: recalculate_item_tiers(conn, "ours", strict, clock.now)
    )
    assert changed == 4
    tiers = _tiers(ours)
    assert {tiers[f"a {label}"] for label in ("forty days", "ten days")} == {"expired"}
    assert tiers["a ten minutes"] == "recent" and tiers["a five hours"] == "archived"
    assert {tiers[f"b {label}"] for label in ("forty days", "ten minutes")} == {"active"}
    assert ours.database.run(lambda conn: recalculate_item_tiers(conn, None, strict, clock.now))
    assert _tiers(ours)["b forty days"] == MemoryTier.EXPIRED.value


def test_prune_expired_items_oldest_first_with_limit_and_dry_run(
    memory: ConversationMemory, clock: ManualClock
) -> None:
    """Only items idle over 30 days go, oldest first, at most limit; a dry run only counts."""
    layers = memory.layers("p")
    start = clock.now
    for days in (45, 40, 35, 30):
        clock.set(start - timedelta(days=days))
        layers.append("episodic", f"idle {days} days")
    clock.set(start)
    policy = memory.config.tier_policy

    def prune(limit: int | None = None, dry_run: bool = False) -> int:
        return memory.database.run(
            lambda conn: prune_expired_items(
                conn, memory.project, policy, start, limit=limit, dry_run=dry_run
            )
        )

    assert prune(dry_run=True) == 3
    assert prune(limit=2) == 2
    assert _stored(memory) == ["idle 35 days", "idle 30 days"]
    assert prune() == 1
    assert prune() == 0
    assert _stored(memory) == ["idle 30 days"]
    assert [item.content for item in layers.recent("episodic")] == ["idle 30 days"]


def test_an_access_saves_an_item_from_pruning(
    memory: ConversationMemory, clock: ManualClock
) -> None:
    """A recall or search hit before the item expires refreshes last_accessed, so the
    item does not expire."""
    layers = memory.layers("saved")
    layers.learn("motto", "keep it simple")
    layers.append("episodic", "an old memory of the harbour")
    layers.append("episodic", "an old memory nobody reads")
    clock.advance(days=29)
    assert layers.recall("motto") is not None
    assert layers.search("episodic", "harbour")[0].item.memory_tier == "active"
    clock.advance(days=2)
    pruned = memory.database.run(
        lambda conn: prune_expired_items(conn, memory.project, memory.config.tier_policy, clock.now)
    )
    assert pruned == 1
    assert [item.content for item in layers.recent("episodic")] == ["an old memory of the harbour"]
    assert layers.recall("motto") is not None
