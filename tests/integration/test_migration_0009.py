"""Migration 0009: the change feed's tables (and PostgreSQL's notify trigger)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage.migrations import upgrade
from tiermem.testing import wait_for_feed

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)


def _feed_tables(db: Engine) -> set[str]:
    names = set(sa.inspect(db).get_table_names())
    return names & {"tiermem_event", "tiermem_consumer"}


def _has_trigger(db: Engine) -> bool:
    with db.connect() as conn:
        found = conn.execute(
            sa.text(
                "SELECT count(*) FROM pg_trigger WHERE tgname = 'tiermem_event_notify'"
                " AND tgrelid = to_regclass('tiermem_event')"
            )
        ).scalar_one()
    return bool(found)


def test_upgrade_adds_the_feed_and_downgrade_removes_it(url: str, db: Engine) -> None:
    """The upgrade creates both tables (and the trigger), a memory on the upgraded
    database records events, and the downgrade to 0008 drops them all."""
    upgrade(url)
    assert _feed_tables(db) == {"tiermem_event", "tiermem_consumer"}
    if db.dialect.name == "postgresql":
        assert _has_trigger(db)
    downgrade(url, "0008")
    assert _feed_tables(db) == set()
    if db.dialect.name == "postgresql":
        assert not _has_trigger(db)
    upgrade(url)
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "hello")
        wait_for_feed(memory)  # on PostgreSQL other clients' transactions may delay it
        events = list(memory.feed.follow(poll_interval=0.02, idle_timeout=0.05))
        assert [event.kind for event in events] == ["entry:added"]
