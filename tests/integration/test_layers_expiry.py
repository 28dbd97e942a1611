"""Layer items of a layer that expires follow the tier, expiry and prune rules of
sessions: ``recalculate_tiers`` refreshes their tiers, ``prune_expired`` deletes the
expired ones (with their full-text rows), ``get_tier_stats`` counts them, and no read
returns an expired item. Here a policy makes every stored layer expire; by default only
the episodic layer does (``test_layers_persist.py``)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from tiermem import ConversationMemory, MemoryConfig, TierPolicy, TierStats
from tiermem._storage.layer_schema import item_table
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder
from tiermem.tiers import STORED_LAYERS

from ..conftest import MemoryFactory

IC = item_table.c
EXPIRY = timedelta(days=30)
#: Facts and rules expire too, as events do: a policy says so.
EVERY_LAYER = MemoryConfig(tier_policy=TierPolicy(expiring_layers=STORED_LAYERS))


def stored(memory: ConversationMemory) -> dict[str, tuple[int, str, datetime]]:
    """content -> (id, stored tier, last_accessed) of every stored item, expired ones too."""

    def read(conn: Connection) -> dict[str, tuple[int, str, datetime]]:
        rows = conn.execute(sa.select(IC.content, IC.id, IC.memory_tier, IC.last_accessed))
        return {str(row[0]): (int(row[1]), str(row[2]), row[3]) for row in rows}

    return memory.database.run(read, write=False)


def indexed(engine: Engine, word: str) -> int:
    """How many rows the full-text index of layer items finds for ``word``."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            name = "tiermem_layer_item_fts"
            query = f"SELECT count(*) FROM {name} WHERE {name} MATCH ?"
            return int(conn.exec_driver_sql(query, (word,)).scalar_one())
        query = "SELECT count(*) FROM tiermem_layer_item WHERE fts @@ to_tsquery('simple', %s)"
        return int(conn.exec_driver_sql(query, (word,)).scalar_one())


def at(clock: ManualClock, moment: datetime) -> ManualClock:
    """``clock`` set to ``moment``."""
    clock.set(moment)
    return clock


def seed(memory: ConversationMemory, clock: ManualClock) -> None:
    """A fact, an event and a rule untouched for 400 days and an old session; a fresh
    item and a fresh session."""
    start, layers = clock.now, memory.layers("agent")
    at(clock, start - timedelta(days=400))
    memory.add_user_message("old-session", "hello")
    layers.learn("timezone", "quokka standard time")
    layers.append("episodic", "quokka sighting at the harbour")
    layers.add_rule("quokka spotted", "take a photo")
    at(clock, start)
    layers.append("episodic", "fresh harbour note")
    memory.add_user_message("new-session", "hi")


def test_prune_expired_deletes_expired_layer_items(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """A semantic fact, an event and a rule untouched for 400 days go with the expired
    session, index rows included; a dry run only counts; a rerun deletes nothing; the
    ``pruned`` signals name the sessions, then the items; other projects are left alone."""
    memory = make_memory(config=EVERY_LAYER)
    other = make_memory(project="other", config=EVERY_LAYER)
    start = clock.now
    at(clock, start - timedelta(days=400))
    other.layers("agent").append("episodic", "quokka of another project")
    at(clock, start)
    seed(memory, clock)
    mine = ("quokka standard time", "quokka sighting at the harbour", "take a photo")
    old = sorted(stored(memory)[text][0] for text in mine)
    assert indexed(engine, "quokka") == 4
    assert memory.prune_expired(dry_run=True) == 4
    assert len(stored(memory)) == 5
    recorder = SignalRecorder(memory)
    with recorder.recording():
        assert memory.prune_expired() == 4
    assert recorder.of("pruned") == [
        {"session_ids": ("old-session",), "item_ids": (), "project": "default"},
        {"session_ids": (), "item_ids": tuple(old), "project": "default"},
    ]
    assert set(stored(memory)) == {"fresh harbour note", "quokka of another project"}
    assert indexed(engine, "quokka") == 1 and indexed(engine, "harbour") == 1
    assert memory.prune_expired() == 0
    assert other.prune_expired() == 1
    assert indexed(engine, "quokka") == 0
    if engine.dialect.name == "sqlite":
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO tiermem_layer_item_fts(tiermem_layer_item_fts, rank) "
                "VALUES ('integrity-check', 1)"
            )


