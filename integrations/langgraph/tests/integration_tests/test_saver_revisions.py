"""Edits and removals made through a graph's state (``update_state``,
``RemoveMessage``, a regenerated answer) reach the thread's memory: the entries they
supersede are retired, so the context, compression, search and recall see what the
user sees, while every earlier checkpoint still reads back exactly what it held. A
summarization that removes the oldest messages behind a summary (LangChain's
``SummarizationMiddleware``) retires nothing: what it summarized stays searchable.
On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from tiermem import RECALL_MARKER, ConversationMemory, MemoryConfig
from tiermem.testing import FakeSummarizer, check_invariants

from tiermem_langgraph import TieredSaver

Graph = CompiledStateGraph[Any, Any, Any, Any]
THREAD: RunnableConfig = {"configurable": {"thread_id": "t"}}
OLD, NEW = "My card number is 1111-2222", "My card number is 3333-4444"


@pytest.fixture(name="summarizer")
def fixture_summarizer() -> FakeSummarizer:
    """The deterministic summarizer, which keeps every prompt it is given."""
    return FakeSummarizer(digest_words=2)


@pytest.fixture(name="memory")
def fixture_memory(url: str, summarizer: FakeSummarizer) -> Iterator[ConversationMemory]:
    """A memory on the test's database; its invariants hold after the test."""
    memory = ConversationMemory(url, config=MemoryConfig(max_tokens=800), summarizer=summarizer)
    yield memory
    check_invariants(memory)
    memory.close()


def _chat(state: MessagesState) -> dict[str, Any]:
    """A model stand-in: answers the newest question, quoting it."""
    turn = sum(isinstance(m, HumanMessage) for m in state["messages"]) - 1
    quoted = state["messages"][-1].content
    return {"messages": [AIMessage(f"Filed under turquoise {turn}: {quoted}", id=f"ai{turn}")]}


def _graph(memory: ConversationMemory) -> Graph:
    builder = StateGraph(MessagesState)
    builder.add_node("chat", _chat)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", END)
    return builder.compile(checkpointer=TieredSaver(memory))


def _ask(graph: Graph, text: str, message_id: str) -> None:
    graph.invoke({"messages": [HumanMessage(text, id=message_id)]}, THREAD)


def _seen(messages: list[BaseMessage]) -> list[tuple[str | None, Any]]:
    return [(m.id, m.content) for m in messages]


def _state(graph: Graph) -> list[BaseMessage]:
    return list(graph.get_state(THREAD).values["messages"])


def _found(memory: ConversationMemory, query: str) -> list[str]:
    return [hit.entry.content for hit in memory.search(query, session_id="t", limit=50)]


def test_an_edit_and_a_removal_through_update_state_reach_the_memory(
    memory: ConversationMemory,
) -> None:
    """The issue's case: the corrected question replaces the old one and the removed
    answer goes, in search and in the context, as in the graph's state; the
    checkpoint before the edit still reads back the old question and the answer."""
    graph = _graph(memory)
    _ask(graph, OLD, "h0")
    before = graph.get_state(THREAD)
    graph.update_state(THREAD, {"messages": [HumanMessage(NEW, id="h0"), RemoveMessage(id="ai0")]})

    assert _found(memory, "1111") == []
    assert _found(memory, "turquoise") == []
    assert _found(memory, "3333") == [NEW]
    assert _seen(memory.get_messages("t")) == _seen(_state(graph)) == [("h0", NEW)]
    assert [e.content for e in memory.get_entries("t", include_compressed=False)] == [NEW]

    history = {
        s.config["configurable"]["checkpoint_id"]: s for s in graph.get_state_history(THREAD)
    }
    old = history[before.config["configurable"]["checkpoint_id"]]
    assert _seen(old.values["messages"]) == _seen(before.values["messages"])
    assert _seen(old.values["messages"]) == [
        ("h0", OLD),
        ("ai0", "Filed under turquoise 0: " + OLD),
    ]
    # Nothing is lost: the superseded entries are kept, marked retired.
    kept = memory.get_entries("t")
    assert [(e.content, e.retired_at is not None) for e in kept] == [
        (OLD, True),
        ("Filed under turquoise 0: " + OLD, True),
        (NEW, False),
    ]


def test_compression_summarizes_the_corrected_conversation(
    memory: ConversationMemory, summarizer: FakeSummarizer
) -> None:
    """What the summarizer is given, after an edit, is the edited text only."""
    graph = _graph(memory)
    _ask(graph, OLD, "h0")
    for turn in range(1, 4):
        _ask(graph, f"Garden question {turn}: water the tomatoes?", f"h{turn}")
    graph.update_state(THREAD, {"messages": [HumanMessage(NEW, id="h0"), RemoveMessage(id="ai0")]})
    assert memory.compress("t", force=True, keep=0) is not None
    prompts = "\n".join(summarizer.calls)
    assert "3333-4444" in prompts
    assert "1111" not in prompts and "turquoise 0" not in prompts


