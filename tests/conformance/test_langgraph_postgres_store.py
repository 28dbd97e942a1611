"""langgraph-checkpoint-postgres's store tests, with every ``PostgresStore`` they build
replaced by a ``TieredStore`` on a new tiermem project of this module's fresh
database, on SQLite and PostgreSQL.

The test file comes from the pinned langgraph-checkpoint-postgres sdist
(``tests/conformance/fetch.py``). Its ``store`` fixture (a store with the peer's TTL
configuration and a running sweeper), ``vector_store`` fixture and
``_create_vector_store`` helper build ``TieredStore`` here, and its helpers that edit
or read an item's expiry with SQL on ``PostgresStore``'s table do so on tiermem's.
The peer's sleeps move the stores' clock instead of sleeping (``skip_sleeps``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ._langgraph import (
    ConformanceStore,
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
    "test_escape_like_literal": "tests PostgresStore's LIKE escaping helper",
    "test_namespace_match_pattern": "tests PostgresStore's namespace regex helper",
    "test_nonnull_migrations": "checks PostgresStore's migration scripts",
    "test_omit_expired_search_pagination": (
        "rewrites updated_at in PostgresStore's store table through its private cursor;"
        " expired items never take a page slot in TieredStore (tiermem-langgraph's"
        " test_expired_items_never_take_a_page_slot)"
    ),
}

#: Why the vector tests run with pgvector's ``vector`` column and cosine distance only.
COSINE_ONLY = (
    "vector_type picks pgvector's column type and distance_type PostgresStore's"
    " operator; TieredStore stores float32 vectors and scores by cosine similarity"
)

#: Peer tests run with only the parameters that reach the store: (name, kept values, reason).
NARROWED: dict[str, tuple[str, list[object], str]] = {
    name: ("vector_type,distance_type", [("vector", "cosine")], COSINE_ONLY)
    for name in (
        "test_embed_with_path_sync",
        "test_embed_with_path_operation_config",
        "test_scores",
        "test_non_ascii",
    )
}

#: Documented, deliberate differences (mirrored in the package README), as strict xfails.
DIFFERENCES: dict[str, str] = {
    "test_store_ttl": (
        "a query filters: search(query='foo') finds no item whose value holds no 'foo'"
        " (PostgresStore without an index ignores the query)"
    ),
    "test_omit_expired_disabled_preserves_expired_rows": (
        "expired items are never returned: TieredStore always omits them (TTLConfig's"
        " omit_expired=True), where PostgresStore returns them until a sweep by default"
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
    PROJECT, "tests/test_store.py", "peer_langgraph_postgres_store", {"tests.conftest": _CONFTEST}
)


@contextmanager
def _vector_store(
    vector_type: str,
    distance_type: str,
    fake_embeddings: Any,
    text_fields: list[str] | None = None,
    enable_ttl: bool = True,
) -> Iterator[ConformanceStore]:
    """The peer's ``_create_vector_store``, on a ``TieredStore``."""
    with ConformanceStore.from_conn_string(
        "",
        index={
            "dims": fake_embeddings.dims,
            "embed": fake_embeddings,
            "distance_type": distance_type,
            "fields": text_fields,
        },
        ttl={"default_ttl": 2, "refresh_on_read": True} if enable_ttl else None,
    ) as store:
        yield store


@pytest.fixture(autouse=True)
def _substitute(substitute_stores: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store a peer test builds is a ``TieredStore`` on this module's database,
    on a clock the peer's sleeps move."""
    skip_sleeps(PEER, monkeypatch)
    monkeypatch.setattr(PEER, "PostgresStore", ConformanceStore)
    monkeypatch.setattr(PEER, "_create_vector_store", _vector_store)
    monkeypatch.setattr(PEER, "_expire_now", expire_now)
    monkeypatch.setattr(PEER, "_row_exists", row_exists)
    monkeypatch.setattr(PEER, "_stored_expires_at", stored_expires_at)


@pytest.fixture(name="store")
def fixture_store(_substitute: None) -> Iterator[ConformanceStore]:
    """The peer's ``store`` fixture: its TTL configuration, with the sweeper running."""
    with ConformanceStore.from_conn_string(
        "",
        ttl={
            "default_ttl": PEER.TTL_MINUTES,
            "refresh_on_read": True,
            "sweep_interval_minutes": PEER.TTL_MINUTES / 2,
        },
    ) as store:
        store.start_ttl_sweeper()
        yield store


@pytest.fixture(name="vector_store")
def fixture_vector_store(_substitute: None, fake_embeddings: Any) -> Iterator[ConformanceStore]:
    """The peer's ``vector_store`` fixture (``vector`` column, cosine distance)."""
    with _vector_store("vector", "cosine", fake_embeddings) as store:
        yield store


#: The peer's ``fake_embeddings`` fixture (character-frequency embeddings, 500 dims).
fake_embeddings = _CONFTEST.fake_embeddings

for _name, (_argname, _kept, _reason) in NARROWED.items():
    narrow(getattr(PEER, _name), _argname, _kept)

__all__ = ["fixture_store_engine", "fixture_substitute_stores"]

globals().update(adopt(PEER, NOT_ABOUT_THE_STORE, DIFFERENCES))
