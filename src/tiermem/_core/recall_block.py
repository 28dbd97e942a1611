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
from datetime import datetime
from typing import NamedTuple

from langchain_core.messages import BaseMessage, HumanMessage

from ..tokens import TokenCounter
from ..types import MemoryEntry
from .budget import WindowEntry, head_upper_bound
from .messages import SUMMARY_MARKER, render_text

__all__ = [
    "RECALLED_ITEMS_MARKER",
    "RECALL_HEADER",
    "RECALL_MARKER",
    "Line",
    "Recalled",
    "before_question",
    "block_budget",
    "choose",
    "insert_block",
    "item_line",
    "newest_question",
    "question_at",
    "recall_message",
    "recall_section",
    "without",
]

#: ``additional_kwargs`` key of the recalled block: the ids of the entries it shows.
RECALL_MARKER = "tiermem_recalled_ids"
#: ``additional_kwargs`` key of the recalled block: the ids of the layer items it shows
#: (set only when it shows some; see ``MemoryConfig.recall_layers``).
RECALLED_ITEMS_MARKER = "tiermem_recalled_items"
RECALL_HEADER = "Recalled from earlier in the conversation (stored word for word):"
_SECTION = "=== Recalled From Earlier ==="
#: The smallest block worth adding, in tokens.
_MIN_BLOCK = 32


class Recalled(NamedTuple):
    """What a block shows: the entries' ids, the lines (time order) and the layer
    items' ids; ``keys`` names what each line shows (its source and id) and
    ``visible`` holds the ids of its entries that the context at the whole budget
    shows (see :func:`without`)."""

    ids: list[int]
    lines: list[str]
    items: tuple[int, ...] = ()
    keys: tuple[tuple[str, int], ...] = ()
    visible: frozenset[int] = frozenset()


def without(recalled: Recalled, ids: frozenset[int]) -> Recalled:
    """``recalled`` less the lines of the entries ``ids``."""
    kept = [
        (key, text)
        for key, text in zip(recalled.keys, recalled.lines, strict=True)
        if not (key[0] == "entry" and key[1] in ids)
    ]
    return Recalled(
        [key[1] for key, _ in kept if key[0] == "entry"],
        [text for _, text in kept],
        tuple(key[1] for key, _ in kept if key[0] != "entry"),
        tuple(key for key, _ in kept),
    )


class Line(NamedTuple):
    """A candidate line: its text and estimated tokens, what it shows (an entry, or
    an item of the layer named) and where it sorts in the block's time order."""

    text: str
    tokens: int
    source: str  # "entry", or a layer's name
    id: int
    when: tuple[datetime, str, int]


def question_at(messages: Sequence[BaseMessage]) -> int | None:
    """The index of the newest human message (not one tiermem wrote), if any: the
    question a read recalls for, and the place of the recalled block."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, HumanMessage) and SUMMARY_MARKER not in message.additional_kwargs:
            return index
    return None


def newest_question(entries: Sequence[WindowEntry]) -> str:
    """The text of the newest human message of a window ("" when there is none)."""
    at = question_at([entry.message for entry in entries])
    return "" if at is None else render_text(entries[at].message)


def before_question(messages: list[BaseMessage]) -> list[BaseMessage]:
    """``messages`` before the newest human message (all of them when there is none)."""
    at = question_at(messages)
    return messages if at is None else messages[:at]


def block_budget(
    max_tokens: int,
    share: float,
    counter: TokenCounter,
    summary_tokens: Sequence[int],
    entries: Sequence[WindowEntry],
    header: str,
    extra: int = 0,
) -> int:
    """The tokens a recalled block may take: ``share`` of the budget, or all the
    context leaves unused if that is more; never what pinned context and the
    current turn (from the newest human message on) need. 0: no block. ``extra``:
    what the rendered context adds to the stored counts (stand-in results), so that
    a context that fits is never cut for room it does not leave."""
    whole = head_upper_bound(counter, header, summary_tokens) + sum(e.tokens for e in entries)
    whole += extra
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


def item_line(
    layer: str, key: str | None, content: str, created: datetime, limit: int, counter: TokenCounter
) -> str:
    """One recalled layer item: its time, layer (and key) and text, cut to ``limit``."""
    text = content if key is None else f"{key}: {content}"
    if counter.count_text(text) > limit:
        text = counter.truncate(text, limit) + " [...]"
    return f"[{created.strftime('%Y-%m-%d %H:%M')}] ({layer} memory) {text}"


def choose(
    candidates: Sequence[Line], budget: int, cost: Callable[[Sequence[str]], int]
) -> Recalled:
    """The best candidates (in rank order) whose block costs at most ``budget`` by
    ``cost`` (the exact count of a block of those lines), shown in time order; each
    line's ``tokens`` is its estimate as the choice goes (the exact count decides)."""
    chosen: list[Line] = []
    used = cost([])
    for candidate in candidates:
        if used + candidate.tokens + 1 <= budget:
            chosen.append(candidate)
            used += candidate.tokens + 1
    rank = {(line.source, line.id): position for position, line in enumerate(chosen)}
    chosen.sort(key=lambda line: line.when)
    while chosen and cost([line.text for line in chosen]) > budget:  # estimate short
        chosen.remove(max(chosen, key=lambda line: rank[line.source, line.id]))
    return Recalled(
        [line.id for line in chosen if line.source == "entry"],
        [line.text for line in chosen],
        tuple(line.id for line in chosen if line.source != "entry"),
        tuple((line.source, line.id) for line in chosen),
    )


def recall_message(recalled: Recalled) -> HumanMessage:
    """The block as a message in the user role (accepted anywhere by every
    provider), marked so integrations never store it back."""
    kwargs: dict[str, object] = {RECALL_MARKER: list(recalled.ids)}
    if recalled.items:
        kwargs[RECALLED_ITEMS_MARKER] = list(recalled.items)
    return HumanMessage(
        content="\n".join([RECALL_HEADER, *recalled.lines]),
        id=f"tiermem-recalled-{recalled.ids[0]}" if recalled.ids else "tiermem-recalled",
        additional_kwargs=kwargs,
    )


def recall_section(lines: Sequence[str]) -> str:
    """The block as a section of the text context."""
    return "\n".join([_SECTION, *lines])


def insert_block(messages: list[BaseMessage], block: BaseMessage) -> list[BaseMessage]:
    """``messages`` with ``block`` just before the newest human message (at the end
    when there is none)."""
    at = question_at(messages)
    return [*messages, block] if at is None else [*messages[:at], block, *messages[at:]]