def test_an_answer_compressed_then_removed_is_not_recalled(memory: ConversationMemory) -> None:
    """Recall brings back compressed originals, never one the state removed since."""
    graph = _graph(memory)
    _ask(graph, "Keep my passport safe", "h0")
    for turn in range(1, 4):
        _ask(graph, f"Garden question {turn}: water the tomatoes?", f"h{turn}")
    assert memory.compress("t", force=True, keep=2) is not None
    query = "turquoise passport"
    assert "turquoise 0" in _recalled(memory, query)  # recalled while current
    graph.update_state(THREAD, {"messages": [RemoveMessage(id="ai0")]})
    assert "turquoise 0" not in _recalled(memory, query)
    assert all("turquoise 0" not in text for text in _found(memory, "turquoise"))


def test_a_compressed_answer_removed_later_stays_under_its_summary(
    memory: ConversationMemory,
) -> None:
    """Retiring an entry that compression covered writes its summary into its row
    (a current entry's summary is read off the ranges, a retired one's is not):
    the summary still lists it, and the doctor (the fixture) counts it there."""
    graph = _graph(memory)
    for turn in range(4):
        _ask(graph, f"Garden question {turn}: water the tomatoes?", f"h{turn}")
    compression = memory.compress("t", force=True, keep=2)
    assert compression is not None
    summary = compression.summary
    graph.update_state(THREAD, {"messages": [RemoveMessage(id="ai0")]})
    (removed,) = [e for e in memory.get_entries("t") if e.message.id == "ai0"]
    assert removed.retired_at is not None
    assert removed.compressed and removed.summary_id == summary.id
    assert removed.id in memory.get_summaries("t")[0].original_entry_ids


def _recalled(memory: ConversationMemory, query: str) -> str:
    """The text of the block of originals a read recalls for ``query``."""
    messages = memory.get_messages("t", query=query)
    return "".join(str(m.content) for m in messages if RECALL_MARKER in m.additional_kwargs)


def test_a_summarization_that_removes_every_message_retires_nothing(
    memory: ConversationMemory,
) -> None:
    """``RemoveMessage(REMOVE_ALL_MESSAGES)``, a summary and the messages kept (what
    ``SummarizationMiddleware`` writes): the summarized messages stay searchable."""
    graph = _graph(memory)
    for turn in range(3):
        _ask(graph, f"Question {turn} about the heron {turn}", f"h{turn}")
    kept = _state(graph)[-2:]
    summary = HumanMessage("Here is a summary of the conversation to date: herons.", id="sum")
    graph.update_state(
        THREAD, {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), summary, *kept]}
    )
    assert _seen(_state(graph)) == _seen([summary, *kept])
    assert sorted(_found(memory, "heron")) == sorted(
        [f"Question {n} about the heron {n}" for n in range(3)]
        + [f"Filed under turquoise {n}: Question {n} about the heron {n}" for n in range(3)]
        + [str(summary.content)]
    )
    assert all(e.retired_at is None for e in memory.get_entries("t"))


def test_a_regenerated_answer_retires_the_old_one(memory: ConversationMemory) -> None:
    """Regenerate: the last answer removed and a new one added, or the same answer id
    given a new content; only the newest answer is current."""
    graph = _graph(memory)
    _ask(graph, "Name a bird", "h0")
    _ask(graph, "Name another bird", "h1")
    graph.update_state(
        THREAD,
        {"messages": [RemoveMessage(id="ai1"), AIMessage("A kingfisher, regenerated", id="ai1b")]},
    )
    assert _found(memory, "turquoise") == ["Filed under turquoise 0: Name a bird"]
    assert _found(memory, "kingfisher") == ["A kingfisher, regenerated"]
    graph.update_state(THREAD, {"messages": [AIMessage("A hoopoe, regenerated", id="ai1b")]})
    assert _found(memory, "regenerated") == ["A hoopoe, regenerated"]
    assert _seen(memory.get_messages("t")) == _seen(_state(graph))


