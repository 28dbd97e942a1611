"""Migration 0016: the event table loses its index on age; stored events are kept."""

from __future__ import annotations

import json
from datetime import timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem._storage.migrations import upgrade
from tiermem.feed import ChangeEvent
from tiermem.testing import wait_for_feed

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

AGE_INDEX = "ix_tiermem_event_created"


def _indexes(db: Engine) -> set[str]:
    return {str(ix["name"]) for ix in sa.inspect(db).get_indexes("tiermem_event")}


def _events(url: str) -> list[ChangeEvent]:
    with ConversationMemory(url) as memory:
        wait_for_feed(memory)
        return memory.feed.changes(limit=100)


def _stored(db: Engine) -> list[str]:
    with db.connect() as conn:
        query = "SELECT payload FROM tiermem_event WHERE kind IN ('', 'entry:added') ORDER BY id"
        return [str(payload) for payload in conn.execute(sa.text(query)).scalars()]


def test_upgrade_drops_the_age_index_and_keeps_the_events(url: str, db: Engine) -> None:
    """At head the event table has its position index and none on age; a downgrade to
    0015 restores the index and writes entries' payloads back as the objects 0015
    reads, and the upgrade keeps those events, delivered as they were."""
    upgrade(url)
    assert "ix_tiermem_event_position" in _indexes(db)
    assert AGE_INDEX not in _indexes(db)
    with ConversationMemory(url, config=MemoryConfig(event_content=True)) as memory:
        memory.add_user_message("s", 'say "hi"')
        memory.add_assistant_message("s", "hello")
        memory.clear_session("s")
    written = _events(url)
    assert [event.kind for event in written] == ["entry:added"] * 2 + ["session:cleared"]
    assert all(payload.startswith("[") for payload in _stored(db))

    downgrade(url, "0015")
    assert AGE_INDEX in _indexes(db)
    objects = [
        json.dumps(event.payload, separators=(",", ":"), sort_keys=True) for event in written[:2]
    ]
    assert _stored(db) == objects
    assert [event.payload for event in _events(url)] == [event.payload for event in written]

    upgrade(url)
    assert AGE_INDEX not in _indexes(db)
    kept = _events(url)
    assert [(e.position, e.kind, e.session_id, e.payload) for e in kept] == [
        (e.position, e.kind, e.session_id, e.payload) for e in written
    ]
    with ConversationMemory(url) as memory:
        assert memory.feed.prune(timedelta(0)) == len(written)
