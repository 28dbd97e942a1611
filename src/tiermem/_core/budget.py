"""Fitting a context into ``max_tokens``: pure functions.

Compression normally keeps a session's context within its budget. When it cannot
keep up (the summarizer fails, backs off, times out, runs in the background, or
the heuristic summary has nothing to take), the context handed to a model is
still cut to the budget here: the oldest unpinned active entries that do not fit
are left out of the rendered context only (they stay stored, active and
searchable, and are compressed later), and a short marker, counted like any
message, says how many earlier messages are not shown.

The count is tiermem's documented one (:meth:`TokenCounter.count_messages` of
what is returned): each stored entry costs the tokens stored with it (its
``count_message`` when it was added), the summary message and the stand-ins for
missing tool results are counted as rendered.

What is cut, in this order, until the context fits:

* the oldest unpinned messages, a tool call always together with its results,
  so the rest stays a provider-valid tail of the conversation;
* then the oldest summaries;
* then the marker itself (only when pinned context leaves no room for it).

The current turn is never cut out: the newest human message and the last unit (an
in-progress tool exchange) stay, shown truncated with a marker when they alone do
not fit (see :mod:`tiermem._core.current_turn`).

Pinned context is never cut: pinned context alone over the budget is refused
when it is written (:class:`~tiermem.errors.BudgetExceeded`), and raises the
same error when read under a budget lowered since.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence
from typing import NamedTuple

from langchain_core.messages import BaseMessage, SystemMessage

from ..errors import BudgetExceeded
from ..tokens import TokenCounter
from .messages import SUMMARY_MARKER
from .tool_pairs import group_units

__all__ = [
    "OMITTED_MARKER",
    "Fitted",
    "WindowEntry",
    "check_pinned",
    "fit_units",
    "group_units",
    "head_message",
    "head_tokens",
    "head_upper_bound",
    "omitted_note",
    "system_head",
]

#: ``additional_kwargs`` key of the context's first system message: how many
#: earlier messages (and summaries) the budget left out of this context.
OMITTED_MARKER = "tiermem_omitted"


class WindowEntry(NamedTuple):
    """An active entry as a context needs it: the message, its stored token count
    and whether it is pinned."""

    message: BaseMessage
    tokens: int
    pinned: bool


def omitted_note(messages: int, summaries: int = 0) -> str:
    """The marker text for ``messages`` (and ``summaries``) left out of a context."""
    parts = []
    if summaries:
        parts.append(f"{summaries} earlier {'summary' if summaries == 1 else 'summaries'}")
    if messages:
        parts.append(f"{messages} earlier {'message' if messages == 1 else 'messages'}")
    verb = "is" if messages + summaries == 1 else "are"
    return (
        f"[{' and '.join(parts)} {verb} not shown to stay within the token budget; "
        "they are stored and searchable.]"
    )


class Fitted(NamedTuple):
    """What :func:`fit_units` keeps: unit indices, summaries kept (the newest), and
    how many messages and summaries were left out."""

    units: list[int]
    summaries: int
    omitted_messages: int
    omitted_summaries: int


def fit_units(
    unit_costs: Sequence[int],
    unit_sizes: Sequence[int],
    pinned: Sequence[bool],
    summaries: int,
    max_tokens: int,
    total: Callable[[Fitted], int],
    step: int = 0,
) -> Fitted:
    """Choose what a context keeps so that ``total(choice) <= max_tokens``.

    With ``step``, the cut moves in steps of about that many tokens of the oldest
    unpinned messages: it falls only where their running total crosses a multiple
    of ``step``, so a conversation growing at its end keeps the same cut (and the
    same prefix a prompt cache can serve) for many turns.

    Args:
        unit_costs: the tokens of each unit (see :func:`group_units`).
        unit_sizes: the messages in each unit (to count what is left out).
        pinned: whether each unit is pinned context (never left out).
        summaries: how many summaries there are (the newest are kept first).
        max_tokens: the budget.
        total: the exact count of a choice as it would be rendered (head message,
            marker and stand-ins included); called a few times, not per unit.

    Raises:
        BudgetExceeded: when pinned context alone does not fit.
    """
    everything = Fitted(list(range(len(unit_costs))), summaries, 0, 0)
    if total(everything) <= max_tokens:
        return everything
    check_pinned(unit_costs, pinned, max_tokens)
    fixed = [index for index, pin in enumerate(pinned) if pin]
    free = [index for index, pin in enumerate(pinned) if not pin]
    for kept_summaries in range(summaries, -1, -1):
        # Newest units first while they fit, on an estimate; then the exact count
        # of the rendered choice decides, dropping the oldest kept unit while over.
        room = max_tokens - total(Fitted(fixed, kept_summaries, 1, summaries - kept_summaries))
        start = len(free)
        while start > 0 and unit_costs[free[start - 1]] <= room:
            start -= 1
            room -= unit_costs[free[start]]
        if step > 0 and start > 0:
            start = _anchor([unit_costs[index] for index in free], start, step)
        while True:
            choice = _choice(
                fixed, free[start:], free[:start], unit_sizes, summaries, kept_summaries
            )
            if total(choice) <= max_tokens:
                return choice
            if start == len(free):
                break
            start += 1
    # Only pinned context fits; without the marker if even that does not fit.
    bare = Fitted(fixed, 0, 0, 0)
    marked = _choice(fixed, [], free, unit_sizes, summaries, 0)
    return marked if total(marked) <= max_tokens else bare


def _anchor(costs: Sequence[int], start: int, step: int) -> int:
    """The first cut at or after ``start`` where the running total of ``costs`` (oldest
    first) crosses a multiple of ``step``; ``len(costs)`` when there is none."""
    running = sum(costs[:start])
    if start == 0 or (running - costs[start - 1]) // step != running // step:
        return start
    for position in range(start, len(costs)):
        before = running
        running += costs[position]
        if before // step != running // step:
            return position + 1
    return len(costs)


def check_pinned(unit_costs: Sequence[int], pinned: Sequence[bool], max_tokens: int) -> None:
    """Pinned context is never left out, so it must fit the budget.

    Raises:
        BudgetExceeded: when pinned context alone takes more than ``max_tokens``.
    """
    pinned_cost = sum(cost for cost, pin in zip(unit_costs, pinned, strict=True) if pin)
    if pinned_cost > max_tokens:
        raise BudgetExceeded(
            f"pinned context takes {pinned_cost} tokens, more than max_tokens={max_tokens}; "
            "unpin some context or raise max_tokens"
        )


def _choice(
    fixed: Sequence[int],
    kept: Sequence[int],
    dropped: Sequence[int],
    unit_sizes: Sequence[int],
    summaries: int,
    kept_summaries: int,
) -> Fitted:
    return Fitted(
        sorted([*fixed, *kept]),
        kept_summaries,
        sum(unit_sizes[index] for index in dropped),
        summaries - kept_summaries,
    )


#: Exact head counts by (encoding, digest of the text), oldest first.
_HEAD_COUNTS: dict[tuple[str, bytes], int] = {}
_HEAD_COUNTS_MAX = 256


def head_tokens(counter: TokenCounter, message: SystemMessage) -> int:
    """The exact count of a context's first system message, cached by a digest of
    its text: it repeats from turn to turn until the summaries change."""
    content = message.content
    if not isinstance(content, str):  # pragma: no cover - tiermem builds it from text
        return counter.count_message(message)
    digest = hashlib.blake2b(content.encode("utf-8", "surrogatepass")).digest()
    key = (counter.encoding_name, digest)
    tokens = _HEAD_COUNTS.get(key)
    if tokens is None:
        tokens = counter.count_message(message)
        if len(_HEAD_COUNTS) >= _HEAD_COUNTS_MAX:
            _HEAD_COUNTS.pop(next(iter(_HEAD_COUNTS)))  # the oldest entry
        _HEAD_COUNTS[key] = tokens
    return tokens


@functools.lru_cache(maxsize=16)
def _head_frame(counter: TokenCounter, header: str) -> tuple[int, int]:
    """Tokens of a head message holding only ``header``, and of one separator."""
    return counter.count_message(SystemMessage(content=header)), counter.count_text("\n\n")


def head_upper_bound(counter: TokenCounter, header: str, summary_tokens: Sequence[int]) -> int:
    """An upper bound of the head message's count from the summaries' stored counts:
    the header's count plus each summary's and a separator's, plus one token per
    summary for a boundary that tokenizes differently (joining texts at ``\\n\\n``
    never cost more than the parts in measurements; the margin is for safety). A
    context within budget by this bound needs no counting of the summaries."""
    if not summary_tokens:
        return 0
    frame, separator = _head_frame(counter, header)
    return frame + sum(summary_tokens) + len(summary_tokens) * (separator + 1)


def head_message(
    ids: Sequence[int], body: str | None, omitted_messages: int, omitted_summaries: int
) -> SystemMessage | None:
    """The context's first system message: the summaries' text (``body``), then the
    marker when something was left out; ``None`` when there is neither."""
    omitted = omitted_messages or omitted_summaries
    note = omitted_note(omitted_messages, omitted_summaries) if omitted else None
    if body is None and note is None:
        return None
    content = "\n\n".join(part for part in (body, note) if part is not None)
    return system_head(ids, content, omitted_messages if note is not None else None)


def system_head(ids: Sequence[int], content: str, omitted: int | None = None) -> SystemMessage:
    """A head message of ``content`` for summaries ``ids`` (marked as tiermem's, so
    integrations never store it back), noting ``omitted`` messages if given."""
    kwargs: dict[str, object] = {SUMMARY_MARKER: list(ids)}
    if omitted is not None:
        kwargs[OMITTED_MARKER] = omitted
    return SystemMessage(
        content=content,
        id=f"tiermem-summary-{ids[-1]}" if ids else "tiermem-omitted",
        additional_kwargs=kwargs,
    )
