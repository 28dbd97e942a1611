"""langgraph-checkpoint-sqlite's async store tests, with every ``AsyncSqliteStore``
they build replaced by a ``TieredStore`` on a new tiermem project of this module's
fresh database, on SQLite and PostgreSQL.

The test file comes from the pinned langgraph-checkpoint-sqlite sdist
(``tests/conformance/fetch.py``). Its ``store`` fixture and ``create_vector_store``
helper build ``TieredStore`` here, seen through ``AsyncConformanceStore`` (the async
stores' coroutine ``setup``); ``SqliteIndexConfig``'s ``text_fields`` is
``IndexConfig``'s ``fields``. The peer's sleeps move the stores' clock instead of
sleeping (``skip_sleeps``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from ._langgraph import (
    AsyncConformanceStore,
    fixture_store_engine,
    fixture_substitute_stores,
    skip_sleeps,
)
from ._peers import adopt, load

PROJECT = "langgraph-checkpoint-sqlite"

#: Peer tests that check something other than a store's behaviour.
NOT_ABOUT_THE_STORE: dict[str, str] = {}

#: Peer tests that run in the slow suite (``make test-slow``), with the reason.
SLOW: dict[str, str] = {
    "test_large_batches_async": (
        "6,000 concurrent calls, each its own TieredStore transaction: 5-15 s per backend"
        " on 2 cores (AsyncSqliteStore merges concurrent calls into shared batches)"
    ),
}

#: Documented, deliberate differences (mirrored in the package README), as strict xfails.
DIFFERENCES: dict[str, str] = {
    "test_no_running_loop": (
        "sync methods work on the event loop's thread (they block it): TieredStore is one"
        " store for sync and async code, where AsyncSqliteStore raises InvalidStateError"
    ),
}

#: The peer's ``conn_string`` and ``store`` fixtures run each test on an in-memory
#: and a file database of ``SqliteStore``; TieredStore's database is the test's
#: backend, so there is one case per backend.
_SYNC = load(PROJECT, "tests/test_store.py", "peer_langgraph_sqlite_store_for_async", {})
PEER = load(
    PROJECT,
    "tests/test_async_store.py",
    "peer_langgraph_sqlite_async_store",
    {"tests.test_store": _SYNC},
)


@asynccontextmanager
async def _vector_store(
    fake_embeddings: Any, conn_string: str = ":memory:", text_fields: list[str] | None = None
) -> AsyncIterator[AsyncConformanceStore]:
    """The peer's ``create_vector_store``, on a ``TieredStore``."""
    index = {"dims": fake_embeddings.dims, "embed": fake_embeddings, "text_fields": text_fields}
    async with AsyncConformanceStore.from_conn_string(conn_string, index=index) as store:
        yield store


@pytest.fixture(autouse=True)
def _substitute(substitute_stores: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store a peer test builds is a ``TieredStore`` on this module's database,
    on a clock the peer's sleeps move."""
    skip_sleeps(PEER, monkeypatch)
    monkeypatch.setattr(PEER, "AsyncSqliteStore", AsyncConformanceStore)
    monkeypatch.setattr(PEER, "create_vector_store", _vector_store)


@pytest.fixture(name="store")
async def fixture_store(_substitute: None) -> AsyncIterator[AsyncConformanceStore]:
    """The peer's ``store`` fixture: a store without embeddings."""
    async with AsyncConformanceStore.from_conn_string(":memory:") as store:
        yield store


@pytest.fixture(name="conn_string")
def fixture_conn_string() -> str:
    """The peer's ``conn_string`` fixture (any string names the test's database)."""
    return ":memory:"


#: The peer's ``fake_embeddings`` fixture (character-frequency embeddings, 500 dims).
fake_embeddings = PEER.fake_embeddings

for _name in SLOW:
    pytest.mark.slow(getattr(PEER, _name))

__all__ = ["fixture_store_engine", "fixture_substitute_stores"]

globals().update(adopt(PEER, NOT_ABOUT_THE_STORE, DIFFERENCES))
