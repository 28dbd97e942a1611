"""``recall_tool``: lets an agent search what tiermem summarized away."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from tiermem import ConversationMemory, SearchHit

from .middleware import session_id_from_config

__all__ = ["RECALL_DESCRIPTION", "format_hits", "recall_tool"]

RECALL_DESCRIPTION = (
    "Search the older parts of this conversation that were summarized away and return "
    "them verbatim. Use it when the summary mentions something whose exact details "
    "(names, numbers, tool outputs, decisions) you need. Input: a few keywords."
)
"""The tool description the model sees."""

_MAX_CHARS = 1_000
_OVERFETCH = 4


def format_hits(query: str, hits: Sequence[SearchHit]) -> str:
    """Render search hits as the tool's answer.

    Args:
        query: The search text, echoed when nothing matches.
        hits: Search results, best first.

    Returns:
        One line per hit: sequence number, role, whether it was summarized, content.
    """
    if not hits:
        return f"Nothing in this conversation's earlier history matches {query!r}."
    lines = [f"{len(hits)} passage(s) from this conversation:"]
    for hit in hits:
        entry = hit.entry
        state = "summarized" if entry.compressed else "recent"
        text = str(entry.content).replace("\n", " ")
        if len(text) > _MAX_CHARS:
            text = text[:_MAX_CHARS] + "..."
        lines.append(f"[#{entry.seq} {entry.role}, {state}] {text}")
    return "\n".join(lines)


def recall_tool(
    memory: ConversationMemory,
    *,
    session_key: str = "thread_id",
    limit: int = 5,
    include_active: bool = False,
    name: str = "recall_memory",
) -> BaseTool:
    """Build a tool that searches what was summarized away in the current conversation.

    The session is read from ``config["configurable"][session_key]`` of the running
    agent, so the tool only ever sees its own conversation.

    Args:
        memory: The memory the agent's :class:`~tiermem_agents.TieredMemoryMiddleware`
            records into.
        session_key: The ``configurable`` key holding the session id.
        limit: Maximum number of passages returned.
        include_active: Also return entries that are not compressed (which the
            model normally still sees in its context).
        name: The tool's name.

    Returns:
        A tool taking ``query`` (keywords) and returning matching passages as text.
    """
    # Active entries compete for the same slots; over-fetch so filtering leaves `limit`.
    fetch = limit if include_active else limit * _OVERFETCH

    def pick(hits: Sequence[SearchHit]) -> list[SearchHit]:
        return [h for h in hits if include_active or h.entry.compressed][:limit]

    def recall(query: str, config: RunnableConfig) -> str:
        session_id = session_id_from_config(config, session_key)
        return format_hits(query, pick(memory.search(query, session_id=session_id, limit=fetch)))

    async def arecall(query: str, config: RunnableConfig) -> str:
        session_id = session_id_from_config(config, session_key)
        hits = await memory.asearch(query, session_id=session_id, limit=fetch)
        return format_hits(query, pick(hits))

    return StructuredTool.from_function(
        func=recall, coroutine=arecall, name=name, description=RECALL_DESCRIPTION
    )
