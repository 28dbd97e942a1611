"""Graphs run on ``TieredSaver`` have exactly the history they have on LangGraph's
``InMemorySaver``: every state of ``get_state_history`` (values, next nodes,
metadata, tasks and their interrupts, parent), after tool calls, an interrupt and its
resumption, a subgraph's namespace, edits and removals through ``update_state``, a
fork from an old checkpoint, a summarization that removes every message, and a
``DeltaChannel``; on SQLite and PostgreSQL, through the sync and the async API.
Each message is stored once, as an entry of the thread's session."""

from __future__ import annotations

import itertools
import json
import operator
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, TypedDict

import pytest
import sqlalchemy as sa
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt
from tiermem import ConversationMemory
from tiermem._storage.checkpoint_schema import blob_table
from tiermem.testing import check_invariants

from tiermem_langgraph import TieredSaver

Graph = CompiledStateGraph[Any, Any, Any, Any]
Scenario = Callable[[Callable[[BaseCheckpointSaver[Any]], Graph], BaseCheckpointSaver[Any]], None]


@pytest.fixture(name="memory")
def fixture_memory(url: str) -> Iterator[ConversationMemory]:
    """A memory on the test's database."""
    memory = ConversationMemory(url)
    yield memory
    memory.close()


# --------------------------------------------------------------------------- graphs


def _agent(state: MessagesState) -> dict[str, Any]:
    """A model stand-in: a tool call for each question, then an answer."""
    messages = state["messages"]
    last = messages[-1]
    turn = sum(isinstance(m, HumanMessage) for m in messages)
    if isinstance(last, HumanMessage):
        call = {"name": "lookup", "args": {"q": str(last.content)}, "id": f"call-{turn}"}
        return {"messages": [AIMessage("", tool_calls=[call], id=f"ai-call-{turn}")]}
    return {"messages": [AIMessage(f"answer {turn}: {last.content}", id=f"ai-{turn}")]}


def _tools(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    return {
        "messages": [
            ToolMessage(f"found {call['args']['q']}", tool_call_id=call["id"], id=f"t-{call['id']}")
            for call in last.tool_calls
        ]
    }


def _route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def tool_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """An agent loop: model, tools, model."""
    builder = StateGraph(MessagesState)
    builder.add_node("agent", _agent)
    builder.add_node("tools", _tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _approve(state: MessagesState) -> dict[str, Any]:
    answer = interrupt({"question": "send it?"})
    return {"messages": [AIMessage(f"approved: {answer}", id=f"approval-{len(state['messages'])}")]}


def interrupt_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """A node that waits for a human's answer."""
    builder = StateGraph(MessagesState)
    builder.add_node("approve", _approve)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=checkpointer)


def subgraph_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """A parent whose node is a subgraph that interrupts (its own namespace)."""
    inner = StateGraph(MessagesState)
    inner.add_node("draft", lambda state: {"messages": [AIMessage("draft", id="draft")]})
    inner.add_node("approve", _approve)
    inner.add_edge(START, "draft")
    inner.add_edge("draft", "approve")
    inner.add_edge("approve", END)
    outer = StateGraph(MessagesState)
    outer.add_node("inner", inner.compile())
    outer.add_node("wrap", lambda state: {"messages": [AIMessage("done", id="done")]})
    outer.add_edge(START, "inner")
    outer.add_edge("inner", "wrap")
    outer.add_edge("wrap", END)
    return outer.compile(checkpointer=checkpointer)


def _summarize(state: MessagesState) -> dict[str, Any]:
    if len(state["messages"]) < 6:
        return {}
    count = len(state["messages"])
    summary = HumanMessage(f"summary of {count} messages", id=f"summary-{count}")
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary]}


def summarizing_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """An answer, then a summarization that replaces every message when there are many."""
    builder = StateGraph(MessagesState)
    builder.add_node("agent", _agent)
    builder.add_node("tools", _tools)
    builder.add_node("summarize", _summarize)
    builder.add_edge(START, "summarize")
    builder.add_edge("summarize", "agent")
    builder.add_conditional_edges("agent", _route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def _extend(state: list[str], batches: Sequence[list[str]]) -> list[str]:
    return [*state, *(item for batch in batches for item in batch)]


class DeltaState(TypedDict):
    """A ``DeltaChannel`` list and a plain counter."""

    items: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=5)]
    count: Annotated[int, operator.add]


