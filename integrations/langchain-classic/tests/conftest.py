"""Fixtures for the tiermem-classic tests that touch storage: a URL on a SQLite file or
a fresh PostgreSQL schema (``TIERMEM_TEST_PG_URL``, default the local server)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

PG_URL = os.environ.get(
    "TIERMEM_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture(name="backend", params=["sqlite", "postgres"])
def fixture_backend(request: pytest.FixtureRequest) -> str:
    """The storage backend under test."""
    return str(request.param)


@pytest.fixture(name="backend_url")
def fixture_backend_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A URL on a fresh SQLite file or a fresh PostgreSQL schema (dropped after)."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'classic.db'}"
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
