"""How ``ConversationSummaryBufferMemory``'s keywords map onto tiermem.

``TieredConversationMemory`` takes every keyword of the class it replaces: most with
the same meaning (``max_token_limit`` becomes a ``MemoryConfig`` budget, ``llm`` the
summarizer, ``prompt`` the summary prompt); the two that hold the incumbent's
in-process state are refused with what to use instead. Unknown keywords are refused
too: LangChain's memories ignore them, which would leave a misspelt budget unused.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.prompts import BasePromptTemplate
from tiermem.errors import InvalidArgument

__all__ = ["REFUSED", "budget_changes", "check_keywords", "summary_prompt"]

#: Keywords of ``ConversationSummaryBufferMemory`` that have no counterpart here, with
#: what to use instead. Both hold state the incumbent keeps in the Python object,
#: which tiermem keeps in its database.
REFUSED: dict[str, str] = {
    "chat_memory": (
        "TieredConversationMemory takes no chat_memory: the conversation is stored in "
        "the tiermem session; pass memory=ConversationMemory(...) and session_id=... "
        "instead (memory.history(session_id) is that session as a chat history, and "
        "memory.add_messages(session_id, history.messages) copies an existing one in)"
    ),
    "moving_summary_buffer": (
        "TieredConversationMemory takes no moving_summary_buffer: tiermem keeps the "
        "session's summaries in its database; read them with the moving_summary_buffer "
        "property or memory.get_summaries(session_id), and start a conversation from a "
        "summary with memory.add_context(session_id, text, source='summary')"
    ),
}

#: The low-water mark a compression falls to, as a share of ``max_token_limit``.
#: ``ConversationSummaryBufferMemory`` prunes to just under its limit after every turn;
#: freeing 5 % of the budget keeps nearly as many messages while asking the model for
#: a summary about every other turn.
COMPRESS_TO = 0.95
#: The share of the budget the summaries may take before they are merged into one.
#: They count in the budget (the incumbent's summary does not), so they stay small.
SUMMARY_SHARE = 0.05


def budget_changes(max_token_limit: int) -> dict[str, Any]:
    """The ``MemoryConfig`` changes that make ``max_token_limit`` the context budget:
    the context (summaries included) never passes it, and it keeps as many recent
    messages verbatim as fit, summarizing only the oldest that do not."""
    return {
        "max_tokens": max_token_limit,
        "max_entries": None,  # only tokens count, as in the incumbent
        "compress_to": COMPRESS_TO,
        "summary_share": SUMMARY_SHARE,
        # The incumbent shows no recalled originals; a recall block would take its
        # share of the budget from the recent messages.
        "recall_share": 0.0,
        # Summarize from one exchange on, keeping at least the latest exchange.
        "recent_window": 2,
        "min_entries_to_compress": 2,
    }


def summary_prompt(prompt: object) -> str:
    """tiermem's ``summary_prompt`` from the incumbent's ``prompt``: its template with
    ``{new_lines}`` as tiermem's ``{conversation}`` and an empty ``{summary}`` (tiermem
    summarizes the new lines alone and merges summaries later).

    Raises:
        InvalidArgument: for anything but a prompt template whose variables are
            exactly ``summary`` and ``new_lines``, as the incumbent requires.
    """
    if not isinstance(prompt, BasePromptTemplate):
        raise InvalidArgument(f"prompt must be a prompt template, got {type(prompt).__name__}")
    variables = set(prompt.input_variables)
    if variables != {"summary", "new_lines"}:
        raise InvalidArgument(
            f"prompt has the variables {sorted(variables)}; it needs exactly "
            "['new_lines', 'summary'] (or pass MemoryConfig(summary_prompt=...) to the "
            "memory, with a {conversation} placeholder)"
        )
    text = prompt.format(summary="", new_lines="{conversation}")
    return text if isinstance(text, str) else str(text)


def check_keywords(fields: Iterable[str], data: Mapping[str, Any]) -> None:
    """Refuse a keyword of the incumbent that has no counterpart, an unknown keyword,
    and a bad ``max_token_limit`` or ``summary_message_cls``, before pydantic would
    turn the error into a ``ValidationError``.

    Raises:
        InvalidArgument: naming the keyword and what to use instead.
    """
    known = list(fields)
    for name in data:
        if name in REFUSED:
            raise InvalidArgument(REFUSED[name])
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; fields: {', '.join(known)}"
            raise InvalidArgument(f"TieredConversationMemory has no field {name!r}{hint}")
    limit = data.get("max_token_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InvalidArgument(f"max_token_limit must be an int >= 1, got {limit!r}")
    if "summary_message_cls" in data:
        _check_message_class(data["summary_message_cls"])


def _check_message_class(cls: object) -> None:
    """``cls`` must be a message class that takes the summary as its only content."""
    if not (isinstance(cls, type) and issubclass(cls, BaseMessage)):
        raise InvalidArgument(f"summary_message_cls must be a message class, got {cls!r}")
    try:
        cls(content="")
    except Exception as exc:  # a class needing more than content (ChatMessage's role)
        raise InvalidArgument(
            f"summary_message_cls {cls.__name__} cannot hold a summary alone ({exc}); "
            "use SystemMessage, HumanMessage or AIMessage"
        ) from exc
