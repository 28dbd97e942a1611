"""The behaviours LangGraph's own store tests check, on SQLite and PostgreSQL:
put/get/delete, batches, namespace validation, listing namespaces and search
pagination (written for TieredStore, not copied)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)
from tiermem.errors import InvalidArgument
from tiermem.testing import ManualClock

from tiermem_langgraph import TieredStore

StoreFactory = Callable[..., TieredStore]


def test_put_get_update_delete(store: TieredStore, clock: ManualClock) -> None:
    """An item reads back as written; an update keeps created_at and moves
    updated_at; a delete makes it unreadable."""
    store.put(("docs", "u1"), "k", {"text": "first", "n": 1})
    created = store.get(("docs", "u1"), "k")
    assert created is not None
    assert created.value == {"text": "first", "n": 1}
    assert created.namespace == ("docs", "u1") and created.key == "k"
    assert created.created_at == created.updated_at == clock.now
    clock.advance(minutes=5)
    store.put(("docs", "u1"), "k", {"text": "second"})
    updated = store.get(("docs", "u1"), "k")
    assert updated is not None and updated.value == {"text": "second"}
    assert updated.created_at == created.created_at
    assert updated.updated_at == clock.now
    store.delete(("docs", "u1"), "k")
    assert store.get(("docs", "u1"), "k") is None
    assert store.get(("docs", "missing"), "k") is None


def test_batch_results_follow_the_ops(store: TieredStore) -> None:
    """A batch answers each op in order; its reads see the store before its writes,
    and of two writes to one item the last wins."""
    store.put(("a",), "old", {"v": 0})
    results = store.batch(
        [
            PutOp(("a",), "new", {"v": 1}),
            GetOp(("a",), "old"),
            GetOp(("a",), "new"),
            SearchOp(("a",), None, 10, 0),
            ListNamespacesOp(None, None, 10, 0),
            PutOp(("a",), "new", {"v": 2}),
        ]
    )
    assert results[0] is None and results[5] is None
    assert results[1] is not None and results[1].value == {"v": 0}  # type: ignore[union-attr]
    assert results[2] is None
    assert [item.key for item in results[3]] == ["old"]  # type: ignore[union-attr]
    assert results[4] == [("a",)]
    after = store.get(("a",), "new")
    assert after is not None and after.value == {"v": 2}


async def test_async_batch_matches_sync(store: TieredStore) -> None:
    """abatch runs the same operation as batch and gives the same results."""
    ops = [
        PutOp(("p", "x"), "k1", {"t": "alpha beta", "n": 1}),
        PutOp(("p", "y"), "k2", {"t": "beta gamma", "n": 2}),
    ]
    await store.abatch(ops)
    reads: list[Op] = [
        GetOp(("p", "x"), "k1"),
        SearchOp(("p",), {"n": {"$gte": 2}}, 10, 0),
        SearchOp(("p",), None, 10, 0, "gamma"),
        ListNamespacesOp((MatchCondition("prefix", ("p",)),), None, 10, 0),
    ]
    async_results = await store.abatch(reads)
    sync_results = store.batch(reads)
    assert [_plain(r) for r in async_results] == [_plain(r) for r in sync_results]
    assert await store.aget(("p", "y"), "k2") == store.get(("p", "y"), "k2")
    await store.adelete(("p", "y"), "k2")
    assert await store.aget(("p", "y"), "k2") is None


def _plain(result: object) -> object:
    """A result without the access-dependent parts, for comparison."""
    if isinstance(result, list):
        return [_plain(r) for r in result]
    if hasattr(result, "dict"):
        return result.dict()
    return result


@pytest.mark.parametrize("namespace", [("bad.label",), ("ok", ""), (7,)])
def test_invalid_labels_are_rejected(store: TieredStore, namespace: tuple[object, ...]) -> None:
    """Labels with a period, empty labels and labels that are not strings are refused
    by every method, and a batch holding one writes nothing."""
    ns: tuple[str, ...] = namespace  # type: ignore[assignment]
    with pytest.raises(InvalidNamespaceError):
        store.put(ns, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.get(ns, "k")
    with pytest.raises(InvalidNamespaceError):
        store.delete(ns, "k")
    with pytest.raises(InvalidNamespaceError):
        store.search(ns)
    with pytest.raises(InvalidNamespaceError):
        store.list_namespaces(prefix=ns)
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("fine",), "k", {"v": 1}), PutOp(ns, "k", {"v": 1})])
    assert store.get(("fine",), "k") is None


def test_put_namespace_rules(store: TieredStore) -> None:
    """A put needs a non-empty namespace whose root is not "langgraph" and a JSON
    mapping as value; a refused put writes nothing."""
    with pytest.raises(InvalidNamespaceError):
        store.put((), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(InvalidArgument):
        store.put(("x",), "k", {"v": object()})
    with pytest.raises(InvalidArgument):
        store.put(("x",), "k", {"v": float("nan")})
    assert store.list_namespaces() == []


def test_wildcard_labels_are_plain_text_in_search(store: TieredStore) -> None:
    """A search prefix matches labels literally: "%", "_" and "*" are no patterns, and
    a prefix never matches a longer label that merely starts with it."""
    store.put(("tenant", "a_%"), "k", {"v": 1})
    store.put(("tenant", "ab"), "k", {"v": 2})
    store.put(("tenant2",), "k", {"v": 3})
    assert [i.value["v"] for i in store.search(("tenant", "a_%"))] == [1]
    assert sorted(i.value["v"] for i in store.search(("tenant",))) == [1, 2]
    assert store.search(("tenant", "*")) == []
    assert len(store.search(())) == 3


def test_list_namespaces(store: TieredStore) -> None:
    """Namespaces list sorted, by prefix, suffix and "*" wildcards, cut to max_depth
    (deduplicated), with limit and offset."""
    for ns in [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "x", "c"),
        ("b", "c"),
        ("users", "1", "prefs"),
        ("users", "2", "prefs"),
    ]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces(prefix=("a",)) == [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "x", "c"),
    ]
    assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("a", "x", "c"), ("b", "c")]
    assert store.list_namespaces(prefix=("a", "*", "c")) == [("a", "b", "c"), ("a", "x", "c")]
    assert store.list_namespaces(prefix=("users",), suffix=("prefs",)) == [
        ("users", "1", "prefs"),
        ("users", "2", "prefs"),
    ]
    assert store.list_namespaces(suffix=("*", "prefs")) == [
        ("users", "1", "prefs"),
        ("users", "2", "prefs"),
    ]
    assert store.list_namespaces(max_depth=2) == [
        ("a", "b"),
        ("a", "x"),
        ("b", "c"),
        ("users", "1"),
        ("users", "2"),
    ]
    assert store.list_namespaces(max_depth=1, limit=2, offset=1) == [("b",), ("users",)]
    assert store.list_namespaces(prefix=("nothing",)) == []


def test_search_pages_newest_first(store: TieredStore, clock: ManualClock) -> None:
    """Without a query, search returns the most recently updated items first, paged
    by limit and offset, with no score."""
    for i in range(7):
        store.put(("page",), f"k{i}", {"i": i})
        clock.advance(seconds=1)
    first = store.search(("page",), limit=3)
    second = store.search(("page",), limit=3, offset=3)
    rest = store.search(("page",), limit=3, offset=6)
    assert [i.key for i in first + second + rest] == [f"k{i}" for i in reversed(range(7))]
    assert all(item.score is None for item in first)
    with pytest.raises(InvalidArgument):
        store.search(("page",), limit=-1)


def test_projects_do_not_share_items(make_store: StoreFactory) -> None:
    """Two stores of different tiermem projects on one database see only their own items."""
    one, two = make_store(project="one"), make_store(project="two")
    one.put(("ns",), "k", {"owner": "one"})
    assert two.get(("ns",), "k") is None
    assert two.search(("ns",)) == [] and two.list_namespaces() == []
    item = one.get(("ns",), "k")
    assert item is not None and item.value == {"owner": "one"}


def test_from_url_owns_its_memory(url: str) -> None:
    """from_url makes a store on its own memory, closed with the store."""
    with TieredStore.from_url(url, project="p") as store:
        store.put(("x",), "k", {"v": 1})
        assert store.memory.project == "p"
    with TieredStore.from_url(url, project="p") as again:
        item = again.get(("x",), "k")
        assert item is not None and item.value == {"v": 1}
