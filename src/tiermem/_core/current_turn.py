"""The current turn is never hidden: pure functions.

A context always holds the newest human message (the question the model is to
answer) and the last unit of the conversation (an in-progress tool exchange, or
the newest message). When they alone do not fit ``max_tokens`` beside pinned
context, their text is shown truncated, each with a marker saying how much is
shown; the whole message stays stored (and searchable).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_core.messages import BaseMessage, HumanMessage

from ..tokens import TokenCounter
from .messages import SUMMARY_MARKER, render_text

__all__ = ["TRUNCATED_MARKER", "current_units", "shrink", "truncated_note"]

#: ``additional_kwargs`` key of a message shown truncated: its whole token count.
TRUNCATED_MARKER = "tiermem_truncated"
#: Rounds of cutting before giving up: each round removes at least what was over.
_ROUNDS = 6


def current_units(messages: Sequence[BaseMessage], units: Sequence[Sequence[int]]) -> list[bool]:
    """Which ``units`` (see :func:`~tiermem._core.tool_pairs.group_units`) form the current
    turn: the unit of the newest human message and the last unit."""
    required = [False] * len(units)
    if not units:
        return required
    required[-1] = True
    newest = next(
        (
            index
            for index in range(len(messages) - 1, -1, -1)
            if isinstance(messages[index], HumanMessage)
            and SUMMARY_MARKER not in messages[index].additional_kwargs
        ),
        None,
    )
    if newest is not None:
        for position, unit in enumerate(units):
            if newest in unit:
                required[position] = True
                break
    return required


def truncated_note(shown: int, total: int) -> str:
    """The marker ending a message shown truncated."""
    return (
        f"\n[... truncated to fit the token budget: about {shown} of its {total} tokens "
        "are shown; the whole message is stored]"
    )


def shrink(
    messages: Sequence[BaseMessage],
    over: int,
    counter: TokenCounter,
    cost: Callable[[BaseMessage], int],
) -> list[BaseMessage] | None:
    """``messages`` with their text cut to a common length (the longest first) so
    that together they cost at least ``over`` tokens less by ``cost``; ``None`` when
    cutting text cannot save that much (tool call arguments, names and message
    frames are never cut)."""
    texts = [_text(message) for message in messages]
    sizes = [counter.count_text(text) for text in texts]
    goal = sum(cost(message) for message in messages) - over
    budget, excess = sum(sizes), over
    for _ in range(_ROUNDS):
        budget -= max(excess, 1)
        if budget < 0:
            return None
        cap = _common_cap(sizes, budget)
        cut = [
            _cut(message, text, size, cap, counter, cost)
            for message, text, size in zip(messages, texts, sizes, strict=True)
        ]
        excess = sum(cost(message) for message in cut) - goal
        if excess <= 0:
            return cut
    return None


def _text(message: BaseMessage) -> str:
    """The text of a message's content (tool calls aside), media as placeholders."""
    content = message.content
    if isinstance(content, str):
        return content
    return render_text(HumanMessage(content=content))


def _cut(
    message: BaseMessage,
    text: str,
    size: int,
    cap: int,
    counter: TokenCounter,
    cost: Callable[[BaseMessage], int],
) -> BaseMessage:
    if size <= cap:
        return message
    whole = cost(message)
    note = truncated_note(0, whole)
    shown = max(cap - counter.count_text(note), 0)
    content = counter.truncate(text, shown) + truncated_note(shown, whole)
    kwargs = {**message.additional_kwargs, TRUNCATED_MARKER: whole}
    return message.model_copy(update={"content": content, "additional_kwargs": kwargs})


def _common_cap(sizes: Sequence[int], budget: int) -> int:
    """The largest ``cap`` with ``sum(min(size, cap)) <= budget`` (0 if none)."""
    remaining, left = budget, len(sizes)
    for size in sorted(sizes):
        if size * left > remaining:
            return max(remaining // left, 0)
        remaining -= size
        left -= 1
    return max(sizes, default=0)
