"""Migration 0006 creates the document table and its full-text index; downgrading
drops them; a store works on an upgraded database."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from tiermem._storage import migrations
from tiermem._storage.migrations import upgrade

from tiermem_langgraph import TieredStore


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _downgrade(url: str, revision: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, revision)
    engine.dispose()


def _search_works(url: str) -> None:
    with TieredStore.from_url(url) as store:
        store.put(("m",), "k", {"text": "migrated words"})
        assert [i.key for i in store.search(("m",), query="words")] == ["k"]
        store.delete(("m",), "k")


def test_upgrade_creates_and_downgrade_drops(url: str) -> None:
    """0005 has no document table; upgrading to head adds it (search works),
    downgrading to 0005 removes it, and upgrading again restores it."""
    upgrade(url, "0005")
    assert "tiermem_document" not in _tables(url)
    upgrade(url)
    assert "tiermem_document" in _tables(url)
    _search_works(url)
    _downgrade(url, "0005")
    assert "tiermem_document" not in _tables(url)
    upgrade(url)
    _search_works(url)
