"""A prompt-cache breakpoint at the end of tiermem's stable prefix.

Providers that take explicit cache breakpoints (Anthropic's ``cache_control`` on a
content block) cache the request up to each marked block. tiermem's summary message
changes only when a compression writes a new summary, so everything up to it (the
system prompt, the tools, the summary) is the same from turn to turn: a breakpoint
there lets the provider serve that prefix from its cache however long the verbatim
tail grows, where a breakpoint on the newest message alone finds it only while the
tail is short. Only the request sent to the model is marked; the agent state and
the stored entries never are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AnyMessage
from tiermem import is_summary_message

__all__ = ["mark_summary"]


def mark_summary(
    messages: Sequence[AnyMessage], cache_control: Mapping[str, Any]
) -> list[AnyMessage] | None:
    """``messages`` with ``cache_control`` on the last content block of tiermem's
    summary message (the first message, when it is one), or ``None`` when there is
    none to mark."""
    if not messages or not is_summary_message(messages[0]):
        return None
    head = messages[0]
    content = head.content
    blocks: list[Any] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    )
    if not blocks:
        return None
    last = blocks[-1]
    last = {"type": "text", "text": last} if isinstance(last, str) else dict(last)
    blocks[-1] = {**last, "cache_control": dict(cache_control)}
    return [head.model_copy(update={"content": blocks}), *messages[1:]]
