"""The recalled block: kept originals brought back into a context, pure functions.

A read given a query (by default the newest human message) adds the stored
entries most relevant to it that are not in view (compressed ones, or other
sessions') as one block at the current-turn boundary: just before the newest
human message, so the cacheable prefix before it never changes because of it. The
block lists the entries in time order, each with its time and speaker, and carries
their ids in ``additional_kwargs[RECALL_MARKER]``; it is counted in the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from langchain_core.messages import BaseMessage, HumanMessage

from ..tokens import TokenCounter
from ..types import MemoryEntry
from .budget import WindowEntry, head_upper_bound
from .messages import SUMMARY_MARKER, render_text

__all__ = [
    "RECALL_HEADER",
    "RECALL_MARKER",
    "Recalled",
    "block_budget",
    "choose",
    "insert_block",
    "newest_question",
    "recall_message",
    "recall_section",
]

#: ``additional_kwargs`` key of the recalled block: the ids of the entries it shows.
RECALL_MARKER = "tiermem_recalled_ids"
RECALL_HEADER = "Recalled from earlier in the conversation (stored word for word):"
_SECTION = "=== Recalled From Earlier ==="
#: The smallest block worth adding, in tokens.
_MIN_BLOCK = 32


class Recalled(NamedTuple):
    """The chosen entries (time order) and their lines."""

    ids: list[int]
    lines: list[str]


def newest_question(entries: Sequence[WindowEntry]) -> str:
    """The text of the newest human message of a window ("" when there is none)."""
    for entry in reversed(entries):
        message = entry.message
        if isinstance(message, HumanMessage) and SUMMARY_MARKER not in message.additional_kwargs:
            return render_text(message)
    return ""


def block_budget(
    max_tokens: int,
    share: float,
    counter: TokenCounter,
    summary_tokens: Sequence[int],
    entries: Sequence[WindowEntry],
    header: str,
) -> int:
    """The tokens a recalled block may take: ``share`` of the budget, or all the
    context leaves unused if that is more; never what pinned context and the
    current turn (from the newest human message on) need. 0: no block."""
    whole = head_upper_bound(counter, header, summary_tokens) + sum(e.tokens for e in entries)
    newest = max(
        (i for i, e in enumerate(entries) if isinstance(e.message, HumanMessage)), default=0
    )
    floor = sum(e.tokens for i, e in enumerate(entries) if e.pinned or i >= newest)
    room = min(max(int(share * max_tokens), max_tokens - whole), max_tokens - floor)
    return room if room >= _MIN_BLOCK else 0


def line(entry: MemoryEntry, session_id: str, limit: int, counter: TokenCounter) -> str:
    """One recalled entry: its time, speaker (and session, if another) and text, the
    text cut to ``limit`` tokens."""
    moment = entry.timestamp.strftime("%Y-%m-%d %H:%M")
    where = "" if entry.session_id == session_id else f" (session {entry.session_id})"
    text = render_text(entry.message)
    # The stored count bounds the text's (it adds the message frame): most entries
    # need no counting here.
    if entry.token_count > limit and counter.count_text(text) > limit:
        text = counter.truncate(text, limit) + " [...]"
    return f"[{moment}]{where} {entry.role}: {text}"


def choose(
    candidates: Sequence[tuple[MemoryEntry, str]],
    budget: int,
    cost: Callable[[Sequence[str]], int],
    estimate: Callable[[MemoryEntry, str], int],
) -> Recalled:
    """The best candidates (in rank order) whose block costs at most ``budget`` by
    ``cost`` (the exact count of a block of those lines), shown in time order;
    ``estimate`` is a line's count as the choice goes (the exact count decides)."""
    chosen: list[tuple[MemoryEntry, str]] = []
    used = cost([])
    for entry, text in candidates:
        tokens = estimate(entry, text) + 1
        if used + tokens <= budget:
            chosen.append((entry, text))
            used += tokens
    rank = {entry.id: position for position, (entry, _) in enumerate(chosen)}
    chosen.sort(key=lambda pair: (pair[0].timestamp, pair[0].session_id, pair[0].seq))
    lines = [text for _, text in chosen]
    while chosen and cost(lines) > budget:  # the estimate was short: drop the worst
        worst = max(range(len(chosen)), key=lambda i: rank[chosen[i][0].id])
        del chosen[worst], lines[worst]
    return Recalled([entry.id for entry, _ in chosen], lines)


def recall_message(recalled: Recalled) -> HumanMessage:
    """The block as a message in the user role (accepted anywhere by every
    provider), marked so integrations never store it back."""
    return HumanMessage(
        content="\n".join([RECALL_HEADER, *recalled.lines]),
        id=f"tiermem-recalled-{recalled.ids[0]}" if recalled.ids else "tiermem-recalled",
        additional_kwargs={RECALL_MARKER: list(recalled.ids)},
    )


def recall_section(lines: Sequence[str]) -> str:
    """The block as a section of the text context."""
    return "\n".join([_SECTION, *lines])


def insert_block(messages: list[BaseMessage], block: BaseMessage) -> list[BaseMessage]:
    """``messages`` with ``block`` just before the newest human message (at the end
    when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and SUMMARY_MARKER not in message.additional_kwargs:
            return [*messages[:index], block, *messages[index:]]
    return [*messages, block]
