"""Time to live and tiermem's access tiers of TieredStore items, on SQLite and
PostgreSQL: expiry hides items, reads refresh it, the sweep and prune_expired
delete them, and tier statistics and recalculation count them."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from tiermem import MemoryTier
from tiermem.errors import InvalidArgument
from tiermem.testing import ManualClock

from tiermem_langgraph import TieredStore

StoreFactory = Callable[..., TieredStore]


def test_expired_items_are_never_returned(store: TieredStore, clock: ManualClock) -> None:
    """Once its time to live passes, an item is gone from get, search and the
    namespace listing, while an item without one stays."""
    store.put(("t", "a"), "short", {"text": "brief note"}, ttl=1)
    store.put(("t", "b"), "forever", {"text": "lasting note"})
    clock.advance(seconds=59)
    assert store.get(("t", "a"), "short", refresh_ttl=False) is not None
    clock.advance(seconds=2)
    assert store.get(("t", "a"), "short") is None
    assert [i.key for i in store.search(("t",))] == ["forever"]
    assert [i.key for i in store.search(("t",), query="note")] == ["forever"]
    assert store.list_namespaces() == [("t", "b")]
    assert store.item_state(("t", "a"), "short") is None


def test_reads_refresh_the_time_to_live(store: TieredStore, clock: ManualClock) -> None:
    """get and search restart an item's time to live unless told not to."""
    store.put(("r",), "k", {"text": "keep me"}, ttl=10)
    clock.advance(minutes=8)
    assert store.get(("r",), "k") is not None  # refreshed: lives to minute 18
    clock.advance(minutes=8)
    assert store.search(("r",), query="keep")[0].key == "k"  # refreshed: to minute 26
    clock.advance(minutes=8)
    assert store.get(("r",), "k", refresh_ttl=False) is not None
    clock.advance(minutes=3)
    assert store.get(("r",), "k") is None


def test_ttl_config_defaults(make_store: StoreFactory, clock: ManualClock) -> None:
    """default_ttl applies to puts that give none; refresh_on_read=False makes reads
    leave the expiry alone; an explicit ttl=None means no expiry."""
    store = make_store(ttl={"default_ttl": 5, "refresh_on_read": False})
    store.put(("c",), "default", {"v": 1})
    store.put(("c",), "never", {"v": 2}, ttl=None)
    clock.advance(minutes=4)
    assert store.get(("c",), "default") is not None
    clock.advance(minutes=2)
    assert store.get(("c",), "default") is None
    assert store.get(("c",), "never") is not None
    with pytest.raises(InvalidArgument):
        make_store(ttl={"default_ttl": -1})
    with pytest.raises(InvalidArgument):
        store.put(("c",), "bad", {"v": 3}, ttl=0)


def test_sweep_and_prune_delete_expired_items(make_store: StoreFactory, clock: ManualClock) -> None:
    """sweep_ttl and the memory's prune_expired delete the items whose time to live
    passed (and only those), and count them."""
    store = make_store()
    for i in range(3):
        store.put(("s",), f"old{i}", {"v": i}, ttl=1)
    store.put(("s",), "young", {"v": 9}, ttl=60)
    store.put(("s",), "plain", {"v": 10})
    clock.advance(minutes=2)
    assert store.memory.get_tier_stats().expired_documents == 3
    assert store.memory.prune_expired(dry_run=True) == 3
    assert store.sweep_ttl() == 3
    assert store.sweep_ttl() == 0
    clock.advance(minutes=60)
    assert store.memory.prune_expired() == 1
    stats = store.memory.get_tier_stats()
    assert stats.documents == 1 and stats.expired_documents == 0


async def test_async_sweep(make_store: StoreFactory, clock: ManualClock) -> None:
    """asweep_ttl deletes what sweep_ttl would."""
    store = make_store()
    await store.aput(("s",), "k", {"v": 1}, ttl=1)
    clock.advance(minutes=2)
    assert await store.asweep_ttl() == 1
    assert await store.aget(("s",), "k") is None


def test_sweeper_thread_runs_and_stops(make_store: StoreFactory, clock: ManualClock) -> None:
    """start_ttl_sweeper sweeps on its interval until stop_ttl_sweeper."""
    store = make_store(ttl={"sweep_interval_minutes": 0.001})  # every 60 ms
    store.put(("s",), "k", {"v": 1}, ttl=1)
    clock.advance(minutes=2)
    future = store.start_ttl_sweeper()
    deadline = time.monotonic() + 10
    while store.memory.get_tier_stats().documents and time.monotonic() < deadline:
        time.sleep(0.02)
    assert store.memory.get_tier_stats().documents == 0
    assert not future.done()
    assert store.stop_ttl_sweeper(timeout=5)
    assert future.result(timeout=5) is None


def test_items_carry_tiers(store: TieredStore, clock: ManualClock) -> None:
    """Every item has tiermem's tier, access count and last access: reads count as
    accesses, age moves it ACTIVE -> RECENT -> ARCHIVED (never EXPIRED without a time
    to live), and get_tier_stats counts it."""
    store.put(("m",), "k", {"text": "remember this"})
    state = store.item_state(("m",), "k")
    assert state is not None
    assert (state.tier, state.access_count, state.last_accessed) == (
        MemoryTier.ACTIVE,
        1,
        clock.now,
    )
    store.get(("m",), "k")
    store.search(("m",), query="remember")
    state = store.item_state(("m",), "k")
    assert state is not None and state.access_count == 3
    assert store.item_state(("m",), "k") == state  # reading the state is no access
    clock.advance(hours=2)
    assert store.memory.get_tier_stats().recent_documents == 1
    state = store.item_state(("m",), "k")
    assert state is not None and state.tier is MemoryTier.RECENT
    clock.advance(days=400)
    state = store.item_state(("m",), "k")
    assert state is not None and state.tier is MemoryTier.ARCHIVED
    stats = store.memory.get_tier_stats()
    assert (stats.documents, stats.archived_documents, stats.expired_documents) == (1, 1, 0)
    assert store.memory.prune_expired() == 0
    store.get(("m",), "k")
    state = store.item_state(("m",), "k")
    assert state is not None and state.tier is MemoryTier.ACTIVE and state.access_count == 4


def test_recalculate_tiers_stores_document_tiers(store: TieredStore, clock: ManualClock) -> None:
    """recalculate_tiers writes the tier each document's last access (or passed time to
    live) gives, and counts the changed ones; a second run changes nothing."""
    store.put(("r",), "old", {"v": 1})
    store.put(("r",), "ttl", {"v": 2}, ttl=30)
    clock.advance(hours=2)
    store.put(("r",), "new", {"v": 3})
    assert store.memory.recalculate_tiers() == 2  # old and ttl: RECENT and EXPIRED
    assert store.memory.recalculate_tiers() == 0
    stats = store.memory.get_tier_stats()
    assert (stats.active_documents, stats.recent_documents, stats.expired_documents) == (1, 1, 1)


async def test_async_item_state(store: TieredStore) -> None:
    """aitem_state reads what item_state reads."""
    await store.aput(("a",), "k", {"v": 1})
    assert await store.aitem_state(("a",), "k") == store.item_state(("a",), "k")
    assert await store.aitem_state(("a",), "missing") is None
