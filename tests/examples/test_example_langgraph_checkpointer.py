"""examples/langgraph_checkpointer.py runs an agent on TieredSaver: each message is an
entry of the thread's session, an edit keeps the old checkpoint's text and retires
what the thread left behind, a prune keeps every message; its output is the same on
every run."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tiermem import ConversationMemory
from tiermem.testing import check_invariants

from ..conftest import PG_URL

EXAMPLE = Path(__file__).parents[2] / "examples" / "langgraph_checkpointer.py"


def _load() -> ModuleType:
    """Import the example as a module."""
    spec = importlib.util.spec_from_file_location("example_langgraph_checkpointer", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(name="url", params=["sqlite", "postgres"])
def fixture_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for the example: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/checkpointer.db"
    schema: str = request.getfixturevalue("pg_schema")
    return f"{PG_URL}?options=-csearch_path%3D{schema}"


def test_checkpointer_example(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent answers from its tools, the thread's messages are entries, the edit
    and the prune do what the example says, and a second run prints the same."""
    example = _load()
    example.main(url)
    first = capsys.readouterr().out
    assert "user: Where is order A-102?  agent: A-102 is delayed: customs." in first
    assert "15 checkpoints, 12 messages stored once each" in first
    assert "old checkpoint still reads: Where is order A-100?" in first
    assert "after prune: 1 checkpoint, 13 entries kept (9 retired)" in first
    assert "search 'customs': 0 hits" in first
    assert "the first: Where is order A-100, please?" in first
    example.main(url)
    assert capsys.readouterr().out == first
    memory = ConversationMemory(url, project="checkpointer-example")
    try:
        contents = [entry.to_message().content for entry in memory.get_entries("orders")]
        assert contents.count("Where is order A-100?") == 1
        assert contents[-1] == "Where is order A-100, please?"
        check_invariants(memory)
    finally:
        memory.close()
