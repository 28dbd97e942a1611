"""TieredMemoryMiddleware inside real create_agent graphs driven by a scripted model."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from tiermem import ConversationMemory, MemoryConfig, is_summary_message
from tiermem.errors import InvalidArgument, InvalidSessionId
from tiermem.testing import FakeSummarizer, check_invariants

from tiermem_agents import TieredMemoryMiddleware
from tiermem_agents.testing import ToolCallingFakeModel, assert_provider_valid, tool_turns

CONFIG: RunnableConfig = {"configurable": {"thread_id": "thread-1"}}


def _ids(messages: list[BaseMessage]) -> list[object]:
    """Message ids, the summary shown by its content."""
    return [m.content if is_summary_message(m) else m.id for m in messages]


def _drive(
    memory: ConversationMemory,
    tool: BaseTool,
    turns: int,
    middleware: TieredMemoryMiddleware,
    *,
    config: RunnableConfig = CONFIG,
    check_sync: bool = True,
    **agent_kwargs: Any,
) -> ToolCallingFakeModel:
    """Run ``turns`` scripted turns, checking the state after each one.

    With ``check_sync`` the state must equal tiermem's context after every turn,
    which holds when only the middleware compresses (``auto_compress=False``) and
    the session stays within ``max_tokens``.
    """
    model = ToolCallingFakeModel(messages=tool_turns(turns))
    agent = create_agent(
        model, [tool], middleware=[middleware], checkpointer=InMemorySaver(), **agent_kwargs
    )
    session = config["configurable"][middleware.session_key]
    for turn in range(turns):
        result = agent.invoke(
            {"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]}, config
        )
        state: list[BaseMessage] = result["messages"]
        assert_provider_valid(state)
        assert state[-1].id == f"ai_{turn}_answer"
        if check_sync:
            assert _ids(state) == _ids(memory.get_messages(session, query=""))
    return model


def _assert_everything_recorded(memory: ConversationMemory, session: str, turns: int) -> None:
    """Every produced message is stored exactly once, in conversation order."""
    entries = memory.get_entries(session, include_compressed=True)
    messages = [entry.to_message() for entry in entries]
    ids = [m.id for m in messages if not isinstance(m, ToolMessage)]
    expected = [i for t in range(turns) for i in (f"h{t}", f"ai_{t}_call", f"ai_{t}_answer")]
    assert ids == expected
    results = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    calls = [str(c["id"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert sorted(results) == sorted(calls)
    assert len(set(results)) == len(results) == sum(1 + t % 2 for t in range(turns))


def test_compresses_repeatedly_with_provider_valid_state(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """A message trigger compresses many times and every model request stays provider-valid."""
    middleware = TieredMemoryMiddleware(memory, trigger=("messages", 12), keep=("messages", 4))
    model = _drive(memory, lookup_tool, 30, middleware)
    assert memory.get_stats("thread-1").summaries >= 3
    for request in model.requests:
        assert_provider_valid(request)
        assert len(request) < 12
    assert any(is_summary_message(request[0]) for request in model.requests)


def test_nothing_is_lost(memory: ConversationMemory, lookup_tool: BaseTool) -> None:
    """Every message the agent saw or produced is stored once, compressed or not."""
    middleware = TieredMemoryMiddleware(memory, trigger=("messages", 10), keep=("messages", 3))
    _drive(memory, lookup_tool, 25, middleware)
    stats = memory.get_stats("thread-1")
    assert stats.compressed_entries > 0
    _assert_everything_recorded(memory, "thread-1", 25)


def test_token_trigger_bounds_what_the_model_is_sent(
    memory_url: str, lookup_tool: BaseTool
) -> None:
    """With ("tokens", n) and a memory budgeted at n, no model request reaches n tokens."""
    config = MemoryConfig(max_tokens=500, summary_share=0.3, auto_compress=False)
    with ConversationMemory(url=memory_url, config=config, summarizer=FakeSummarizer()) as memory:
        middleware = TieredMemoryMiddleware(memory, trigger=("tokens", 500), keep=("tokens", 150))
        # A turn's last answer may take the state past 500 tokens until the next
        # model call compresses; tiermem's context is cut to the budget meanwhile,
        # so it need not equal the state between turns.
        model = _drive(memory, lookup_tool, 30, middleware, check_sync=False)
        sizes = [memory.counter.count_messages(request) for request in model.requests]
        assert max(sizes) < 500
        stats = memory.get_stats("thread-1")
        assert stats.compressed_entries > 100
        assert stats.summary_tokens < 0.3 * 500 + 100
        _assert_everything_recorded(memory, "thread-1", 30)


def test_list_trigger_compresses_when_any_clause_is_met(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """A list trigger is an OR: the message clause fires although the token one never does."""
    middleware = TieredMemoryMiddleware(
        memory, trigger=[("tokens", 10**6), {"messages": 9}], keep=("messages", 2)
    )
    model = _drive(memory, lookup_tool, 12, middleware)
    assert memory.get_stats("thread-1").summaries >= 1
    assert max(len(request) for request in model.requests) < 9


def test_fraction_trigger_uses_the_model_profile(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """("fraction", f) compresses at f of the profile's max_input_tokens."""
    profiled = ToolCallingFakeModel(messages=iter(()), profile={"max_input_tokens": 1000})
    middleware = TieredMemoryMiddleware(
        memory, trigger=("fraction", 0.4), keep=("fraction", 0.1), model=profiled
    )
    model = _drive(memory, lookup_tool, 20, middleware)
    assert max(memory.counter.count_messages(r) for r in model.requests) < 400
    assert memory.get_stats("thread-1").summaries >= 1


