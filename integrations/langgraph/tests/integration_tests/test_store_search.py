"""Filters (evaluated in SQL) and queries (full-text and embeddings) of
TieredStore.search, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from tiermem.errors import InvalidArgument

from tiermem_langgraph import TieredStore

StoreFactory = Callable[..., TieredStore]


ITEMS: dict[str, dict[str, Any]] = {
    "a": {"n": 1, "s": "apple", "ok": True, "tags": ["x", "y"], "meta": {"lang": "en", "v": 2}},
    "b": {"n": 5, "s": "banana", "ok": False, "tags": ["y"], "meta": {"lang": "fr", "v": 7}},
    "c": {"n": 10.5, "s": "cherry", "ok": True, "meta": {"lang": "en"}, "none": None},
    "d": {"n": "5", "s": "date"},
}


@pytest.fixture(name="filled")
def fixture_filled(store: TieredStore) -> TieredStore:
    """A store holding ITEMS under ("f",)."""
    for key, value in ITEMS.items():
        store.put(("f",), key, value)
    return store


def _keys(store: TieredStore, spec: dict[str, Any]) -> list[str]:
    return sorted(item.key for item in store.search(("f",), filter=spec, limit=100))


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"n": 5}, ["b"]),  # the string "5" is not the number 5
        ({"n": "5"}, ["d"]),
        ({"n": {"$eq": 1}}, ["a"]),
        ({"n": {"$ne": 5}}, ["a", "c", "d"]),
        ({"n": {"$gt": 1}}, ["b", "c"]),
        ({"n": {"$gte": 1}}, ["a", "b", "c"]),
        ({"n": {"$lt": 10.5}}, ["a", "b"]),
        ({"n": {"$lte": 10.5, "$gt": 1}}, ["b", "c"]),
        ({"s": {"$gt": "b"}}, ["b", "c", "d"]),
        ({"s": {"$lte": "banana"}}, ["a", "b"]),
        ({"ok": True}, ["a", "c"]),
        ({"ok": False}, ["b"]),
        ({"ok": {"$ne": True}}, ["b", "d"]),  # absent fields differ from every value
        ({"meta.lang": "en"}, ["a", "c"]),
        ({"meta.v": {"$gt": 3}}, ["b"]),
        ({"meta": {"lang": "en"}}, ["a", "c"]),  # objects match as subsets
        ({"meta": {"lang": "en", "v": 2}}, ["a"]),
        ({"tags": ["x", "y"]}, ["a"]),  # lists match element by element
        ({"tags": ["y"]}, ["b"]),
        ({"none": None}, ["a", "b", "c", "d"]),  # null and absent alike
        ({"s": {"$ne": None}}, ["a", "b", "c", "d"]),
        ({"meta.lang": "en", "n": {"$gt": 5}}, ["c"]),
        ({"missing.path": 1}, []),
    ],
)
def test_filter_operators(filled: TieredStore, spec: dict[str, Any], expected: list[str]) -> None:
    """Each filter keeps exactly the items LangGraph's operators select."""
    assert _keys(filled, spec) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"s": "banana\x00"}, []),
        ({"s": {"$ne": "banana\x00"}}, ["a", "b", "c", "d"]),
        ({"s": {"$gt": "banana\x00"}}, ["c", "d"]),
        ({"s": {"$gte": "banana\x00x"}}, ["c", "d"]),
        ({"s": {"$lt": "banana\x00"}}, ["a", "b"]),
        ({"s": {"$lte": "b\x00"}}, ["a"]),
    ],
)
def test_filter_strings_with_nul(
    filled: TieredStore, spec: dict[str, Any], expected: list[str]
) -> None:
    """A filter string holding NUL (which stored strings never hold on PostgreSQL) is
    compared byte-wise on both backends, NUL sorting first, and never raises."""
    assert _keys(filled, spec) == expected


@pytest.mark.parametrize(
    "spec",
    [{"n": {"$in": [1]}}, {"n": {"$gt": [1]}}, {"a..b": 1}, {"n": {"$gt": True}}],
)
def test_bad_filters_are_refused(filled: TieredStore, spec: dict[str, Any]) -> None:
    """Unknown operators, uncomparable operands and empty path segments raise
    InvalidArgument before any SQL runs."""
    with pytest.raises(InvalidArgument):
        filled.search(("f",), filter=spec)


def test_query_ranks_word_matches(store: TieredStore) -> None:
    """A query returns the items holding its words, the best match first, each with
    a score; items holding none of them are left out."""
    store.put(("q",), "both", {"text": "green tea and jasmine tea"})
    store.put(("q",), "one", {"text": "black tea with milk"})
    store.put(("q",), "none", {"text": "espresso"})
    found = store.search(("q",), query="jasmine tea")
    assert [item.key for item in found] == ["both", "one"]
    assert all(item.score is not None for item in found)
    assert found[0].score is not None and found[1].score is not None
    assert found[0].score > found[1].score
    assert store.search(("q",), query="Espresso!")[0].key == "none"


