"""The store's writes are in tiermem's change feed, committed with them."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from langgraph.store.base import PutOp
from tiermem.errors import TiermemError
from tiermem.testing import wait_for_feed

from tiermem_langgraph import TieredStore


def _document_events(store: TieredStore) -> list[tuple[str, dict[str, object]]]:
    wait_for_feed(store.memory)  # on PostgreSQL other clients' transactions may delay it
    events = store.memory.feed.follow(poll_interval=0.02, idle_timeout=0.05)
    return [(event.kind, event.payload) for event in events if event.kind.startswith("document:")]


def test_puts_and_deletes_have_events(url: str) -> None:
    """A put and a delete each leave an event naming the namespace and key; deleting a
    key that is not there leaves none."""
    with TieredStore.from_url(url) as store:
        store.put(("users", "ada"), "prefs", {"seat": "aisle"})
        store.delete(("users", "ada"), "prefs")
        store.delete(("users", "ada"), "never-stored")
        assert _document_events(store) == [
            ("document:put", {"namespace": ["users", "ada"], "key": "prefs"}),
            ("document:deleted", {"namespace": ["users", "ada"], "key": "prefs"}),
        ]


def test_a_failed_batch_leaves_no_event(url: str) -> None:
    """A batch that fails writes neither its documents nor their events."""
    with TieredStore.from_url(url) as store:
        bad = PutOp(("users", "ada"), "prefs", {"not json": object()})
        with pytest.raises(TiermemError):
            store.batch([PutOp(("users", "bob"), "prefs", {"seat": "window"}), bad])
        assert store.get(("users", "bob"), "prefs") is None
        assert _document_events(store) == []


def test_document_event_rows_keep_their_recorded_bytes(url: str) -> None:
    """The rows of ``document:put`` and ``document:deleted`` are exactly those
    recorded: kind, no session, the same JSON text."""
    with TieredStore.from_url(url) as store:
        store.put(("users", "ada"), "prefs", {"seat": "aisle"})
        store.put(("a", "b", "c"), "x", {"v": 1})
        store.delete(("users", "ada"), "prefs")
        with store.memory.engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT kind, session_id, payload FROM tiermem_event ORDER BY id")
            ).all()
    assert [tuple(row) for row in rows] == [
        ("document:put", None, '{"key":"prefs","namespace":["users","ada"]}'),
        ("document:put", None, '{"key":"x","namespace":["a","b","c"]}'),
        ("document:deleted", None, '{"key":"prefs","namespace":["users","ada"]}'),
    ]