def test_a_fork_retires_the_branch_it_leaves(memory: ConversationMemory) -> None:
    """``update_state`` from an older checkpoint (a chat UI's edit): the thread now
    shows the fork, so what the branch left behind held and the fork does not is
    retired; a saver that knows only what it reads retires as well."""
    graph = _graph(memory)
    _ask(graph, "Name a bird", "h0")
    first = graph.get_state(THREAD).config
    _ask(graph, "Name another bird", "h1")
    graph.update_state(first, {"messages": [HumanMessage("Name a fish", id="h1b")]})
    assert _seen(memory.get_messages("t")) == _seen(_state(graph))
    assert sorted(_found(memory, "bird")) == ["Filed under turquoise 0: Name a bird", "Name a bird"]
    fresh = _graph(memory)  # another saver: it knows only what it reads
    fresh.update_state(THREAD, {"messages": [RemoveMessage(id="h0")]})
    assert _found(memory, "bird") == ["Filed under turquoise 0: Name a bird"]
    assert _seen(memory.get_messages("t")) == _seen(_state(fresh))


def test_a_regenerate_from_the_checkpoint_before_the_answer(memory: ConversationMemory) -> None:
    """The graph run again from the checkpoint before its last answer: the new answer
    replaces the old one in the memory too."""
    answers = iter(["a heron", "a kingfisher"])

    def chat(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(next(answers))]}

    builder = StateGraph(MessagesState)
    builder.add_node("chat", chat)
    builder.add_edge(START, "chat")
    builder.add_edge("chat", END)
    graph = builder.compile(checkpointer=TieredSaver(memory))
    _ask(graph, "Name a bird", "h0")
    before = next(s for s in graph.get_state_history(THREAD) if s.next == ("chat",))
    graph.invoke(None, before.config)
    assert [m.content for m in _state(graph)] == ["Name a bird", "a kingfisher"]
    assert _found(memory, "heron kingfisher") == ["a kingfisher"]
    assert _seen(memory.get_messages("t")) == _seen(_state(graph))


def test_an_export_keeps_what_was_retired(memory: ConversationMemory) -> None:
    """An export holds the retired entries with their time; importing it elsewhere
    gives a session that searches and reads as the original does."""
    graph = _graph(memory)
    _ask(graph, OLD, "h0")
    graph.update_state(THREAD, {"messages": [HumanMessage(NEW, id="h0"), RemoveMessage(id="ai0")]})
    state = memory.export_session("t")
    assert [e.retired_at is not None for e in state.entries] == [True, True, False]
    memory.import_session(state.to_json(), session_id="copy")
    assert memory.export_session("copy").entries == state.entries
    assert [hit.entry.content for hit in memory.search("card", session_id="copy")] == [NEW]
    assert _seen(memory.get_messages("copy")) == [("h0", NEW)]


async def test_the_async_api_retires_as_the_sync_one(memory: ConversationMemory) -> None:
    """``ainvoke`` and ``aupdate_state``: the same edit retires the same entries."""
    graph = _graph(memory)
    await graph.ainvoke({"messages": [HumanMessage(OLD, id="h0")]}, THREAD)
    edit = {"messages": [HumanMessage(NEW, id="h0"), RemoveMessage(id="ai0")]}
    await graph.aupdate_state(THREAD, edit)
    hits = await memory.asearch("card turquoise", session_id="t")
    assert [hit.entry.content for hit in hits] == [NEW]
    assert _seen(await memory.aget_messages("t")) == [("h0", NEW)]


class _Model(GenericFakeChatModel):
    """A scripted chat model that ``create_agent`` may bind tools to."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, AIMessage]:
        return self


def test_summarization_middleware_in_an_agent_retires_nothing(
    memory: ConversationMemory,
) -> None:
    """``create_agent`` with LangChain's ``SummarizationMiddleware``: once it replaces
    the oldest messages by its summary, they stay current and searchable."""
    answers = iter([AIMessage(f"Heron fact {n}", id=f"ai{n}") for n in range(4)])
    summarizer = _Model(messages=iter([AIMessage("Summary: herons fish at dawn.")] * 4))
    middleware = SummarizationMiddleware(
        model=summarizer, trigger=("messages", 5), keep=("messages", 2)
    )
    agent = create_agent(
        _Model(messages=answers), [], middleware=[middleware], checkpointer=TieredSaver(memory)
    )
    for n in range(4):
        agent.invoke({"messages": [HumanMessage(f"Tell me heron fact {n}", id=f"h{n}")]}, THREAD)
    state = agent.get_state(THREAD).values["messages"]
    assert "herons fish at dawn" in str(state[0].content)  # summarized
    assert "h0" not in [m.id for m in state]
    originals = [f"Tell me heron fact {n}" for n in range(4)] + [
        f"Heron fact {n}" for n in range(4)
    ]
    assert set(originals) <= set(_found(memory, "heron fact"))
    assert all(entry.retired_at is None for entry in memory.get_entries("t"))
