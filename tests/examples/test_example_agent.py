"""examples/agent.py runs a create_agent conversation with TieredMemoryMiddleware."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from tiermem import ConversationMemory
from tiermem.testing import check_invariants

EXAMPLE = Path(__file__).parents[2] / "examples" / "agent.py"


def _load() -> ModuleType:
    """Import the example as a module."""
    spec = importlib.util.spec_from_file_location("example_agent", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(name="agent_example")
def fixture_agent_example(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example with no real model configured."""
    monkeypatch.delenv("TIERMEM_CHAT_MODEL", raising=False)
    return _load()


def test_agent_records_compresses_and_recalls(
    agent_example: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """All messages are stored once, older ones summarized, and recall returns a summarized one."""
    url = f"sqlite:///{tmp_path}/x.db"
    agent_example.main(url=url)
    out = capsys.readouterr().out
    assert out.count("agent> ") == len(agent_example.QUESTIONS)
    assert "[tiermem]" in out
    with ConversationMemory(url=url) as mem:
        thread = agent_example.THREAD
        stats = mem.get_stats(thread)
        assert stats.total_entries == 4 * len(agent_example.QUESTIONS)
        assert stats.summaries >= 1 and stats.compressed_entries > 0
        messages = [entry.to_message() for entry in mem.get_entries(thread)]
        assert len({m.id for m in messages}) == len(messages)
        calls = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
        results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
        assert calls == results
        recall = [m for m in messages if isinstance(m, ToolMessage) and m.name == "recall_memory"]
        assert "Order A-100: shipped." in str(recall[-1].content)
        assert "summarized" in str(recall[-1].content)
        check_invariants(mem)


def test_tools_answer_from_their_tables(agent_example: ModuleType) -> None:
    """The example's tools look up orders and convert currencies."""
    assert agent_example.order_status.invoke({"order_id": "A-102"}) == (
        "Order A-102: delayed: customs."
    )
    assert agent_example.convert.invoke({"amount": 10, "currency": "USD"}) == (
        "10.0 EUR = 10.80 USD."
    )
