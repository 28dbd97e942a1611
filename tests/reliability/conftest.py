"""Fixtures of the reliability suite: a store a spawned worker can open, and a failpoint dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import _create_schema, _drop_schema
from .harness import StoreSpec


@pytest.fixture(name="store")
def fixture_store(backend: str, tmp_path: Path) -> Iterator[StoreSpec]:
    """A fresh SQLite file or PostgreSQL schema, described so workers can open it."""
    if backend == "sqlite":
        yield StoreSpec("sqlite", str(tmp_path / "tiermem.db"))
        return
    schema = _create_schema()
    yield StoreSpec("postgres", schema)
    _drop_schema(schema)


@pytest.fixture(name="fp_dir")
def fixture_fp_dir(tmp_path: Path) -> Path:
    """The directory where paused workers leave their ``.hit`` markers."""
    path = tmp_path / "failpoints"
    path.mkdir()
    return path
