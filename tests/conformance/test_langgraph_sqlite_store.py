"""langgraph-checkpoint-sqlite's store tests, with every ``SqliteStore`` they build
replaced by a ``TieredStore`` on a new tiermem project of this module's fresh
database, on SQLite and PostgreSQL.

The test file comes from the pinned langgraph-checkpoint-sqlite sdist
(``tests/conformance/fetch.py``). Its ``store`` fixture and ``create_vector_store``
helper build ``TieredStore`` here; ``SqliteIndexConfig``'s ``text_fields`` is
``IndexConfig``'s ``fields``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from ._langgraph import ConformanceStore, fixture_store_engine, fixture_substitute_stores
from ._peers import adopt, load, narrow

PROJECT = "langgraph-checkpoint-sqlite"

#: Peer tests that check something other than a store's behaviour.
NOT_ABOUT_THE_STORE: dict[str, str] = {
    "test_nonnull_migrations": "checks SqliteStore's migration scripts",
    "test_vector_store_initialization": (
        "checks SqliteStore's own index_config key (text_fields) and its vector tables"
        " in sqlite_master"
    ),
    "test_escape_glob_literal": "tests SqliteStore's GLOB escaping helper",
    "test_namespace_match_pattern": "tests SqliteStore's namespace pattern helper",
    "test_list_namespaces_prefix_uses_indexable_condition": (
        "inspects the SQL BaseSqliteStore generates"
    ),
}

#: Peer tests run with only the parameters that reach the store: (name, kept values, reason).
NARROWED: dict[str, tuple[str, list[object], str]] = {
    name: (
        "conn_type",
        ["memory"],
        "conn_type picks SqliteStore's connection (memory or file); TieredStore's"
        " database is the test's backend, so the cases would repeat",
    )
    for name in (
        "test_vector_insert_with_auto_embedding",
        "test_vector_update_with_embedding",
        "test_scores",
    )
}

#: Documented, deliberate differences (mirrored in the package README), as strict xfails.
DIFFERENCES: dict[str, str] = {}

PEER = load(PROJECT, "tests/test_store.py", "peer_langgraph_sqlite_store", {})


@contextmanager
def _vector_store(
    fake_embeddings: Any,
    text_fields: list[str] | None = None,
    distance_type: str = "cosine",
    conn_type: str = "memory",
) -> Iterator[ConformanceStore]:
    """The peer's ``create_vector_store``, on a ``TieredStore``."""
    yield ConformanceStore(
        index={"dims": fake_embeddings.dims, "embed": fake_embeddings, "text_fields": text_fields}
    )


@pytest.fixture(autouse=True)
def _substitute(substitute_stores: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store a peer test builds is a ``TieredStore`` on this module's database."""
    monkeypatch.setattr(PEER, "SqliteStore", ConformanceStore)
    monkeypatch.setattr(PEER, "create_vector_store", _vector_store)


@pytest.fixture(name="store")
def fixture_store() -> ConformanceStore:
    """The peer's ``store`` fixture: a store without embeddings."""
    return ConformanceStore()


#: The peer's ``fake_embeddings`` fixture (character-frequency embeddings).
fake_embeddings = PEER.fake_embeddings

for _name, (_argname, _kept, _reason) in NARROWED.items():
    narrow(getattr(PEER, _name), _argname, _kept)

__all__ = ["fixture_store_engine", "fixture_substitute_stores"]

globals().update(adopt(PEER, NOT_ABOUT_THE_STORE, DIFFERENCES))
