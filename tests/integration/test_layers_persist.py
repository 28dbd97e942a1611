"""Learned facts (semantic) and rules (procedural) persist across conversations by
default: they never expire by age, so ``prune_expired`` does not delete them with the
expired conversations; episodes expire as sessions do. A policy can say otherwise."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tiermem import ConversationMemory, MemoryConfig, TierPolicy
from tiermem._storage.layer_schema import item_table
from tiermem.errors import InvalidArgument
from tiermem.layers import LayerType
from tiermem.testing import ManualClock

from ..conftest import MemoryFactory


def stored_tiers(memory: ConversationMemory) -> dict[str, str]:
    """content -> stored tier of every stored item."""

    def read(conn: Connection) -> dict[str, str]:
        rows = conn.execute(sa.select(item_table.c.content, item_table.c.memory_tier))
        return {str(content): str(tier) for content, tier in rows}

    return memory.database.run(read, write=False)


def seed_old(memory: ConversationMemory, clock: ManualClock) -> None:
    """A conversation, a fact, a rule and an episode untouched for 400 days."""
    start = clock.now
    clock.set(start - timedelta(days=400))
    layers = memory.layers("agent")
    memory.add_user_message("old-chat", "my home city is Lisbon")
    layers.learn("home city", "Lisbon")
    layers.add_rule("user asks for a ferry", "suggest Cacilhas")
    layers.append("episodic", "booked the 9:10 ferry")
    clock.set(start)


def test_facts_and_rules_outlive_their_conversation(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """400 days idle: the conversation and the episode are expired and pruned; the fact
    and the rule are ARCHIVED, counted so, kept by prune and still found."""
    memory = make_memory()
    seed_old(memory, clock)
    stats = memory.get_tier_stats()
    assert (stats.expired, stats.items, stats.expired_items, stats.archived_items) == (1, 3, 1, 2)
    memory.recalculate_tiers()
    assert stored_tiers(memory) == {
        "Lisbon": "archived",
        "suggest Cacilhas": "archived",
        "booked the 9:10 ferry": "expired",
    }
    assert memory.prune_expired(dry_run=True) == 2
    assert memory.prune_expired() == 2
    assert memory.list_sessions() == []
    layers = memory.layers("agent")
    assert layers.search("episodic", "ferry") == []
    fact = layers.recall("home city")
    assert fact is not None and fact.value == "Lisbon"
    assert [rule.action for rule in layers.match_rules("ferry")] == ["suggest Cacilhas"]
    assert [hit.item.content for hit in layers.search("semantic", "Lisbon")] == ["Lisbon"]
    assert memory.prune_expired() == 0


def test_a_policy_can_make_facts_expire(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """Listing the semantic layer makes facts expire; rules still persist."""
    policy = TierPolicy(expiring_layers=(LayerType.EPISODIC, LayerType.SEMANTIC))
    memory = make_memory(config=MemoryConfig(tier_policy=policy))
    seed_old(memory, clock)
    layers = memory.layers("agent")
    assert layers.recall("home city") is None
    assert memory.prune_expired() == 3
    assert set(stored_tiers(memory)) == {"suggest Cacilhas"}


def test_learning_an_old_fact_again_updates_it(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """A fact that persists is replaced in place (an access), not started anew."""
    memory = make_memory()
    seed_old(memory, clock)
    fact = memory.layers("agent").learn("home city", "Porto")
    assert fact.access_count == 1 and fact.created_at == clock.now - timedelta(days=400)


@pytest.mark.parametrize("bad", ["semantic", ["working"], [7], None])
def test_expiring_layers_must_name_stored_layers(bad: object) -> None:
    """A bare string, the working layer (never stored) or a non-name is refused."""
    with pytest.raises(InvalidArgument, match="expiring_layers"):
        TierPolicy(expiring_layers=bad)  # type: ignore[arg-type]
