"""``find_violations`` on a database that fails raises a ``StorageError``, never a
driver error: the command line and the MCP server catch only tiermem's errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import ConversationMemory
from tiermem.doctor import find_violations
from tiermem.errors import StorageCorrupt, StorageUnavailable


def test_an_unreachable_server_is_storage_unavailable() -> None:
    memory = ConversationMemory("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(StorageUnavailable):
        find_violations(memory.engine)
    memory.close()


def test_a_damaged_sqlite_file_is_storage_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    path.write_bytes(b"not a database " * 512)
    memory = ConversationMemory(f"sqlite:///{path}")
    with pytest.raises(StorageCorrupt):
        find_violations(memory.engine)
    memory.close()
