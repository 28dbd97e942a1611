"""Fixtures for the tiermem-agents tests: a memory on SQLite in tmp_path and a tool."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.tools import BaseTool, tool
from tiermem import ConversationMemory, MemoryConfig
from tiermem.testing import FakeSummarizer, check_invariants


@tool
def lookup(query: str) -> str:
    """Look up a record by its query and return it."""
    turn, _, index = query.removeprefix("item ").partition("-")
    return f"Record {query}: the code word is alpha{turn}x{index}; status nominal, no errors."


@pytest.fixture(name="lookup_tool")
def fixture_lookup_tool() -> BaseTool:
    """The tool the scripted model calls."""
    return lookup


@pytest.fixture(name="memory_url")
def fixture_memory_url(tmp_path: Path) -> str:
    """A SQLite database file in the test's temporary directory."""
    return f"sqlite:///{tmp_path}/agents.db"


@pytest.fixture(name="memory")
def fixture_memory(memory_url: str) -> Iterator[ConversationMemory]:
    """A memory that compresses only when the middleware asks it to; checked afterwards."""
    config = MemoryConfig(max_tokens=1_000_000, max_entries=100_000, auto_compress=False)
    with ConversationMemory(url=memory_url, config=config, summarizer=FakeSummarizer()) as mem:
        yield mem
        check_invariants(mem.engine)
