"""Migration 0020 and fresh databases: PostgreSQL's full-text indexes keep no GIN
pending list, so a conversation's index stays as compact as one built at once."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory
from tiermem._storage.migrations import upgrade
from tiermem._storage.tables import FULL_TEXT_INDEXES

from .test_tiers_migration import downgrade, fixture_db, fixture_url  # noqa: F401 (fixtures)

NAMES = [f"ix_{index.name}" for index in FULL_TEXT_INDEXES]
ENTRY_INDEX = "ix_tiermem_entry_fts"


def _options(db: Engine) -> dict[str, list[str]]:
    with db.connect() as conn:
        return {
            name: list(
                conn.exec_driver_sql(
                    "SELECT coalesce(reloptions, '{}') FROM pg_class"
                    " WHERE oid = to_regclass(%(i)s)",
                    {"i": name},
                ).scalar_one()
            )
            for name in NAMES
        }


def _size(db: Engine, name: str) -> int:
    with db.connect() as conn:
        size = conn.exec_driver_sql("SELECT pg_relation_size(to_regclass(%(i)s))", {"i": name})
        return int(size.scalar_one())


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_conversation_index_stays_as_compact_as_one_built_at_once(url: str, db: Engine) -> None:
    """Four hundred appends of distinct words leave the entries' index within twice
    the size of the same index rebuilt (with a pending list it was seven times)."""
    words = [f"word{n}" for n in range(4000)]
    with ConversationMemory(url) as memory:
        for n in range(400):
            memory.add_user_message("s", " ".join(words[(n * 37 + k) % 4000] for k in range(60)))
    grown = _size(db, ENTRY_INDEX)
    with db.connect() as conn:
        conn.exec_driver_sql(f"REINDEX INDEX {ENTRY_INDEX}")
        conn.commit()
    assert grown <= 2 * _size(db, ENTRY_INDEX)


@pytest.mark.parametrize("backend", ["postgres"])
def test_the_upgrade_turns_the_pending_list_off_and_the_downgrade_on(url: str, db: Engine) -> None:
    """Every full-text index: off after an upgrade, PostgreSQL's default after a
    downgrade to 0019, off again after the next upgrade; its entries are found
    throughout."""
    upgrade(url)
    assert all(options == ["fastupdate=off"] for options in _options(db).values())
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "herons nest by the lake")

    downgrade(url, "0019")
    assert all(options == [] for options in _options(db).values())

    upgrade(url)
    assert all(options == ["fastupdate=off"] for options in _options(db).values())
    with ConversationMemory(url) as memory:
        assert [hit.entry.content for hit in memory.search("herons")] == ["herons nest by the lake"]
