"""The LangChain chat-history interface over one tiermem session.

``BaseChatMessageHistory`` is deprecated upstream (removal planned for
langchain-core 2.0); this module is the only place tiermem subclasses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal, Protocol

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from ._core.render import is_summary_message
from .errors import InvalidArgument

__all__ = ["SessionMessages", "TieredChatMessageHistory"]

__all__ = ["SummaryRole", "TieredChatMessageHistory"]

#: The role the summary message takes in a history's ``messages``.
SummaryRole = Literal["system", "human"]


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

    ``messages`` is what the model should see: the summaries as one message, then
    the active messages. Adding messages stores them (and may compress); ``clear``
    deletes the session.

    Args:
        memory: the memory holding the session.
        session_id: the session.
        summary_role: ``"system"`` (the default): the summary is tiermem's
            ``SystemMessage``. ``"human"``: it is the first human turn, a
            ``HumanMessage`` marked ``additional_kwargs["lc_source"] ==
            "summarization"`` as ``SummarizationMiddleware`` sends it, so a prompt
            with its own system message sends one system message, and a conversation
            whose first kept message is the assistant's still begins with a human
            turn (providers that require either accept it). ``is_summary_message``
            recognizes it either way. Pass it through ``RunnableWithMessageHistory``
            as ``lambda session_id: mem.history(session_id, summary_role="human")``.

    Raises:
        InvalidArgument: for another ``summary_role``.
    """

    def __init__(
        self, memory: SessionMessages, session_id: str, *, summary_role: SummaryRole = "system"
    ) -> None:
        if summary_role not in ("system", "human"):
            raise InvalidArgument(f"summary_role must be 'system' or 'human', got {summary_role!r}")
        self.memory = memory
        self.session_id = session_id
        self.summary_role = summary_role

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The context: the summary (in ``summary_role``), then active messages."""
        return self._in_role(self.memory.get_messages(self.session_id))

    async def aget_messages(self) -> list[BaseMessage]:
        """Async :attr:`messages`."""
        return self._in_role(await self.memory.aget_messages(self.session_id))

    def _in_role(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """``messages`` with the summary message in ``summary_role``."""
        if self.summary_role == "system":
            return messages
        # The summary head only: the recalled block is a human message already.
        return [
            _as_human_turn(m) if isinstance(m, SystemMessage) and is_summary_message(m) else m
            for m in messages
        ]

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


def _as_human_turn(summary: BaseMessage) -> HumanMessage:
    """The summary message as the first human turn, marked as a summary."""
    kwargs = {**summary.additional_kwargs, "lc_source": "summarization"}
    return HumanMessage(content=summary.content, id=summary.id, additional_kwargs=kwargs)
