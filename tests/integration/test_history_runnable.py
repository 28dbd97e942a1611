"""``mem.history``: a LangChain chat history, driven by RunnableWithMessageHistory."""

from __future__ import annotations

from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from tiermem import ConversationMemory, MemoryConfig, is_summary_message
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory

PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{input}")]
)


class RecordingModel(FakeMessagesListChatModel):
    """A fake chat model that also keeps the messages of every call."""

    seen: list[list[BaseMessage]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def _chain(memory: ConversationMemory, model: Any) -> RunnableWithMessageHistory:
    return RunnableWithMessageHistory(
        PROMPT | model,
        memory.history,
        input_messages_key="input",
        history_messages_key="history",
    )


def _config(session_id: str) -> Any:
    return {"configurable": {"session_id": session_id}}


def test_history_is_a_chat_message_history(make_memory: MemoryFactory) -> None:
    """history() returns a BaseChatMessageHistory over one session: add, read, clear."""
    memory = make_memory()
    history = memory.history("s")
    assert isinstance(history, BaseChatMessageHistory)
    history.add_messages([HumanMessage("hi"), AIMessage("hello")])
    history.add_user_message("again")
    assert [m.content for m in history.messages] == ["hi", "hello", "again"]
    assert [e.content for e in memory.get_entries("s")] == ["hi", "hello", "again"]
    history.clear()
    assert history.messages == [] and memory.get_entries("s") == []


async def test_history_async_methods(make_memory: MemoryFactory) -> None:
    """aadd_messages, aget_messages and aclear work on the same session."""
    memory = make_memory()
    history = memory.history("s")
    await history.aadd_messages([HumanMessage("hi"), AIMessage("hello")])
    assert [m.content for m in await history.aget_messages()] == ["hi", "hello"]
    await history.aclear()
    assert await history.aget_messages() == []


def test_runnable_with_message_history_sync(make_memory: MemoryFactory) -> None:
    """Each invoke sees the earlier turns of its own session and stores the new turn."""
    memory = make_memory()
    model = RecordingModel(responses=[AIMessage(f"reply {i}") for i in range(3)])
    model.seen = []
    chain = _chain(memory, model)
    first = chain.invoke({"input": "one"}, config=_config("a"))
    chain.invoke({"input": "two"}, config=_config("a"))
    chain.invoke({"input": "other"}, config=_config("b"))
    assert first.content == "reply 0"
    assert [m.content for m in model.seen[1]] == ["Be brief.", "one", "reply 0", "two"]
    assert [m.content for m in model.seen[2]] == ["Be brief.", "other"]
    assert [e.content for e in memory.get_entries("a")] == ["one", "reply 0", "two", "reply 1"]
    assert [e.role for e in memory.get_entries("b")] == ["user", "assistant"]


async def test_runnable_with_message_history_async(make_memory: MemoryFactory) -> None:
    """ainvoke reads and writes the history through the async twins."""
    memory = make_memory()
    model = GenericFakeChatModel(messages=iter([AIMessage("first"), AIMessage("second")]))
    chain = _chain(memory, model)
    await chain.ainvoke({"input": "hello"}, config=_config("s"))
    reply = await chain.ainvoke({"input": "and now?"}, config=_config("s"))
    assert reply.content == "second"
    assert [e.content for e in await memory.aget_entries("s")] == [
        "hello",
        "first",
        "and now?",
        "second",
    ]


def test_chain_sees_summary_once_compressed(make_memory: MemoryFactory) -> None:
    """Past the budget the chain is handed the summary message plus recent turns."""
    memory = make_memory(
        config=MemoryConfig(max_tokens=200, recent_window=2, min_entries_to_compress=2),
        summarizer=FakeSummarizer(),
    )
    model = RecordingModel(responses=[AIMessage("a fairly long answer with several words")])
    model.seen = []
    chain = _chain(memory, model)
    for turn in range(12):
        chain.invoke({"input": f"question {turn} with a few extra words"}, config=_config("s"))
    last = model.seen[-1]
    assert is_summary_message(last[1])
    assert memory.counter.count_messages(memory.get_messages("s")) <= 200
    assert len(memory.get_entries("s")) == 24
