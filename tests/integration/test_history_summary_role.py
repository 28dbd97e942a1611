"""``mem.history(session_id, summary_role="human")``: the summary is the first human
turn, so a prompt with its own system message sends one system message and the visible
conversation begins with a human turn even when the first kept message is the
assistant's (providers that require either accept the context)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from tiermem import MemoryConfig, is_summary_message
from tiermem.errors import InvalidArgument
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory

PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{input}")]
)
CONFIG = MemoryConfig(auto_compress=False)


class RecordingModel(FakeMessagesListChatModel):
    """A fake chat model that keeps the messages of every call."""

    seen: list[list[BaseMessage]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def compressed_session(make_memory: MemoryFactory) -> Any:
    """A memory whose session "s" has a summary followed by an assistant message."""
    memory = make_memory(config=CONFIG, summarizer=FakeSummarizer())
    for n in range(4):
        memory.add_user_message("s", f"question {n}")
        memory.add_assistant_message("s", f"answer {n}")
    memory.compress("s", force=True, keep=3)  # keeps answer 2, question 3, answer 3
    context = memory.get_messages("s")
    assert is_summary_message(context[0]) and isinstance(context[1], AIMessage)
    return memory


def test_the_summary_is_the_first_human_turn(make_memory: MemoryFactory) -> None:
    """The summary message becomes a HumanMessage marked as a summary; the rest is as
    ``get_messages`` renders it, sync and async."""
    memory = compressed_session(make_memory)
    rendered = memory.get_messages("s")
    for messages in (
        memory.history("s", summary_role="human").messages,
        asyncio.run(memory.history("s", summary_role="human").aget_messages()),
    ):
        first = messages[0]
        assert isinstance(first, HumanMessage) and is_summary_message(first)
        assert first.additional_kwargs["lc_source"] == "summarization"
        assert first.content == rendered[0].content
        assert messages[1:] == rendered[1:]
        assert not any(isinstance(m, SystemMessage) for m in messages)
    assert memory.history("s").messages == rendered  # the default stays "system"


def test_a_prompt_with_a_system_message_sends_one(make_memory: MemoryFactory) -> None:
    """Through RunnableWithMessageHistory, the model sees one system message (the
    prompt's), then the summary as a human turn."""
    memory = compressed_session(make_memory)
    model = RecordingModel(responses=[AIMessage("ok")], seen=[])
    chain = RunnableWithMessageHistory(
        PROMPT | model,
        lambda session_id: memory.history(session_id, summary_role="human"),
        input_messages_key="input",
        history_messages_key="history",
    )
    chain.invoke({"input": "and now?"}, {"configurable": {"session_id": "s"}})
    sent = model.seen[0]
    assert [type(m) for m in sent[:2]] == [SystemMessage, HumanMessage]
    assert sum(isinstance(m, SystemMessage) for m in sent) == 1
    assert is_summary_message(sent[1])
    stored = memory.get_entries("s")
    assert [e.content for e in stored[-2:]] == ["and now?", "ok"]  # the summary not stored


def test_another_summary_role_is_refused(make_memory: MemoryFactory) -> None:
    """A role other than "system" or "human" is an InvalidArgument."""
    memory = make_memory()
    with pytest.raises(InvalidArgument, match="summary_role"):
        memory.history("s", summary_role="assistant")
