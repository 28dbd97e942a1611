"""examples/history.py chats through RunnableWithMessageHistory with tiermem as history."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tiermem import ConversationMemory, is_summary_message
from tiermem.testing import check_invariants

from ..conftest import PG_URL

EXAMPLE = Path(__file__).parents[2] / "examples" / "history.py"


def _load() -> ModuleType:
    """Import the example as a module."""
    spec = importlib.util.spec_from_file_location("example_history", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(name="url", params=["sqlite", "postgres"])
def fixture_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL for the example: a SQLite file, or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/history.db"
    schema: str = request.getfixturevalue("pg_schema")
    return f"{PG_URL}?options=-csearch_path%3D{schema}"


def test_history_example_stores_and_compresses(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every question and reply (sync and async turns) is stored and old turns summarized."""
    example = _load()
    example.main(url)
    out = capsys.readouterr().out
    turns = len(example.QUESTIONS) + 1
    for question in example.QUESTIONS:
        assert f"user: {question}" in out
    assert "bot (async): " in out and "(summary first)" in out
    memory = ConversationMemory(url)
    try:
        entries = memory.get_entries("grace")
        assert len(entries) == 2 * turns
        assert [e.role for e in entries] == ["user", "assistant"] * turns
        assert [e.content for e in entries[::2]] == [*example.QUESTIONS, "Thanks! One last tip?"]
        assert memory.get_stats("grace").summaries >= 1
        context = memory.get_messages("grace")
        assert is_summary_message(context[0])
        assert memory.counter.count_messages(context) <= 250
        check_invariants(memory)
    finally:
        memory.close()


def test_history_example_uses_the_default_url(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a URL the example writes ./history.db."""
    monkeypatch.chdir(tmp_path)
    _load().main()
    assert (tmp_path / "history.db").is_file()
    assert "stored 14 messages" in capsys.readouterr().out
