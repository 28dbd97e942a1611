"""What a tool reaches: the memory of the server's project (or, with
``--all-projects``, another one's), and how results and errors go back to the
client (structured content plus text; tiermem errors as tool errors)."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel

from ..errors import InvalidArgument, StorageUnavailable, TiermemError
from ..memory import ConversationMemory

__all__ = [
    "MAX_OTHER_PROJECTS",
    "MemoryTools",
    "peek_contexts",
    "to_message",
    "tool_error",
    "tool_result",
]

T = TypeVar("T")

#: How many memories of projects other than its own a server with ``all_projects``
#: keeps; the least recently used one is closed when another is needed (its project
#: gets a new memory on its next call).
MAX_OTHER_PROJECTS = 16


def tool_result(model: BaseModel, text: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=model.model_dump(mode="json"),
    )


def tool_error(error: BaseException) -> CallToolResult:
    """A tool error (``isError``) carrying the typed error's class and message."""
    # KeyError subclasses (SessionNotFound) quote their message in str().
    message = error.args[0] if len(error.args) == 1 else str(error)
    return CallToolResult(
        content=[TextContent(type="text", text=f"{type(error).__name__}: {message}")],
        is_error=True,
    )


# ---------------------------------------------------------------- the memories


class MemoryTools:
    """The memories the tools use: one per project, on one engine.

    Args:
        memory: the memory of the server's project (its engine is shared by the
            memories of other projects, made on first use with ``all_projects``).
        read_only: the server serves only reading tools and never creates tables.
        all_projects: tools may name any project, not only ``memory.project``.
    """

    def __init__(
        self, memory: ConversationMemory, *, read_only: bool = False, all_projects: bool = False
    ) -> None:
        self.memory = memory
        self.read_only = read_only
        self.all_projects = all_projects
        self._others: OrderedDict[str, ConversationMemory] = OrderedDict()
        self._lock = threading.Lock()
        self._tables_seen = False

    @property
    def project(self) -> str:
        """The server's project."""
        return self.memory.project

    def memory_for(self, project: str | None) -> ConversationMemory:
        """The memory of ``project`` (``None``: the server's).

        Raises:
            InvalidArgument: another project, and the server serves only its own.
        """
        memory, evicted = self._memory_and_evicted(project)
        if evicted is not None:
            evicted.close()
        return memory

    def _memory_and_evicted(
        self, project: str | None
    ) -> tuple[ConversationMemory, ConversationMemory | None]:
        """The memory of ``project``, and the least recently used memory of another
        project that it pushed out of the :data:`MAX_OTHER_PROJECTS` kept (the
        caller closes it)."""
        if project is None or project == self.project:
            return self.memory, None
        if not self.all_projects:
            raise InvalidArgument(
                f"this server serves project {self.project!r} only, not {project!r}: "
                "start it with --all-projects to reach every project"
            )
        evicted = None
        with self._lock:
            other = self._others.get(project)
            if other is None:
                base = self.memory
                other = ConversationMemory(engine=base.engine, project=project, config=base.config)
                self._others[project] = other
                if len(self._others) > MAX_OTHER_PROJECTS:
                    evicted = self._others.popitem(last=False)[1]
            self._others.move_to_end(project)
        return other, evicted

    @property
    def kept_projects(self) -> int:
        """How many memories of other projects the server keeps."""
        return len(self._others)

    def _check_tables(self) -> None:
        """A read-only server never creates tiermem's tables: refuse a database
        without them (checked until they are seen once)."""
        if self._tables_seen:
            return
        if not self.memory.database.has_tables():
            where = self.memory.engine.url.render_as_string(hide_password=True)
            raise StorageUnavailable(f"no tiermem tables in {where}: nothing stored yet")
        self._tables_seen = True

    async def call(
        self,
        project: str | None,
        work: Callable[[ConversationMemory], Awaitable[T]],
        present: Callable[[ConversationMemory, T], tuple[BaseModel, str]],
    ) -> CallToolResult:
        """Run ``work`` on the memory of ``project`` and present its result; a
        tiermem error (a database failure included) becomes a tool error."""
        try:
            memory, evicted = self._memory_and_evicted(project)
            if evicted is not None:
                # Closing drains its background work: not on the event loop.
                await asyncio.to_thread(evicted.close)
            if self.read_only:
                await asyncio.to_thread(self._check_tables)
            value = await work(memory)
            model, text = present(memory, value)
        except TiermemError as error:
            return tool_error(error)
        return tool_result(model, text)

    def close(self) -> None:
        """Close the memories (the other projects' share the engine: closed last)."""
        for other in self._others.values():
            other.close()
        self.memory.close()


def peek_contexts(memory: ConversationMemory, session_ids: list[str]) -> dict[str, str]:
    """The context text of sessions, read without recording another access (the load
    recorded one)."""
    texts = {}
    for session_id in session_ids:
        try:
            texts[session_id] = memory.peek(session_id).context
        except TiermemError:
            continue  # pruned since it was loaded
    return texts


def to_message(role: str, content: str) -> BaseMessage:
    if role == "user":
        return HumanMessage(content=content)
    if role == "assistant":
        return AIMessage(content=content)
    return SystemMessage(content=content)


# ---------------------------------------------------------------- the server
