"""LangChain incumbents: classic memories, ``trim_messages`` and ``SummarizationMiddleware``.

All of them count tokens by the benchmark rule (tiktoken cl100k per message
content plus 3 per message) and summarise with a fake chat model that answers
a fixed text, so only the memory's own bookkeeping is measured.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any, cast

from base import MAX_TOKENS, SUMMARY_TEXT, Contender
from corpus import MESSAGE_OVERHEAD_TOKENS, count_text_tokens
from langchain.agents.middleware import SummarizationMiddleware
from langchain_classic.memory import (
    ConversationSummaryBufferMemory,
    ConversationTokenBufferMemory,
)
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    MessageLikeRepresentation,
    convert_to_messages,
    trim_messages,
)
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime

# The classic memories are deprecated upstream; the benchmark measures them on purpose.
warnings.filterwarnings("ignore", category=DeprecationWarning)


def _message_text(message: MessageLikeRepresentation) -> str:
    """Return the text of a LangChain message (or message-like value)."""
    if isinstance(message, BaseMessage):
        return message.text
    return convert_to_messages([message])[0].text


def count_lc_messages(messages: Iterable[MessageLikeRepresentation]) -> int:
    """Count LangChain messages by the benchmark rule (cl100k + 3 per message)."""
    return sum(count_text_tokens(_message_text(m)) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def lc_texts(messages: Sequence[BaseMessage]) -> list[str]:
    """Return the texts of LangChain messages."""
    return [m.text for m in messages]


class TiktokenFakeChatModel(FakeListChatModel):
    """``FakeListChatModel`` whose token counting is tiktoken cl100k (the benchmark rule)."""

    def get_num_tokens(self, text: str) -> int:
        """Count ``text`` with cl100k."""
        return count_text_tokens(text)

    def get_num_tokens_from_messages(
        self, messages: list[BaseMessage], tools: Sequence[Any] | None = None
    ) -> int:
        """Count ``messages`` by the benchmark rule."""
        return count_lc_messages(messages)


def summary_model() -> TiktokenFakeChatModel:
    """Return a fake model that answers every call with ``SUMMARY_TEXT``."""
    return TiktokenFakeChatModel(responses=[SUMMARY_TEXT])


class _LcContender(Contender[list[BaseMessage]]):
    """Shared ``texts`` for contenders whose context is LangChain messages."""

    def texts(self, context: list[BaseMessage]) -> list[str]:
        """Return the message texts."""
        return lc_texts(context)


class ClassicMemoryContender(_LcContender):
    """langchain-classic ``ConversationTokenBufferMemory`` or ``...SummaryBufferMemory``."""

    def __init__(self, summarize: bool) -> None:
        """Build the token buffer, or the summary buffer when ``summarize`` is set."""
        memory_cls = ConversationSummaryBufferMemory if summarize else ConversationTokenBufferMemory
        self._memory = memory_cls(
            llm=summary_model(), max_token_limit=MAX_TOKENS, return_messages=True
        )

    def step(self, human: str, ai: str) -> list[BaseMessage]:
        """Save the exchange (which prunes, and summarises) and load the history."""
        self._memory.save_context({"input": human}, {"output": ai})
        history: list[BaseMessage] = self._memory.load_memory_variables({})["history"]
        return history


class TrimMessagesContender(_LcContender):
    """langchain-core ``InMemoryChatMessageHistory`` + ``trim_messages`` on every turn."""

    def __init__(self) -> None:
        """Start an empty in-memory history."""
        self._history = InMemoryChatMessageHistory()

    def step(self, human: str, ai: str) -> list[BaseMessage]:
        """Append both messages, then trim the whole history to the budget."""
        self._history.add_user_message(human)
        self._history.add_ai_message(ai)
        return trim_messages(
            self._history.messages,
            max_tokens=MAX_TOKENS,
            strategy="last",
            token_counter=count_lc_messages,
        )


class SummarizationMiddlewareContender(_LcContender):
    """langchain ``SummarizationMiddleware`` driven through its ``before_model`` hook.

    The agent state is a plain message list, and the hook's update is applied
    with LangGraph's ``add_messages`` reducer as the agent graph would. It
    summarises once the context reaches ``MAX_TOKENS`` and keeps the newest
    ``KEEP_TOKENS``, so the context handed to the model stays under the budget.
    """

    KEEP_TOKENS = 1600

    def __init__(self) -> None:
        """Build the middleware with the fake summary model and the cl100k counter."""
        self._middleware: SummarizationMiddleware[Any, Any] = SummarizationMiddleware(
            model=summary_model(),
            trigger=("tokens", MAX_TOKENS),
            keep=("tokens", self.KEEP_TOKENS),
            token_counter=count_lc_messages,
        )
        self._runtime: Runtime[None] = Runtime(context=None)
        self._messages: list[AnyMessage] = []

    def step(self, human: str, ai: str) -> list[BaseMessage]:
        """Append both messages and run the hook an agent runs before each model call."""
        self._messages.extend((HumanMessage(human), AIMessage(ai)))
        update = self._middleware.before_model({"messages": self._messages}, self._runtime)
        if update is not None:
            current: list[MessageLikeRepresentation] = list(self._messages)
            self._messages = cast("list[AnyMessage]", add_messages(current, update["messages"]))
        return list(self._messages)