def test_fraction_without_profile_is_refused(memory: ConversationMemory) -> None:
    """A fractional trigger without a known context size raises ValueError at construction."""
    with pytest.raises(ValueError, match="max_input_tokens"):
        TieredMemoryMiddleware(memory, trigger=("fraction", 0.5))


def test_default_trigger_follows_memory_config(memory: ConversationMemory) -> None:
    """Without trigger and keep, the memory's max_tokens, max_entries and recent_window apply."""
    middleware = TieredMemoryMiddleware(memory)
    config = memory.config
    assert middleware.trigger == [("tokens", config.max_tokens), ("messages", config.max_entries)]
    memory.update_config(max_entries=None)  # the default: only tokens trigger
    assert TieredMemoryMiddleware(memory).trigger == [("tokens", config.max_tokens)]
    assert middleware.keep == ("messages", config.recent_window)


def test_session_key_selects_the_session(memory: ConversationMemory, lookup_tool: BaseTool) -> None:
    """The session id is read from configurable[session_key]."""
    middleware = TieredMemoryMiddleware(memory, trigger=("messages", 50), session_key="user_chat")
    config: RunnableConfig = {"configurable": {"thread_id": "t", "user_chat": "chat-7"}}
    _drive(memory, lookup_tool, 2, middleware, config=config)
    assert memory.get_stats("chat-7").total_entries == 2 * 3 + 1 + 2
    assert memory.list_sessions() and {s.session_id for s in memory.list_sessions()} == {"chat-7"}


def test_missing_session_id_is_an_error(memory: ConversationMemory, lookup_tool: BaseTool) -> None:
    """Invoking without the configured session key raises InvalidSessionId with the fix."""
    model = ToolCallingFakeModel(messages=tool_turns(1))
    middleware = TieredMemoryMiddleware(memory, session_key="user_chat")
    agent = create_agent(model, [lookup_tool], middleware=[middleware])
    with pytest.raises(InvalidSessionId, match="user_chat"):
        agent.invoke({"messages": [HumanMessage("hi")]}, CONFIG)


