"""Input neither backend can store or compare is ``InvalidArgument`` before anything
runs, never a raw ``UnicodeEncodeError``, ``OverflowError`` or ``RecursionError``
(nor a ``StorageError`` from one backend only), and a batch holding it writes
nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langgraph.store.base import ListNamespacesOp, MatchCondition, PutOp, SearchOp
from tiermem._storage.document_values import MAX_DEPTH, MAX_FILTER_INT_BITS
from tiermem.errors import InvalidArgument

from tiermem_langgraph import TieredStore

StoreFactory = Callable[..., TieredStore]


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


BAD_VALUES: dict[str, dict[str, Any]] = {
    "beyond a double": {"n": 10**400},
    "negative beyond a double": {"n": [1, -(10**309)]},
    "lone surrogate in a string": {"text": "caf\ud800"},
    "lone surrogate in a field name": {"\udfff": 1},
    "NUL in a string": {"text": "a\x00b"},
    "NUL in a field name": {"a\x00": 1},
    "nested past Python's recursion limit": _nested(5_000),
    "nested past the depth limit": _nested(MAX_DEPTH + 1),
}


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_put_refuses_a_value_no_backend_keeps(store: TieredStore, case: str) -> None:
    """Each bad value fails its batch with InvalidArgument; the good put before it in
    the same batch is not written."""
    with pytest.raises(InvalidArgument):
        store.batch([PutOp(("u",), "good", {"v": 1}), PutOp(("u",), "bad", BAD_VALUES[case])])
    assert store.get(("u",), "good") is None
    assert store.search(("u",)) == []


def test_the_deepest_allowed_value_is_stored(store: TieredStore) -> None:
    """A value nested exactly MAX_DEPTH levels is kept and read back."""
    value = _nested(MAX_DEPTH)
    store.put(("u",), "deep", value)
    item = store.get(("u",), "deep")
    assert item is not None and item.value == value


def test_numbers_a_double_holds_are_stored(store: TieredStore) -> None:
    """Integers near 2**1024 and the smallest float are kept."""
    value = {"big": 2**1023, "small": -(2**1023), "tiny": 5e-324, "close": 1.5}
    store.put(("u",), "n", value)
    item = store.get(("u",), "n")
    assert item is not None and item.value == value


@pytest.mark.parametrize(
    ("namespace", "key"),
    [(("caf\ud800",), "k"), (("u", "\udfff"), "k"), (("u",), "k\udc00"), (("u",), "k\x00")],
)
def test_labels_and_keys_neither_backend_keeps_are_refused(
    store: TieredStore, namespace: tuple[str, ...], key: str
) -> None:
    """Bad namespace labels and keys are InvalidArgument in put, get, delete and
    item_state, on both backends."""
    for call in (
        lambda: store.put(namespace, key, {"v": 1}),
        lambda: store.get(namespace, key),
        lambda: store.delete(namespace, key),
        lambda: store.item_state(namespace, key),
    ):
        with pytest.raises(InvalidArgument):
            call()
    assert store.list_namespaces() == []


@pytest.mark.parametrize(
    "op",
    [
        SearchOp(("caf\ud800",)),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("\ud800",)),)),
    ],
)
def test_reads_refuse_labels_that_are_not_text(store: TieredStore, op: Any) -> None:
    """A search prefix or a listing condition with a lone surrogate is InvalidArgument."""
    with pytest.raises(InvalidArgument):
        store.batch([op])


BAD_FILTERS: dict[str, dict[str, Any]] = {
    "an integer too wide to write": {"n": {"$gt": -(2 ** (MAX_FILTER_INT_BITS + 1))}},
    "lone surrogate operand": {"name": "\ud800"},
    "lone surrogate in a path": {"caf\ud800.x": 1},
    "lone surrogate in a nested name": {"a": {"\udc00": 1}},
    "NUL in a path": {"a\x00": 1},
    "nested past Python's recursion limit": {"a": _nested(5_000)},
}


@pytest.mark.parametrize("case", sorted(BAD_FILTERS))
def test_filters_refuse_what_no_document_holds(store: TieredStore, case: str) -> None:
    """Each bad filter is InvalidArgument, in search and as a raw batch op."""
    store.put(("u",), "k", {"n": 1, "name": "x", "a": {"b": 1}})
    with pytest.raises(InvalidArgument):
        store.search(("u",), filter=BAD_FILTERS[case])
    with pytest.raises(InvalidArgument):
        store.batch([PutOp(("u",), "j", {"v": 1}), SearchOp(("u",), filter=BAD_FILTERS[case])])
    assert store.get(("u",), "j") is None


def test_a_nul_in_a_filter_operand_matches_nothing(store: TieredStore) -> None:
    """A string with NUL is a valid operand: no stored string holds one."""
    store.put(("u",), "k", {"name": "a"})
    assert store.search(("u",), filter={"name": "a\x00"}) == []
    assert [item.key for item in store.search(("u",), filter={"name": {"$ne": "a\x00"}})] == ["k"]


@pytest.mark.parametrize("ttl", [10**400, 1e300, float("inf"), float("nan")])
def test_ttls_beyond_any_date_are_refused(make_store: StoreFactory, ttl: float) -> None:
    """A time to live no expiry date can hold is InvalidArgument at put and in the
    store's TTLConfig."""
    store = make_store()
    with pytest.raises(InvalidArgument):
        store.put(("u",), "k", {"v": 1}, ttl=ttl)
    assert store.get(("u",), "k") is None
    with pytest.raises(InvalidArgument):
        make_store(ttl={"default_ttl": ttl})


@pytest.mark.parametrize("interval", [10**400, 1e300, float("inf")])
def test_sweep_intervals_no_thread_can_wait_are_refused(
    make_store: StoreFactory, interval: float
) -> None:
    """An interval longer than a thread can wait is refused, not a sweeper thread that
    dies with OverflowError."""
    with pytest.raises(InvalidArgument):
        make_store(ttl={"sweep_interval_minutes": interval})
    with pytest.raises(InvalidArgument):
        make_store().start_ttl_sweeper(interval)


@pytest.mark.parametrize("name", ["limit", "offset"])
def test_counts_beyond_sql_integers_are_refused(store: TieredStore, name: str) -> None:
    """A limit or offset no SQL integer holds is InvalidArgument, not OverflowError
    (SQLite) or StorageError (PostgreSQL)."""
    too_many: dict[str, Any] = {name: 2**63}
    with pytest.raises(InvalidArgument):
        store.search(("u",), **too_many)
    with pytest.raises(InvalidArgument):
        store.list_namespaces(**too_many)
