"""The LangChain chat-history interface over one tiermem session.

``BaseChatMessageHistory`` is deprecated upstream (removal planned for
langchain-core 2.0); this module is the only place tiermem subclasses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage

__all__ = ["SessionMessages", "TieredChatMessageHistory"]


class SessionMessages(Protocol):
    """What a history needs of its memory (a ``ConversationMemory`` is one)."""

    def get_messages(self, session_id: str) -> list[BaseMessage]: ...

    async def aget_messages(self, session_id: str) -> list[BaseMessage]: ...

    def add_messages(self, session_id: str, messages: Iterable[BaseMessage]) -> object: ...

    async def aadd_messages(self, session_id: str, messages: Iterable[BaseMessage]) -> object: ...

    def clear_session(self, session_id: str) -> int: ...

    async def aclear_session(self, session_id: str) -> int: ...


class TieredChatMessageHistory(BaseChatMessageHistory):
    """Chat history of one session; pass ``mem.history`` as ``get_session_history``
    to ``RunnableWithMessageHistory``.

    ``messages`` is what the model should see: the summaries as one system
    message, then the active messages. Adding messages stores them (and may
    compress); ``clear`` deletes the session.
    """

    def __init__(self, memory: SessionMessages, session_id: str) -> None:
        self.memory = memory
        self.session_id = session_id

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The context: summaries, then active messages."""
        return self.memory.get_messages(self.session_id)

    async def aget_messages(self) -> list[BaseMessage]:
        """Async :attr:`messages`."""
        return await self.memory.aget_messages(self.session_id)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Store messages in one transaction."""
        self.memory.add_messages(self.session_id, messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async :meth:`add_messages`."""
        await self.memory.aadd_messages(self.session_id, messages)

    def clear(self) -> None:
        """Delete the session's entries and summaries."""
        self.memory.clear_session(self.session_id)

    async def aclear(self) -> None:
        """Async :meth:`clear`."""
        await self.memory.aclear_session(self.session_id)
