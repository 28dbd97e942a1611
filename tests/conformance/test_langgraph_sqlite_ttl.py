"""langgraph-checkpoint-sqlite's TTL tests, with every ``SqliteStore`` and
``AsyncSqliteStore`` they build replaced by a ``TieredStore`` on a new tiermem
project of this module's fresh database, on SQLite and PostgreSQL.

The test file comes from the pinned langgraph-checkpoint-sqlite sdist
(``tests/conformance/fetch.py``). The async tests see the store through
``AsyncConformanceStore`` (the async stores' coroutine ``setup`` / ``sweep_ttl`` /
``start_ttl_sweeper`` / ``stop_ttl_sweeper``). The peer sleeps about 40 seconds to let
times to live pass; here its sleeps move the stores' clock instead (``skip_sleeps``),
so the module runs in about a second and its timings hold exactly on a loaded machine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ._langgraph import (
    AsyncConformanceStore,
    ConformanceStore,
    fixture_store_engine,
    fixture_substitute_stores,
    skip_sleeps,
)
from ._peers import adopt, load

PROJECT = "langgraph-checkpoint-sqlite"

#: Peer tests that check something other than a store's behaviour.
NOT_ABOUT_THE_STORE: dict[str, str] = {}

#: Documented, deliberate differences (mirrored in the package README), as strict xfails.
DIFFERENCES: dict[str, str] = {
    "test_ttl_override_default": (
        "a read refreshes a time to live when TTLConfig does not set refresh_on_read (its"
        " documented default, as PostgresStore and InMemoryStore do); SqliteStore refreshes"
        " only when refresh_on_read is set, so the peer expects the item read at 2 s to"
        " expire at 5 s"
    ),
}

PEER = load(PROJECT, "tests/test_ttl.py", "peer_langgraph_sqlite_ttl", {})


@pytest.fixture(autouse=True)
def _substitute(substitute_stores: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store a peer test builds is a ``TieredStore`` on this module's database,
    on a clock the peer's sleeps move."""
    skip_sleeps(PEER, monkeypatch)
    monkeypatch.setattr(PEER, "SqliteStore", ConformanceStore)
    monkeypatch.setattr(PEER, "AsyncSqliteStore", AsyncConformanceStore)


@pytest.fixture(name="temp_db_file")
def fixture_temp_db_file(tmp_path: Path) -> str:
    """The peer's ``temp_db_file`` fixture (the name goes unused: the stores live in
    the test's database)."""
    return str(tmp_path / "unused.db")


__all__ = ["fixture_store_engine", "fixture_substitute_stores"]

globals().update(adopt(PEER, NOT_ABOUT_THE_STORE, DIFFERENCES))
