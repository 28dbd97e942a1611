"""Fixtures for the tiermem-langgraph tests: a store on a SQLite file or a fresh
PostgreSQL schema (``TIERMEM_TEST_PG_URL``, default the local server), with a
manual clock."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from tiermem import ConversationMemory
from tiermem.testing import ManualClock

from tiermem_langgraph import TieredStore

PG_URL = os.environ.get(
    "TIERMEM_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)

StoreFactory = Callable[..., TieredStore]


@pytest.fixture(name="backend", params=["sqlite", "postgres"])
def fixture_backend(request: pytest.FixtureRequest) -> str:
    """The storage backend under test."""
    return str(request.param)


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A URL on a fresh SQLite file or a fresh PostgreSQL schema (dropped after)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        admin.dispose()


@pytest.fixture(name="clock")
def fixture_clock() -> ManualClock:
    """A manual clock starting 2026-01-01 12:00 UTC."""
    return ManualClock()


@pytest.fixture(name="make_store")
def fixture_make_store(url: str, clock: ManualClock) -> Iterator[StoreFactory]:
    """Build stores (each on its own memory of ``url``); closed after the test."""
    made: list[TieredStore] = []

    def make(**kwargs: Any) -> TieredStore:
        memory = ConversationMemory(url, clock=clock, project=kwargs.pop("project", "default"))
        store = TieredStore(memory, **kwargs)
        store._owned = True
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


@pytest.fixture(name="store")
def fixture_store(make_store: StoreFactory) -> TieredStore:
    """A store without embeddings or TTL configuration."""
    return make_store()
