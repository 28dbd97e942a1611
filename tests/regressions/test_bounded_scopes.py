"""Client-chosen names do not grow the process: 10,000 distinct layer scopes keep at
most ``MAX_IDLE_SCOPES`` scope objects alive (counted, not measured in bytes), and a
server with --all-projects keeps at most ``MAX_OTHER_PROJECTS`` memories of other
projects. A scope that holds working items, or one a caller still holds, is never
forgotten."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem import ConversationMemory
from tiermem.layers import MAX_IDLE_SCOPES, LayeredMemory
from tiermem.mcp import MemoryTools, build_server
from tiermem.mcp.access import MAX_OTHER_PROJECTS

from ..conftest import store_url

DISTINCT = 10_000


def live_scopes() -> int:
    """How many LayeredMemory objects exist in the process."""
    gc.collect()
    return sum(isinstance(thing, LayeredMemory) for thing in gc.get_objects())


def live_memories() -> int:
    """How many ConversationMemory objects exist in the process."""
    gc.collect()
    return sum(isinstance(thing, ConversationMemory) for thing in gc.get_objects())


@pytest.fixture(name="memory")
def fixture_memory(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[ConversationMemory]:
    """A memory on a fresh SQLite file or PostgreSQL schema."""
    with ConversationMemory(store_url(backend, tmp_path, request)) as memory:
        yield memory


def test_distinct_scopes_keep_a_bounded_number_of_objects(memory: ConversationMemory) -> None:
    """10,000 distinct 200-character scopes leave at most MAX_IDLE_SCOPES scope objects
    (plus the two kept below); a scope with working items keeps them, a held scope
    stays the same object."""
    before = live_scopes()
    busy = memory.layers("busy")
    busy.append("working", "the user is planning a trip")
    held = memory.layers("held")
    for i in range(DISTINCT):
        memory.layers(f"{i:06d}-" + "s" * 193).recent("working")
    assert live_scopes() - before <= MAX_IDLE_SCOPES + 2
    assert [item.content for item in memory.layers("busy").recent("working")] == [
        "the user is planning a trip"
    ]
    assert memory.layers("held") is held
    assert memory.layers("busy") is busy


async def test_mcp_scopes_and_projects_stay_bounded(memory: ConversationMemory) -> None:
    """Tool calls with distinct scopes (read-only too) and, with --all-projects, distinct
    projects keep bounded numbers of scope and memory objects; every call is answered."""
    scopes_before = live_scopes()
    memories_before = live_memories()
    memory.layers("default").learn("city", "Oslo")  # creates the tables
    tools = MemoryTools(memory, read_only=True, all_projects=True)
    server = build_server(tools)
    calls = MAX_IDLE_SCOPES * 3
    for i in range(calls):
        result = await server.call_tool("recall", {"key": "city", "scope": f"s{i}-" + "x" * 190})
        assert not getattr(result, "is_error", False), result
    assert live_scopes() - scopes_before <= MAX_IDLE_SCOPES + 1
    for i in range(MAX_OTHER_PROJECTS * 3):
        result = await server.call_tool("recall", {"key": "city", "project": f"p{i}"})
        assert not getattr(result, "is_error", False), result
    assert tools.kept_projects == MAX_OTHER_PROJECTS
    assert live_memories() - memories_before <= MAX_OTHER_PROJECTS + 1
    recalled = await server.call_tool("recall", {"key": "city"})
    assert "Oslo" in str(recalled)


def test_ten_thousand_projects_keep_a_bounded_number_of_memories(
    memory: ConversationMemory,
) -> None:
    """10,000 distinct project names through an --all-projects server's memories keep
    at most MAX_OTHER_PROJECTS of them."""
    before = live_memories()
    tools = MemoryTools(memory, all_projects=True)
    for i in range(DISTINCT):
        assert tools.memory_for(f"{i:06d}-" + "p" * 100).project.startswith(f"{i:06d}")
    assert tools.kept_projects == MAX_OTHER_PROJECTS
    assert live_memories() - before <= MAX_OTHER_PROJECTS
