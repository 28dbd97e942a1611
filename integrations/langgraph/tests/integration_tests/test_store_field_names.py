"""Filters find fields by any name on both backends: non-ASCII names (``città``,
``名前``), names with backslashes or control characters, and (where the database can
address them) double quotes; on SQLite whether the document's JSON text escapes them
or not."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
import sqlalchemy as sa
from tiermem.errors import InvalidArgument

from tiermem_langgraph import TieredStore

VALUE: dict[str, Any] = {
    "città": "Roma",
    "名前": "花子",
    "🙂": 1,
    "profil": {"größe": 2**64 + 1, "étiquettes": ["a", "ü"], "straße": None},
    "back\\slash": "b",
    "tab\tkey": "t",
}


def _keys(store: TieredStore, spec: dict[str, Any]) -> list[str]:
    return [item.key for item in store.search(("u",), filter=spec)]


def _assert_found_by_every_name(store: TieredStore) -> None:
    matching: list[dict[str, Any]] = [
        {"città": "Roma"},
        {"名前": "花子"},
        {"名前": {"$gte": "花"}},
        {"🙂": 1},
        {"🙂": {"$lt": 2}},
        {"profil.größe": 2**64 + 1},
        {"profil.größe": {"$gt": 2**64}},
        {"profil.étiquettes": ["a", "ü"]},
        {"profil": {"étiquettes": ["a", "ü"]}},
        {"profil.straße": None},
        {"back\\slash": "b"},
        {"tab\tkey": "t"},
        {"città": {"$ne": "Milano"}},
    ]
    for spec in matching:
        assert _keys(store, spec) == ["k"], spec
    missing: list[dict[str, Any]] = [
        {"città": "Milano"},
        {"名前": {"$ne": "花子"}},
        {"profil.größe": 2**64},
        {"profil.étiquettes": ["a"]},
        {"cittá": "Roma"},  # another accent: another name
    ]
    for spec in missing:
        assert _keys(store, spec) == [], spec


def test_filters_find_fields_by_any_name(store: TieredStore) -> None:
    """Equality, ranges, lists, objects, null and $ne on non-ASCII names, names with
    a backslash or a tab, nested, on both backends."""
    store.put(("u",), "k", VALUE)
    store.put(("u",), "other", {"città": "Milano", "名前": "太郎"})
    assert _keys(store, {"città": "Milano"}) == ["other"]
    assert _keys(store, {"名前": "太郎"}) == ["other"]
    store.delete(("u",), "other")
    _assert_found_by_every_name(store)


def test_names_are_found_in_documents_written_without_escapes(
    store: TieredStore, backend: str
) -> None:
    """A document whose JSON text holds its names as they are (another writer, or a
    serializer without ASCII escapes) is found by the same filters."""
    store.put(("u",), "k", {"v": 0})
    engine = store.memory.engine
    cast = "CAST(:text AS jsonb)" if backend == "postgres" else ":text"
    with engine.begin() as conn:
        conn.execute(
            sa.text(f"UPDATE tiermem_document SET value = {cast} WHERE key = 'k'"),
            {"text": json.dumps(VALUE, ensure_ascii=False)},
        )
    _assert_found_by_every_name(store)


def test_a_name_with_a_double_quote(store: TieredStore, backend: str) -> None:
    """A name holding a double quote is found on PostgreSQL and SQLite 3.45+; an older
    SQLite cannot address it and says so (InvalidArgument), never a silent miss."""
    store.put(("u",), "k", {'say "hi"': 1, "n": 2})
    if backend == "sqlite" and sqlite3.sqlite_version_info < (3, 45):
        with pytest.raises(InvalidArgument, match="double quote"):
            store.search(("u",), filter={'say "hi"': 1})
        return
    assert _keys(store, {'say "hi"': 1}) == ["k"]
    assert _keys(store, {'say "hi"': {"$ne": 1}}) == []
