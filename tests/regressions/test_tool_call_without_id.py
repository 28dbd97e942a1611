"""An assistant tool call without an id (which every LangChain history accepts) is
stored exactly; no result can answer it, and the rendered context stays provider-valid."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tiermem import MemoryConfig
from tiermem.doctor import provider_shape_problems
from tiermem.errors import InvalidContent
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory

NO_AUTO = MemoryConfig(auto_compress=False, recent_window=2, min_entries_to_compress=2)


def _idless(text: str = "") -> AIMessage:
    return AIMessage(
        content=text, tool_calls=[{"name": "search", "args": {"q": "x"}, "id": None}], id="ai-1"
    )


def test_idless_call_is_stored_exactly_and_rendered_valid(make_memory: MemoryFactory) -> None:
    """Stored as given; the context leaves the unanswerable call out, for every provider."""
    memory = make_memory(config=NO_AUTO, summarizer=FakeSummarizer())
    memory.add_messages("s", [HumanMessage("find x", id="h-1"), _idless("looking")])
    memory.add_messages("s", [HumanMessage("and then?", id="h-2"), AIMessage("done", id="a-2")])
    stored = memory.get_entries("s")[1].message
    assert isinstance(stored, AIMessage)
    assert stored.tool_calls == _idless().tool_calls
    rendered = memory.get_messages("s")
    assert [m.id for m in rendered] == ["h-1", "ai-1", "h-2", "a-2"]
    assert rendered[1].content == "looking" and not rendered[1].tool_calls  # type: ignore[attr-defined]
    for provider in ("openai", "anthropic"):
        assert provider_shape_problems(rendered, provider) == []
    for index in range(4):
        memory.add_user_message("s", f"message {index} with enough words to be worth a summary")
    memory.compress("s", force=True)
    assert memory.get_entries("s", include_compressed=True)[1].summary_id is not None


def test_idless_call_alone_leaves_the_rendered_context(make_memory: MemoryFactory) -> None:
    """A call without id or text renders as nothing; its results cannot pair with it."""
    memory = make_memory(config=NO_AUTO)

    async def run() -> None:
        await memory.aadd_messages("s", [HumanMessage("find x", id="h-1"), _idless()])

    asyncio.run(run())
    assert [m.id for m in memory.get_messages("s")] == ["h-1"]
    assert len(memory.get_entries("s")) == 2
    orphan = ToolMessage("found", tool_call_id="", name="search")
    with pytest.raises(InvalidContent, match="answers no pending tool call"):
        memory.add_messages("s", [orphan])