def test_limit_counts_sessions_first_then_items_in_batches(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """``limit`` bounds sessions and items together, sessions first, items oldest first;
    each batch of ``batch_size`` items is a transaction with its own signal and progress."""
    memory = make_memory(config=EVERY_LAYER)
    start, layers = clock.now, memory.layers("s")
    for days in (50, 45):
        at(clock, start - timedelta(days=days))
        memory.add_user_message(f"idle {days}", "x")
    for days in (44, 43, 42, 41):
        at(clock, start - timedelta(days=days))
        layers.append("episodic", f"idle {days} days")
    at(clock, start)
    assert memory.prune_expired(limit=3, dry_run=True) == 3
    assert memory.prune_expired(limit=3) == 3
    assert memory.list_sessions() == []
    assert sorted(stored(memory)) == ["idle 41 days", "idle 42 days", "idle 43 days"]
    progress: list[tuple[int, int]] = []
    recorder = SignalRecorder(memory)
    with recorder.recording():
        removed = memory.prune_expired(batch_size=2, progress=lambda *p: progress.append(p))
    assert removed == 3 and stored(memory) == {}
    assert [len(kw["item_ids"]) for kw in recorder.of("pruned")] == [2, 1]
    assert progress == [(2, 3), (3, 3)]


def test_recalculate_tiers_stores_item_tiers_in_batches(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """recalculate_tiers stores each item's tier by its last access (sessions and items
    counted in its result and progress); a future access is clamped to now."""
    memory = make_memory(config=EVERY_LAYER)
    start, layers = clock.now, memory.layers("t")
    memory.add_user_message("session", "x")
    for label, age in (
        ("400 days", timedelta(days=400)),
        ("10 days", timedelta(days=10)),
        ("5 hours", timedelta(hours=5)),
        ("10 minutes", timedelta(minutes=10)),
        ("future", -timedelta(days=2)),
    ):
        at(clock, start - age)
        layers.append("episodic", f"item {label}")
    at(clock, start + timedelta(hours=2))
    progress: list[tuple[int, int]] = []
    changed = memory.recalculate_tiers(batch_size=2, progress=lambda *p: progress.append(p))
    assert changed == 1 + 4  # the session is RECENT now; the future item stays ACTIVE
    tiers = {text: row[1] for text, row in stored(memory).items()}
    assert tiers == {
        "item 400 days": "expired",
        "item 10 days": "archived",
        "item 5 hours": "recent",
        "item 10 minutes": "recent",
        "item future": "active",
    }
    assert stored(memory)["item future"][2].replace(tzinfo=None) == clock.now.replace(tzinfo=None)
    assert progress == [(1, 6), (3, 6), (5, 6), (6, 6)]
    assert memory.recalculate_tiers() == 0
    stats = memory.get_tier_stats()
    assert stats == TierStats(1, 0, 1, 0, 0, 5, 1, 2, 1, 1)


def test_async_twins_handle_items_too(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """arecalculate_tiers, aget_tier_stats and aprune_expired include layer items."""
    memory = make_memory(config=EVERY_LAYER)
    seed(memory, clock)

    async def run() -> tuple[int, TierStats, int]:
        return (
            await memory.arecalculate_tiers(),
            await memory.aget_tier_stats(),
            await memory.aprune_expired(),
        )

    changed, stats, pruned = asyncio.run(run())
    assert changed == 4 and pruned == 4
    assert (stats.items, stats.expired_items, stats.active_items) == (4, 3, 1)


def test_expired_items_are_never_returned(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """Past expired_after no search, match, recent or recall returns an item, and asking
    does not revive it; exactly expired_after old is still returned."""
    memory = make_memory(config=EVERY_LAYER)
    layers = memory.layers("r")
    start = clock.now
    at(clock, start - EXPIRY)
    layers.learn("kept", "walrus edge")
    layers.append("episodic", "walrus edge event")
    layers.add_rule("walrus edge", "keep")
    at(clock, start - EXPIRY - timedelta(microseconds=1))
    layers.learn("gone", "walrus past")
    layers.append("episodic", "walrus past event")
    layers.add_rule("walrus past", "drop")
    at(clock, start)
    assert layers.recall("gone") is None
    assert [hit.item.content for hit in layers.search("episodic", "walrus")] == [
        "walrus edge event"
    ]
    assert [rule.condition for rule in layers.match_rules("walrus")] == ["walrus edge"]
    assert [item.key for item in layers.recent("semantic")] == ["kept"]
    # The reads above refreshed the edge items; the expired ones stayed expired.
    assert layers.recall("kept") is not None
    assert memory.prune_expired() == 3
    assert sorted(stored(memory)) == ["keep", "walrus edge", "walrus edge event"]


def test_compaction_leaves_expired_items_to_pruning(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """compact() folds only items that are not expired: an expired event is never part
    of (nor revived by) a summary."""
    memory = make_memory(config=EVERY_LAYER, summarizer=FakeSummarizer())
    layers = memory.layers("c")
    start = clock.now
    at(clock, start - timedelta(days=400))
    layers.append("episodic", "ancient event " + "with many words " * 20)
    at(clock, start)
    for n in range(4):
        layers.append("episodic", f"event {n} " + "with many words " * 20)
    result = layers.compact("episodic", keep_last=1)
    assert result.summary is not None and result.summary.memory_tier == "active"
    assert result.summary.metadata["summarized_items"] == 3
    assert "ancient" not in result.summary.content
    assert memory.prune_expired() == 1


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_zero_limit_deletes_nothing(
    make_memory: MemoryFactory, clock: ManualClock, dry_run: bool
) -> None:
    """limit=0 touches neither sessions nor items."""
    memory = make_memory(config=EVERY_LAYER)
    seed(memory, clock)
    assert memory.prune_expired(limit=0, dry_run=dry_run) == 0
    assert len(stored(memory)) == 4


def test_learning_an_expired_key_starts_a_new_fact(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """learn() over a fact that had expired stores a new fact (created now, never
    accessed); over a live one it replaces the value and counts an access."""
    memory = make_memory(config=EVERY_LAYER)
    layers = memory.layers("k")
    start = clock.now
    at(clock, start - timedelta(days=400))
    layers.learn("old", "stale value")
    at(clock, start - timedelta(days=1))
    layers.learn("live", "first value")
    at(clock, start)
    renewed = layers.learn("old", "new value")
    assert (renewed.created_at, renewed.access_count, renewed.value) == (start, 0, "new value")
    replaced = layers.learn("live", "second value")
    assert replaced.created_at == start - timedelta(days=1) and replaced.access_count == 1
    assert memory.prune_expired() == 0
    assert {fact.key for fact in map(layers.recall, ("old", "live")) if fact} == {"old", "live"}
