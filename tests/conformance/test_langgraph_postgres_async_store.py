"""langgraph-checkpoint-postgres's async store tests, with every ``AsyncPostgresStore``
they build replaced by a ``TieredStore`` on a new tiermem project of this module's
fresh database, on SQLite and PostgreSQL.

The test file comes from the pinned langgraph-checkpoint-postgres sdist
(``tests/conformance/fetch.py``). Its ``store`` fixture (a store with the peer's TTL
configuration and a running sweeper), ``vector_store`` fixture and
``_create_vector_store`` helper build ``TieredStore`` here, seen through
``AsyncConformanceStore`` (the async stores' coroutine ``setup`` / ``sweep_ttl`` /
``start_ttl_sweeper`` / ``stop_ttl_sweeper``), and its helpers that edit or read an
item's expiry with SQL on ``AsyncPostgresStore``'s table do so on tiermem's. The
peer's sleeps move the stores' clock instead of sleeping (``skip_sleeps``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import pytest

from ._langgraph import (
    AsyncConformanceStore,
    expire_now,
    fixture_store_engine,
    fixture_substitute_stores,
    row_exists,
    skip_sleeps,
    stored_expires_at,
)
from ._peers import adopt, load, narrow

PROJECT = "langgraph-checkpoint-postgres"

#: Peer tests that check something other than a store's behaviour.
NOT_ABOUT_THE_STORE: dict[str, str] = {
    "test_abatch_uses_single_pool_checkout": (
        "counts AsyncPostgresStore's connection-pool checkouts"
    ),
    "test_omit_expired_search_pagination": (
        "rewrites updated_at in AsyncPostgresStore's store table through its private"
        " cursor; expired items never take a page slot in TieredStore (tiermem-langgraph's"
        " test_expired_items_never_take_a_page_slot)"
    ),
}

#: Peer tests that run in the slow suite (``make test-slow``), with the reason.
SLOW: dict[str, str] = {
    "test_large_batches_async": (
        "60,000 concurrent calls, each its own TieredStore transaction: minutes on"
        " 2 cores (AsyncPostgresStore merges concurrent calls into shared batches)"
    ),
    "test_large_batches": (
        "6,000 sync calls from 10 threads, each its own transaction: about a minute on"
        " PostgreSQL on 2 cores"
    ),
}

#: Why the vector tests run with pgvector's ``vector`` column and cosine distance only.
COSINE_ONLY = (
    "vector_type picks pgvector's column type and distance_type AsyncPostgresStore's"
    " operator; TieredStore stores float32 vectors and scores by cosine similarity"
)

#: Peer tests run with only the parameters that reach the store: (name, kept values, reason).
NARROWED: dict[str, tuple[str, list[object], str]] = {
    name: ("vector_type,distance_type", [("vector", "cosine")], COSINE_ONLY)
    for name in ("test_embed_with_path", "test_search_sorting")
}

#: Documented, deliberate differences (mirrored in the package README), as strict xfails.
DIFFERENCES: dict[str, str] = {
    "test_no_running_loop": (
        "sync methods work on the event loop's thread (they block it): TieredStore is one"
        " store for sync and async code, where AsyncPostgresStore raises InvalidStateError"
    ),
    "test_store_ttl": (
        "a query filters: asearch(query='foo') finds no item whose value holds no 'foo'"
        " (AsyncPostgresStore without an index ignores the query)"
    ),
    "test_omit_expired_disabled_preserves_expired_rows": (
        "expired items are never returned: TieredStore always omits them (TTLConfig's"
        " omit_expired=True), where AsyncPostgresStore returns them until a sweep by default"
    ),
}

_UTILS = load(PROJECT, "tests/embed_test_utils.py", "peer_langgraph_postgres_embed_utils", {})
_CONFTEST = load(
    PROJECT,
    "tests/conftest.py",
    "peer_langgraph_postgres_conftest",
    {"tests.embed_test_utils": _UTILS},
)
PEER = load(
    PROJECT,
    "tests/test_async_store.py",
    "peer_langgraph_postgres_async_store",
    {"tests.conftest": _CONFTEST},
)


@asynccontextmanager
async def _vector_store(
    vector_type: str,
    distance_type: str,
    fake_embeddings: Any,
    text_fields: list[str] | None = None,
) -> AsyncIterator[AsyncConformanceStore]:
    """The peer's ``_create_vector_store``, on a ``TieredStore``."""
    index = {
        "dims": fake_embeddings.dims,
        "embed": fake_embeddings,
        "distance_type": distance_type,
        "fields": text_fields,
    }
    async with AsyncConformanceStore.from_conn_string("", index=index) as store:
        yield store


async def _aexpire_now(store: Any, namespace: tuple[str, ...], key: str) -> None:
    await asyncio.to_thread(expire_now, store, namespace, key)


async def _arow_exists(store: Any, namespace: tuple[str, ...], key: str) -> bool:
    return await asyncio.to_thread(row_exists, store, namespace, key)


async def _astored_expires_at(store: Any, namespace: tuple[str, ...], key: str) -> datetime | None:
    return await asyncio.to_thread(stored_expires_at, store, namespace, key)


@pytest.fixture(autouse=True)
def _substitute(substitute_stores: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store a peer test builds is a ``TieredStore`` on this module's database,
    on a clock the peer's sleeps move."""
    skip_sleeps(PEER, monkeypatch)
    monkeypatch.setattr(PEER, "AsyncPostgresStore", AsyncConformanceStore)
    monkeypatch.setattr(PEER, "_create_vector_store", _vector_store)
    monkeypatch.setattr(PEER, "_aexpire_now", _aexpire_now)
    monkeypatch.setattr(PEER, "_arow_exists", _arow_exists)
    monkeypatch.setattr(PEER, "_astored_expires_at", _astored_expires_at)


@pytest.fixture(name="store")
async def fixture_store(_substitute: None) -> AsyncIterator[AsyncConformanceStore]:
    """The peer's ``store`` fixture: its TTL configuration, with the sweeper running."""
    ttl = {
        "default_ttl": PEER.TTL_MINUTES,
        "refresh_on_read": True,
        "sweep_interval_minutes": PEER.TTL_MINUTES / 2,
    }
    async with AsyncConformanceStore.from_conn_string("", ttl=ttl) as store:
        await store.start_ttl_sweeper()
        yield store


@pytest.fixture(name="vector_store")
async def fixture_vector_store(
    _substitute: None, fake_embeddings: Any
) -> AsyncIterator[AsyncConformanceStore]:
    """The peer's ``vector_store`` fixture (``vector`` column, cosine distance)."""
    async with _vector_store("vector", "cosine", fake_embeddings) as store:
        yield store


#: The peer's ``fake_embeddings`` fixture (character-frequency embeddings, 500 dims).
fake_embeddings = _CONFTEST.fake_embeddings

for _name in SLOW:
    # Generous: the calls are many, and a loaded machine runs them slower.
    pytest.mark.timeout(1800)(pytest.mark.slow(getattr(PEER, _name)))

for _name, (_argname, _kept, _reason) in NARROWED.items():
    narrow(getattr(PEER, _name), _argname, _kept)

__all__ = ["fixture_store_engine", "fixture_substitute_stores"]

globals().update(adopt(PEER, NOT_ABOUT_THE_STORE, DIFFERENCES))
