"""Behaviours LangGraph's store tests check in ways the conformance suite cannot run
on TieredStore (SQL on their own tables), and the deliberate differences from
LangGraph's stores that those tests meet, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from tiermem.errors import InvalidArgument
from tiermem.testing import ManualClock

from tiermem_langgraph import TieredStore

StoreFactory = Callable[..., TieredStore]


@pytest.mark.parametrize("omit", [True, False])
def test_ttl_config_accepts_omit_expired(
    make_store: StoreFactory, clock: ManualClock, omit: bool
) -> None:
    """TTLConfig's omit_expired is accepted as LangGraph's stores accept it; expired
    items are never returned whatever it says, and it must be a bool."""
    store = make_store(ttl={"default_ttl": 1, "omit_expired": omit})
    store.put(("o",), "k", {"v": 1})
    clock.advance(minutes=2)
    assert store.get(("o",), "k", refresh_ttl=False) is None
    assert store.search(("o",)) == [] and store.list_namespaces() == []
    with pytest.raises(InvalidArgument):
        make_store(ttl={"omit_expired": "yes"})


def test_expired_items_never_take_a_page_slot(store: TieredStore, clock: ManualClock) -> None:
    """An expired item is left out before limit and offset apply: it never takes a
    slot of a page, so the pages hold every live item, newest first."""
    for key, ttl in [("c", None), ("b", None), ("expired", 1), ("a", None)]:
        store.put(("page",), key, {"k": key}, ttl=ttl)
        clock.advance(seconds=1)
    clock.advance(minutes=2)
    first = store.search(("page",), limit=2, refresh_ttl=False)
    second = store.search(("page",), limit=2, offset=2, refresh_ttl=False)
    assert [item.key for item in first] == ["a", "b"]
    assert [item.key for item in second] == ["c"]


def test_reads_refresh_when_refresh_on_read_is_unset(
    make_store: StoreFactory, clock: ManualClock
) -> None:
    """With a TTLConfig that leaves refresh_on_read unset, a read restarts the time
    to live (TTLConfig's documented default, as PostgresStore and InMemoryStore do)."""
    store = make_store(ttl={"default_ttl": 5})
    store.put(("r",), "k", {"v": 1})
    clock.advance(minutes=4)
    assert store.get(("r",), "k") is not None  # refreshed: lives to minute 9
    clock.advance(minutes=4)
    assert store.get(("r",), "k", refresh_ttl=False) is not None
    clock.advance(minutes=2)
    assert store.get(("r",), "k") is None


async def test_sync_methods_work_inside_a_running_loop(store: TieredStore) -> None:
    """The sync methods answer when called on the event loop's thread (blocking it),
    as they do anywhere else: one store serves sync and async code."""
    store.put(("loop",), "k", {"v": 1})
    item = store.get(("loop",), "k")
    assert item is not None and item.value == {"v": 1}
    assert [i.key for i in store.search(("loop",))] == ["k"]
    assert store.list_namespaces() == [("loop",)]
    store.delete(("loop",), "k")
    assert await store.aget(("loop",), "k") is None