def delta_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """Two nodes appending to a ``DeltaChannel``."""
    builder = StateGraph(DeltaState)
    builder.add_node("one", lambda state: {"items": [f"one-{state['count']}"], "count": 1})
    builder.add_node("two", lambda state: {"items": [f"two-{state['count']}"], "count": 1})
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", END)
    return builder.compile(checkpointer=checkpointer)


# --------------------------------------------------------------------------- scenarios

THREAD: RunnableConfig = {"configurable": {"thread_id": "t-1"}}


def _ask(turn: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"question {turn}", id=f"h{turn}")]}


def tools_and_fork(make: Callable[[BaseCheckpointSaver[Any]], Graph], saver: Any) -> None:
    """Tool-calling turns, an edit of an old message from an old checkpoint (a fork)
    continued, and a removal."""
    graph = make(saver)
    for turn in range(3):
        graph.invoke(_ask(turn), THREAD)
    history = list(graph.get_state_history(THREAD))
    old = next(s for s in history if len(s.values.get("messages", [])) == 4)
    edited = HumanMessage("question 0, corrected", id="h0")
    fork = graph.update_state(old.config, {"messages": [edited]})
    graph.invoke(None, fork)
    graph.invoke(_ask(9), THREAD)
    graph.update_state(THREAD, {"messages": [RemoveMessage(id="ai-1")]})


def interrupted(make: Callable[[BaseCheckpointSaver[Any]], Graph], saver: Any) -> None:
    """An interrupt, and its resumption."""
    graph = make(saver)
    graph.invoke(_ask(0), THREAD)
    graph.invoke(Command(resume="yes"), THREAD)
    graph.invoke(_ask(1), THREAD)


def summarized(make: Callable[[BaseCheckpointSaver[Any]], Graph], saver: Any) -> None:
    """Turns until a summarization removes every message, and more turns after it."""
    graph = make(saver)
    for turn in range(4):
        graph.invoke(_ask(turn), THREAD)


def delta(make: Callable[[BaseCheckpointSaver[Any]], Graph], saver: Any) -> None:
    """Runs of a graph with a ``DeltaChannel`` (a snapshot every fifth update)."""
    graph = make(saver)
    for _ in range(4):
        graph.invoke({"items": [], "count": 0}, THREAD)


def _comparable(graph: Graph, config: RunnableConfig) -> list[tuple[Any, ...]]:
    """A thread's history without what differs between two runs by design (ids of
    checkpoints, tasks and interrupts, timestamps): parents as positions."""
    history = list(graph.get_state_history(config))
    positions = {s.config["configurable"]["checkpoint_id"]: n for n, s in enumerate(history)}
    return [
        (
            snapshot.values,
            snapshot.next,
            {key: value for key, value in (snapshot.metadata or {}).items() if key != "run_id"},
            [(t.name, [i.value for i in t.interrupts], t.result) for t in snapshot.tasks],
            None
            if snapshot.parent_config is None
            else positions.get(snapshot.parent_config["configurable"]["checkpoint_id"]),
        )
        for snapshot in history
    ]


CASES = [
    pytest.param(tool_graph, tools_and_fork, id="tools-and-fork"),
    pytest.param(interrupt_graph, interrupted, id="interrupt"),
    pytest.param(summarizing_graph, summarized, id="summarized"),
    pytest.param(delta_graph, delta, id="delta-channel"),
]


@pytest.mark.parametrize(("make", "scenario"), CASES)
def test_history_is_in_memory_savers(
    memory: ConversationMemory, make: Callable[[Any], Graph], scenario: Scenario
) -> None:
    """Every state of the history, and the latest state, equal InMemorySaver's."""
    reference, saver = InMemorySaver(), TieredSaver(memory)
    scenario(make, reference)
    scenario(make, saver)
    assert _comparable(make(saver), THREAD) == _comparable(make(reference), THREAD)
    assert make(saver).get_state(THREAD).values == make(reference).get_state(THREAD).values