def test_query_with_filter_and_prefix(store: TieredStore) -> None:
    """A query combines with the namespace prefix and the filter."""
    store.put(("u", "1"), "a", {"text": "likes hiking", "kind": "pref"})
    store.put(("u", "1"), "b", {"text": "hiking boots size 42", "kind": "fact"})
    store.put(("u", "2"), "c", {"text": "likes hiking", "kind": "pref"})
    found = store.search(("u", "1"), query="hiking", filter={"kind": "pref"})
    assert [(item.namespace, item.key) for item in found] == [(("u", "1"), "a")]


def test_index_controls_what_words_find(store: TieredStore) -> None:
    """index=False makes an item unsearchable by words (still readable and
    filterable); index=[fields] searches only those fields."""
    store.put(("i",), "hidden", {"text": "secret plan"}, index=False)
    store.put(("i",), "title", {"title": "plan", "body": "walrus"}, index=["title"])
    assert [i.key for i in store.search(("i",), query="plan")] == ["title"]
    assert store.search(("i",), query="walrus") == []
    assert store.search(("i",), query="secret") == []
    assert [i.key for i in store.search(("i",), filter={"text": "secret plan"})] == ["hidden"]


def test_query_without_words_lists_everything(store: TieredStore) -> None:
    """A query with no letters or digits is no query: every item, unscored."""
    store.put(("w",), "k", {"text": "anything"})
    found = store.search(("w",), query="?! ...")
    assert [item.key for item in found] == ["k"] and found[0].score is None


VOCABULARY = ("cat", "dog", "fish", "bird")


def _embed(texts: Sequence[str]) -> list[list[float]]:
    """Counts of each vocabulary word: a deterministic embedding for tests."""
    return [[float(text.lower().count(word)) for word in VOCABULARY] for text in texts]


def test_embeddings_rank_by_cosine(make_store: StoreFactory) -> None:
    """With an embedder, a query ranks items by cosine similarity of their indexed
    fields (the best field of each), sets the score, and lists unembedded items last."""
    store = make_store(index={"embed": _embed, "dims": 4, "fields": ["text", "extra"]})
    store.put(("e",), "cat", {"text": "cat cat", "extra": "bird"})
    store.put(("e",), "dog", {"text": "dog"})
    store.put(("e",), "mixed", {"text": "cat dog"})
    store.put(("e",), "plain", {"text": "cat"}, index=False)
    found = store.search(("e",), query="cat")
    assert [item.key for item in found] == ["cat", "mixed", "dog", "plain"]
    assert found[0].score == pytest.approx(1.0)
    assert found[1].score == pytest.approx(2**-0.5, rel=1e-5)
    assert found[2].score == pytest.approx(0.0)
    assert found[3].score is None
    assert [item.key for item in store.search(("e",), query="bird", limit=1)] == ["cat"]


async def test_embeddings_async(make_store: StoreFactory) -> None:
    """asearch and aput use the same embeddings as their sync twins."""
    store = make_store(index={"embed": _embed, "dims": 4})
    await store.aput(("e",), "fish", {"text": "fish"})
    await store.aput(("e",), "dog", {"text": "dog"})
    found = await store.asearch(("e",), query="fish")
    assert found[0].key == "fish" and found[0].score == pytest.approx(1.0)
    assert [i.key for i in store.search(("e",), query="fish")] == [i.key for i in found]


def test_wrong_dimensions_write_nothing(make_store: StoreFactory) -> None:
    """An embedder whose vectors do not have dims dimensions fails the put; nothing
    is written."""
    store = make_store(index={"embed": _embed, "dims": 3})
    with pytest.raises(InvalidArgument):
        store.put(("e",), "k", {"text": "cat"})
    assert store.get(("e",), "k") is None


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        ({"v": 1}, {"v": True}, ["bool"]),
        ({"v": True}, {"v": 1}, ["int"]),
        ({"v": {"$gt": 1}}, {"v": {"$gt": 1.5}}, ["two"]),
        ({"v": "1"}, {"v": 1}, ["int"]),
    ],
)
def test_a_filter_used_before_does_not_answer_a_different_one(
    store: TieredStore, first: dict[str, Any], second: dict[str, Any], expected: list[str]
) -> None:
    """Filters that look alike (True and 1, 1 and 1.5, "1" and 1) each select their own
    documents, whichever was used first (their SQL is built once and reused)."""
    for key, value in (("bool", True), ("int", 1), ("two", 2), ("text", "1")):
        store.put(("alike",), key, {"v": value})
    store.search(("alike",), filter=first)
    assert sorted(item.key for item in store.search(("alike",), filter=second)) == expected