def test_system_prompt_is_not_recorded(memory: ConversationMemory, lookup_tool: BaseTool) -> None:
    """The agent's system prompt is not state, so it is neither stored nor compressed."""
    middleware = TieredMemoryMiddleware(memory, trigger=("messages", 8), keep=("messages", 2))
    model = _drive(memory, lookup_tool, 6, middleware, system_prompt="You are terse.")
    assert all(request[0].content == "You are terse." for request in model.requests)
    stored = [entry.to_message().content for entry in memory.get_entries("thread-1")]
    assert "You are terse." not in stored


def test_default_trigger_with_auto_compressing_memory(
    memory_url: str, lookup_tool: BaseTool
) -> None:
    """With no trigger, a memory that compresses on its own still yields valid, bounded state."""
    config = MemoryConfig(max_tokens=600, max_entries=30, recent_window=4, summary_share=0.2)
    with ConversationMemory(url=memory_url, config=config, summarizer=FakeSummarizer()) as memory:
        model = _drive(memory, lookup_tool, 25, TieredMemoryMiddleware(memory), check_sync=False)
        for request in model.requests:
            assert_provider_valid(request)
        assert max(memory.counter.count_messages(r) for r in model.requests) < 600
        assert memory.get_stats("thread-1").summaries >= 1
        _assert_everything_recorded(memory, "thread-1", 25)
        check_invariants(memory)


@pytest.mark.parametrize(("role", "kind"), [(None, HumanMessage), ("system", SystemMessage)])
def test_summary_role(
    memory: ConversationMemory, lookup_tool: BaseTool, role: str | None, kind: type[BaseMessage]
) -> None:
    """The summary reaches the model as SummarizationMiddleware's HumanMessage by default,
    as a SystemMessage on request, and is never stored back as a message."""
    kwargs: dict[str, Any] = {} if role is None else {"summary_role": role}
    middleware = TieredMemoryMiddleware(
        memory, trigger=("messages", 10), keep=("messages", 3), **kwargs
    )
    model = _drive(memory, lookup_tool, 12, middleware)
    heads = [request[0] for request in model.requests if is_summary_message(request[0])]
    assert heads
    assert all(type(head) is kind for head in heads)
    if kind is HumanMessage:
        assert all(head.additional_kwargs["lc_source"] == "summarization" for head in heads)
    _assert_everything_recorded(memory, "thread-1", 12)


def test_summary_role_is_checked(memory: ConversationMemory) -> None:
    """An unknown summary_role is refused at construction."""
    with pytest.raises(InvalidArgument, match="summary_role"):
        TieredMemoryMiddleware(memory, summary_role="assistant")  # type: ignore[arg-type]


def test_cache_control_marks_the_end_of_the_stable_prefix(
    memory: ConversationMemory, lookup_tool: BaseTool
) -> None:
    """With ``cache_control``, every request that holds tiermem's summary carries the
    breakpoint on the summary's last content block and nowhere else; the state and the
    stored entries never do. Without it, requests are as before."""
    mark = {"type": "ephemeral"}
    middleware = TieredMemoryMiddleware(
        memory, trigger=("messages", 10), keep=("messages", 3), cache_control=mark
    )
    model = _drive(memory, lookup_tool, 12, middleware)
    heads = [request[0] for request in model.requests if is_summary_message(request[0])]
    assert heads
    for head in heads:
        assert isinstance(head.content, list)
        last = head.content[-1]
        assert isinstance(last, dict) and last["cache_control"] == mark
        assert str(last["text"]).startswith("Summary of the earlier conversation")
    for request in model.requests:
        assert all(isinstance(m.content, str) or m is request[0] for m in request)
    state = memory.get_messages("thread-1", query="")
    assert not any("cache_control" in str(m.content) for m in state)
    plain = TieredMemoryMiddleware(memory, trigger=("messages", 10), keep=("messages", 3))
    model = _drive(memory, lookup_tool, 12, plain, config={"configurable": {"thread_id": "t2"}})
    assert all(isinstance(request[0].content, str) for request in model.requests)