def test_subgraph_namespace_is_in_memory_savers(memory: ConversationMemory) -> None:
    """A subgraph interrupted in its own namespace: the parent's history, the
    subgraph's state, every checkpoint of every namespace, and the resumed run."""
    reference, saver = InMemorySaver(), TieredSaver(memory)
    graphs = (subgraph_graph(reference), subgraph_graph(saver))
    for graph in graphs:
        graph.invoke(_ask(0), THREAD)
    inner = [g.get_state(THREAD, subgraphs=True).tasks[0].state for g in graphs]
    assert inner[0].values == inner[1].values  # type: ignore[union-attr]
    assert inner[1].values["messages"][-1].id == "draft"  # type: ignore[union-attr,index]
    namespaces = [
        sorted(
            (t.config["configurable"]["checkpoint_ns"].split(":")[0], t.metadata["step"])
            for t in g.checkpointer.list({"configurable": {"thread_id": "t-1"}})  # type: ignore[union-attr]
        )
        for g in graphs
    ]
    assert namespaces[0] == namespaces[1]
    assert {ns for ns, _ in namespaces[1]} == {"", "inner"}
    for graph in graphs:
        graph.invoke(Command(resume="ok"), THREAD)
    assert _comparable(graphs[1], THREAD) == _comparable(graphs[0], THREAD)


async def test_async_history_is_in_memory_savers(memory: ConversationMemory) -> None:
    """The async API: tool-calling turns, a fork and a removal, read back with
    ``aget_state_history``, as on InMemorySaver."""
    results = []
    for saver in (InMemorySaver(), TieredSaver(memory)):
        graph = tool_graph(saver)
        for turn in range(3):
            await graph.ainvoke(_ask(turn), THREAD)
        old = [s async for s in graph.aget_state_history(THREAD)][-3]
        fork = await graph.aupdate_state(old.config, {"messages": [HumanMessage("x", id="h0")]})
        await graph.ainvoke(None, fork)
        await graph.aupdate_state(THREAD, {"messages": [RemoveMessage(id="ai-call-1")]})
        history = [s async for s in graph.aget_state_history(THREAD)]
        results.append([(s.values, s.next, (s.metadata or {}).get("step")) for s in history])
    assert results[1] == results[0]


def _key(message: BaseMessage) -> str:
    """A message's whole content, as JSON."""
    return json.dumps(message_to_dict(message), sort_keys=True)


def test_each_message_revision_is_one_entry(memory: ConversationMemory) -> None:
    """The thread's session holds each message once, and each revision of an edited
    message once more: not a copy per checkpoint."""
    saver = TieredSaver(memory)
    tools_and_fork(tool_graph, saver)
    keys = [_key(entry.to_message()) for entry in memory.get_entries("t-1")]
    assert len(keys) == len(set(keys))
    texts = {(json.loads(key)["data"]["id"], json.loads(key)["data"]["content"]) for key in keys}
    assert {("h0", "question 0"), ("h0", "question 0, corrected")} <= texts
    history = tool_graph(saver).get_state_history(THREAD)
    held = {_key(m) for snapshot in history for m in snapshot.values.get("messages", [])}
    assert held == set(keys)
    assert [hit.entry.content for hit in memory.search("corrected", session_id="t-1")] == [
        "question 0, corrected"
    ]


def rerun_graph(checkpointer: BaseCheckpointSaver[Any]) -> Graph:
    """The agent loop with a tool whose result differs at each run."""
    runs = itertools.count()

    def tools(state: MessagesState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[union-attr]
        result = ToolMessage(f"run {next(runs)}", tool_call_id=call["id"], id="result")
        return {"messages": [result]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", _agent)
    builder.add_node("tools", tools)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", _route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def test_messages_with_no_entry_form_are_stored_as_values(memory: ConversationMemory) -> None:
    """A tool result that answers no open call of the session (a fork that re-ran a
    tool, with another result) cannot be an entry: that list is stored as a value,
    reads back the same, and the session stays well formed."""
    reference, saver = InMemorySaver(), TieredSaver(memory)
    for checkpointer in (reference, saver):
        graph = rerun_graph(checkpointer)
        graph.invoke(_ask(0), THREAD)
        before_tool = next(s for s in graph.get_state_history(THREAD) if s.next == ("tools",))
        graph.invoke(None, before_tool.config)  # the tool runs again on a fork
        assert graph.get_state(THREAD).values["messages"][2].content == "run 1"
        if checkpointer is reference:
            expected = _comparable(graph, THREAD)
        else:
            assert _comparable(graph, THREAD) == expected
    blob = blob_table.c
    with memory.engine.connect() as conn:
        kinds = conn.execute(sa.select(blob.type).where(blob.channel == "messages")).scalars()
        assert set(kinds) == {"tiermem:refs", "msgpack"}
    check_invariants(memory.engine)
