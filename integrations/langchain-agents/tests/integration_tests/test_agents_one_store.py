"""``TieredMemoryMiddleware`` on ``TieredSaver`` stores each message once: the
middleware's session is the thread's session, whose entries the saver stores, the
summary the middleware puts in the state is no entry, and the checkpoints' lists,
pending writes and inputs hold references to the entries rather than copies; edits
through ``update_state`` reach the entries. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from tiermem import MemoryConfig, is_summary_message
from tiermem.testing import FakeSummarizer, check_invariants, stored_copies
from tiermem_langgraph import TieredSaver

from tiermem_agents import TieredMemoryMiddleware
from tiermem_agents.testing import (
    ToolCallingFakeModel,
    assert_provider_valid,
    lookup,
    lookup_conversation,
)

PG_URL = os.environ.get(
    "TIERMEM_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
CONFIG: RunnableConfig = {"configurable": {"thread_id": "one-store"}}


@pytest.fixture(name="url", params=["sqlite", "postgres"])
def fixture_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A SQLite file, or a fresh PostgreSQL schema (dropped after)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'one.db'}"
        return
    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        admin.dispose()


@pytest.fixture(name="saver")
def fixture_saver(url: str) -> Iterator[TieredSaver]:
    """A saver on a memory that compresses only when the middleware asks it to; its
    summaries quote no message whole (a summary is no copy of one)."""
    config = MemoryConfig(max_tokens=2_000, max_entries=100_000, auto_compress=False)
    summarizer = FakeSummarizer(digest_words=3, record_calls=False)
    with TieredSaver.from_url(url, config=config, summarizer=summarizer) as saver:
        yield saver
        check_invariants(saver.memory.engine)


def _agent(saver: TieredSaver, turns: int) -> Any:
    middleware = TieredMemoryMiddleware(
        saver.memory, trigger=("messages", 12), keep=("messages", 4)
    )
    model = ToolCallingFakeModel(messages=lookup_conversation(turns).script)
    return create_agent(model, [lookup], middleware=[middleware], checkpointer=saver)


def _shown(message: BaseMessage) -> tuple[Any, ...]:
    """A message as a comparison of two runs sees it: without the ids LangGraph and
    tiermem make (random, or numbered across the database; whether an input is
    written before or after the reducer gives it an id depends on timing)."""
    if isinstance(message, AIMessage):
        return ("AIMessage", message.id, message.content, message.tool_calls)
    call = message.tool_call_id if isinstance(message, ToolMessage) else None
    return (type(message).__name__, call, message.content)


def _result(result: Any) -> Any:
    """A task's result with its messages as :func:`_shown` sees them."""
    if isinstance(result, dict) and isinstance(result.get("messages"), list):
        return {**result, "messages": [_shown(m) for m in result["messages"]]}
    return result


def _ids(messages: list[BaseMessage]) -> list[str | None]:
    return [m.id for m in messages if not is_summary_message(m)]


@pytest.mark.slow  # the 200 turns; the async twin below runs 30 in the fast suite
def test_tool_turns_store_each_message_once(saver: TieredSaver) -> None:
    """200 tool-calling turns with compressions: about one copy per message, the
    summary is no entry, and the state shows the session's active entries."""
    turns = 200
    agent = _agent(saver, turns)
    for turn in range(turns):
        agent.invoke({"messages": [HumanMessage(f"Question number {turn}, please.")]}, CONFIG)
    memory = saver.memory
    texts = lookup_conversation(turns).texts
    copies = stored_copies(memory, texts)
    assert 1.0 <= copies <= 1.2, copies
    entries = memory.get_entries("one-store")
    assert len(entries) == len(texts)
    assert not [e for e in entries if is_summary_message(e.to_message())]
    assert memory.get_stats("one-store").compressed_entries > 0.9 * len(entries)
    state = agent.get_state(CONFIG).values["messages"]
    assert_provider_valid(state)
    assert is_summary_message(state[0])
    assert _ids(state) == [e.message.id for e in memory.get_active_entries("one-store")]


def test_async_tool_turns_store_each_message_once(saver: TieredSaver) -> None:
    """The async hooks and saver methods store each message about once too."""
    turns = 30
    agent = _agent(saver, turns)

    async def run() -> None:
        for turn in range(turns):
            question = HumanMessage(f"Question number {turn}, please.")
            await agent.ainvoke({"messages": [question]}, CONFIG)

    asyncio.run(run())
    memory = saver.memory
    texts = lookup_conversation(turns).texts
    copies = stored_copies(memory, texts)
    assert 1.0 <= copies <= 1.2, copies
    assert len(memory.get_entries("one-store")) == len(texts)
    state = agent.get_state(CONFIG).values["messages"]
    assert _ids(state) == [e.message.id for e in memory.get_active_entries("one-store")]


def test_history_reads_back_the_written_messages(saver: TieredSaver) -> None:
    """Pending writes and inputs kept as references read back as they were written:
    the state history equals the one LangGraph's InMemorySaver keeps."""
    from langgraph.checkpoint.memory import InMemorySaver

    def history(checkpointer: Any) -> list[Any]:
        middleware = TieredMemoryMiddleware(
            saver.memory, trigger=("messages", 8), keep=("messages", 3)
        )
        model = ToolCallingFakeModel(messages=lookup_conversation(6).script)
        agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=checkpointer)
        config: RunnableConfig = {"configurable": {"thread_id": str(id(checkpointer))}}
        for turn in range(6):
            agent.invoke({"messages": [HumanMessage(f"Question number {turn}, please.")]}, config)
        return [
            (
                [_shown(m) for m in s.values.get("messages", [])],
                [(t.name, t.error, _result(t.result)) for t in s.tasks],
                s.next,
            )
            for s in agent.get_state_history(config)
        ]

    assert history(saver) == history(InMemorySaver())


@pytest.mark.parametrize("checkpointer", ["tiered", "in-memory"])
def test_update_state_edit_reaches_the_entries(saver: TieredSaver, checkpointer: str) -> None:
    """A message edited through ``update_state`` becomes a new entry (a revision)
    of the thread's session, once: stored by ``TieredSaver`` with its checkpoint,
    or by the middleware (from its own records) on another checkpointer; the
    middleware's context then shows it."""
    from langgraph.checkpoint.memory import InMemorySaver

    middleware = TieredMemoryMiddleware(saver.memory, trigger=("messages", 100))
    model = ToolCallingFakeModel(messages=lookup_conversation(3).script)
    graph_saver = saver if checkpointer == "tiered" else InMemorySaver()
    agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=graph_saver)
    for turn in range(2):
        agent.invoke({"messages": [HumanMessage(f"Question number {turn}, please.")]}, CONFIG)
    edited = AIMessage("Turn 1 is answered, corrected.", id="ai_1_answer")
    agent.update_state(CONFIG, {"messages": [edited]})
    agent.invoke({"messages": [HumanMessage("Question number 2, please.")]}, CONFIG)
    memory = saver.memory
    entries = memory.get_entries("one-store")
    revisions = [e.message.content for e in entries if e.message.id == edited.id]
    assert revisions == ["Turn 1 is answered.", edited.content]
    assert len(entries) == len(lookup_conversation(3).texts) + 1
    state = agent.get_state(CONFIG).values["messages"]
    assert [m.content for m in state if m.id == edited.id] == [edited.content]
    assert edited.content in [m.content for m in memory.get_messages("one-store", query="")]
