"""Migration 0017: a smaller event row; stored events are kept, and a downgrade gives
0016 its form back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from langchain_core.messages import ChatMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem._storage.migrations import upgrade
from tiermem.feed import ChangeEvent
from tiermem.testing import ManualClock, wait_for_feed

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

POSITION = "ix_tiermem_event_position"


def _index(db: Engine) -> list[str]:
    (found,) = [
        [str(column) for column in ix["column_names"]]
        for ix in sa.inspect(db).get_indexes("tiermem_event")
        if ix["name"] == POSITION
    ]
    return found


def _events(url: str) -> list[ChangeEvent]:
    with ConversationMemory(url) as memory:
        wait_for_feed(memory)
        return memory.feed.changes(limit=100)


def _stored(db: Engine) -> list[tuple[str, str, str]]:
    """Kind, payload and SQLite's type of the time of each stored event."""
    typed = "typeof(created_at)" if db.dialect.name == "sqlite" else "'timestamptz'"
    with db.connect() as conn:
        query = f"SELECT kind, payload, {typed} FROM tiermem_event ORDER BY id"
        rows = conn.execute(sa.text(query))
        return [(str(kind), str(payload), str(time)) for kind, payload, time in rows]


def _write(url: str, clock: ManualClock | None = None) -> None:
    config = MemoryConfig(event_content=True)
    with ConversationMemory(url, config=config, clock=clock) as memory:
        memory.add_user_message("s", 'say "hi"')
        memory.add_assistant_message("s", "hello")
        memory.add_message("s", ChatMessage(role="critic", content="fine"))  # role "chat"
        memory.clear_session("s")


def test_downgrade_gives_0016_its_form_and_the_upgrade_keeps_the_events(
    url: str, db: Engine
) -> None:
    """At head an entry's event is stored with an empty kind and its type and role as
    numbers (on SQLite its time as microseconds, the position index on the project
    alone); a downgrade to 0016 writes each back as 0016 stores it, and the events
    read the same before, between and after."""
    sqlite = db.dialect.name == "sqlite"
    upgrade(url)
    _write(url)
    written = _events(url)
    assert [event.kind for event in written] == ["entry:added"] * 3 + ["session:cleared"]
    stored = _stored(db)
    assert [kind for kind, _, _ in stored] == ["", "", "", "session:cleared"]
    assert [json.loads(payload)[4:6] for _, payload, _ in stored[:3]] == [
        [0, 0],
        [0, 1],
        [0, "chat"],
    ]
    assert _index(db) == (["project"] if sqlite else ["project", "xid", "id"])
    if sqlite:
        assert {time for _, _, time in stored} == {"integer"}

    downgrade(url, "0016")
    old = _stored(db)
    assert [kind for kind, _, _ in old] == ["entry:added"] * 3 + ["session:cleared"]
    assert [json.loads(payload) for _, payload, _ in old[:3]] == [
        [e.payload["entry_id"], e.payload["seq"], e.payload["token_count"], 0]
        + [e.payload["type"], e.payload["role"], e.payload["content"]]
        for e in written[:3]
    ]
    assert _index(db) == ["project", "xid", "id"]
    if sqlite:
        with db.connect() as conn:
            times = conn.execute(sa.text("SELECT created_at FROM tiermem_event ORDER BY id"))
            # The text SQLAlchemy writes for these times, which 0016 reads.
            assert list(times.scalars()) == [
                e.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f") for e in written
            ]
    between = _events(url)
    assert [(e.position, e.kind, e.payload, e.created_at) for e in between] == [
        (e.position, e.kind, e.payload, e.created_at) for e in written
    ]

    upgrade(url)
    assert _index(db) == (["project"] if sqlite else ["project", "xid", "id"])
    if sqlite:
        assert {time for _, _, time in _stored(db)} == {"integer"}
    kept = _events(url)
    assert [(e.position, e.kind, e.session_id, e.payload, e.created_at) for e in kept] == [
        (e.position, e.kind, e.session_id, e.payload, e.created_at) for e in written
    ]
    with ConversationMemory(url) as memory:
        assert memory.feed.prune(timedelta(0)) == len(written)


def test_retention_before_the_upgrade_runs(url: str, db: Engine) -> None:
    """A database still at 0016 (its times stored as text on SQLite, which sorts
    every text after every number) keeps its retention: the events older than the
    cutoff go, whichever form their time has, and the newer stay."""
    clock = ManualClock(datetime(2026, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC))
    upgrade(url)
    _write(url, clock)
    downgrade(url, "0016")
    clock.advance(days=10)
    with ConversationMemory(url, clock=clock) as memory:
        memory.add_user_message("t", "written by this version, not migrated yet")
        wait_for_feed(memory)
        assert len(memory.feed.changes(limit=100)) == 5
        assert memory.feed.prune(timedelta(days=5)) == 4
        (left,) = memory.feed.changes(limit=100)
    assert (left.session_id, left.created_at) == ("t", clock())
