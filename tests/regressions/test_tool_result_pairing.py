"""A tool result without a call id answers the oldest pending call of its tool, in the
order the calls were made (never in the order of their ids), from both twins."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import ToolMessage

from tiermem import ConversationMemory, MemoryConfig, MemoryEntry
from tiermem.errors import InvalidContent

from ..conftest import MemoryFactory

NO_AUTO = MemoryConfig(auto_compress=False)


def _answered(entry: MemoryEntry) -> str:
    assert isinstance(entry.message, ToolMessage)
    return entry.message.tool_call_id


def _call_id(entry: MemoryEntry) -> str:
    return str(entry.message.tool_calls[0]["id"])  # type: ignore[attr-defined]


def test_parallel_calls_are_answered_in_call_order(make_memory: MemoryFactory) -> None:
    """call_z made before call_a: the first result without an id answers call_z."""
    memory = make_memory(config=NO_AUTO)
    memory.add_tool_call("s", "search", {"q": "z"}, call_id="call_z")
    memory.add_tool_call("s", "search", {"q": "a"}, call_id="call_a")
    first = memory.add_tool_result("s", "search", "for z")
    second = memory.add_tool_result("s", "search", "for a")
    assert [_answered(first), _answered(second)] == ["call_z", "call_a"]


def test_async_twin_answers_in_call_order(make_memory: MemoryFactory) -> None:
    """aadd_tool_result picks the same call as add_tool_result."""
    memory = make_memory(config=NO_AUTO)

    async def run() -> list[str]:
        await memory.aadd_tool_call("s", "search", {}, call_id="call_z")
        await memory.aadd_tool_call("s", "search", {}, call_id="call_a")
        first = await memory.aadd_tool_result("s", "search", "for z")
        second = await memory.aadd_tool_result("s", "search", "for a")
        return [_answered(first), _answered(second)]

    assert asyncio.run(run()) == ["call_z", "call_a"]


def test_generated_ids_answer_their_own_calls(make_memory: MemoryFactory) -> None:
    """50 rounds of two parallel calls with generated ids: every result answers its call."""
    memory = make_memory(config=NO_AUTO)
    for round_ in range(50):
        calls = [memory.add_tool_call("s", "fetch", {"n": n, "round": round_}) for n in (1, 2)]
        results = [memory.add_tool_result("s", "fetch", f"result {n}") for n in (1, 2)]
        assert [_answered(r) for r in results] == [_call_id(c) for c in calls], round_


def test_other_tools_and_answered_calls_are_skipped(make_memory: MemoryFactory) -> None:
    """The oldest pending call of *that* tool: earlier calls of other tools and calls
    already answered by id do not count."""
    memory = make_memory(config=NO_AUTO)
    memory.add_tool_call("s", "fetch", {}, call_id="call_m")
    memory.add_tool_call("s", "search", {}, call_id="call_y")
    memory.add_tool_call("s", "search", {}, call_id="call_b")
    memory.add_tool_call("s", "search", {}, call_id="call_c")
    memory.add_tool_result("s", "search", "by id", call_id="call_y")
    assert _answered(memory.add_tool_result("s", "search", "implicit")) == "call_b"
    assert _answered(memory.add_tool_result("s", "fetch", "implicit")) == "call_m"


def test_an_imported_session_keeps_its_call_order(make_memory: MemoryFactory) -> None:
    """Pending calls of an imported session are answered in the order they were made."""
    memory = make_memory(config=NO_AUTO)
    memory.add_tool_call("s", "search", {}, call_id="call_z")
    memory.add_tool_call("s", "search", {}, call_id="call_a")
    memory.import_session(memory.export_session("s"), session_id="copy")
    assert _answered(memory.add_tool_result("copy", "search", "for z")) == "call_z"


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_an_empty_call_id_answers_the_oldest_pending_call(
    make_memory: MemoryFactory, twin: str
) -> None:
    """call_id="" means no call id in both twins (as add_tool_call generates one for it)."""
    memory = make_memory(config=NO_AUTO)
    memory.add_tool_call("s", "search", {}, call_id="call_z")
    memory.add_tool_call("s", "search", {}, call_id="call_a")
    entry = _add_result(memory, twin, "s", "search", "out", "")
    assert _answered(entry) == "call_z"
    assert memory.get_entries("s")[-1].id == entry.id


@pytest.mark.parametrize("twin", ["sync", "async"])
def test_a_call_id_that_is_not_a_str_is_refused(make_memory: MemoryFactory, twin: str) -> None:
    """InvalidContent before anything is stored, from either twin."""
    memory = make_memory(config=NO_AUTO)
    memory.add_tool_call("s", "search", {}, call_id="7")
    with pytest.raises(InvalidContent, match="call_id must be a str"):
        _add_result(memory, twin, "s", "search", "out", 7)
    assert len(memory.get_entries("s")) == 1


def _add_result(
    memory: ConversationMemory, twin: str, session_id: str, tool: str, output: str, call_id: object
) -> MemoryEntry:
    if twin == "sync":
        return memory.add_tool_result(session_id, tool, output, call_id)  # type: ignore[arg-type]
    return asyncio.run(
        memory.aadd_tool_result(session_id, tool, output, call_id)  # type: ignore[arg-type]
    )
