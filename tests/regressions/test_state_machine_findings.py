"""Regressions found by the stateful model test (T37), one test per shrunk failure."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from tiermem import MemoryConfig

from ..conftest import MemoryFactory


def test_import_keeps_tool_call_token_counts(make_memory: MemoryFactory) -> None:
    """A tool call whose argument keys are not in sorted order counts the same after an
    export/import round trip (the canonical export sorts keys; counting must not care)."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    memory.add_message("s", HumanMessage("look it up"))
    memory.add_message(
        "s",
        AIMessage("", tool_calls=[{"name": "f", "args": {"'": None, "": None}, "id": "c1"}]),
    )
    memory.import_session(memory.export_session("s"), session_id="copy")
    original, copy = memory.get_stats("s"), memory.get_stats("copy")
    assert copy.total_tokens == original.total_tokens
    assert [e.token_count for e in memory.get_entries("copy")] == [
        e.token_count for e in memory.get_entries("s")
    ]
