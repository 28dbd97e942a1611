"""Migration 0002: the (project, last_accessed) index and the partial foreign-key indexes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, create_tables
from tiermem._storage import migrations
from tiermem._storage.migrations import upgrade

from ..conftest import PG_URL

NEW = {
    "tiermem_session": "ix_tiermem_session_project_accessed",
    "tiermem_entry": "ix_tiermem_entry_summary",
    "tiermem_summary": "ix_tiermem_summary_parent",
}
OLD = "ix_tiermem_session_accessed"


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A URL on a fresh SQLite file or PostgreSQL schema."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'migrate.db'}"
    schema = request.getfixturevalue("pg_schema")
    return f"{PG_URL}?options=-csearch_path%3D{schema}"


@pytest.fixture(name="db")
def fixture_db(url: str) -> Iterator[Engine]:
    """An engine on ``url`` (tiermem's own discipline is not needed here)."""
    engine = sa.create_engine(url)
    yield engine
    engine.dispose()


def indexes(engine: Engine) -> dict[str, set[str]]:
    """Index names of the session, entry and summary tables."""
    inspector = sa.inspect(engine)
    return {table: {str(ix["name"]) for ix in inspector.get_indexes(table)} for table in NEW}


def downgrade(url: str, revision: str) -> None:
    """Run Alembic's downgrade the way ``tiermem._storage.migrations.upgrade`` runs upgrades."""
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
    engine.dispose()


def assert_current(engine: Engine) -> None:
    """The new indexes exist and the replaced one is gone."""
    found = indexes(engine)
    for table, name in NEW.items():
        assert name in found[table], (table, found[table])
    assert OLD not in found["tiermem_session"]


def test_fresh_upgrade_has_the_new_indexes(url: str, db: Engine) -> None:
    """Migrating an empty database creates the new indexes and not the replaced one."""
    upgrade(url)
    assert_current(db)


def test_upgrade_swaps_the_indexes_of_an_older_schema(url: str, db: Engine) -> None:
    """A schema made before 0002 gains the new indexes and loses last_accessed's own."""
    create_tables(db)
    with db.begin() as conn:
        for name in NEW.values():
            conn.execute(sa.text(f"DROP INDEX {name}"))
        conn.execute(sa.text(f"CREATE INDEX {OLD} ON tiermem_session (last_accessed)"))
    assert OLD in indexes(db)["tiermem_session"]
    upgrade(url)
    assert_current(db)
    upgrade(url)  # idempotent
    assert_current(db)


def test_downgrade_restores_the_old_index(url: str, db: Engine) -> None:
    """Downgrading to 0001 restores last_accessed's index; upgrading again swaps back."""
    upgrade(url)
    downgrade(url, "0001")
    found = indexes(db)
    assert OLD in found["tiermem_session"]
    assert not {name for table, name in NEW.items() if name in found[table]}
    upgrade(url)
    assert_current(db)


def test_migrated_schema_serves_the_tier_operations(url: str) -> None:
    """After the migrations a memory records, counts and prunes as usual."""
    upgrade(url)
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "hello")
        assert memory.get_tier_stats().active == 1
        assert memory.prune_expired(dry_run=True) == 0
