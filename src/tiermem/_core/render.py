"""How stored entries and summaries are handed to a model: pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.tool import ToolCall

from ..tokens import TokenCounter
from ..types import MemoryEntry, MemorySummary
from .budget import (
    OMITTED_MARKER,
    Fitted,
    WindowEntry,
    check_pinned,
    fit_units,
    head_message,
    head_tokens,
    head_upper_bound,
    omitted_note,
    system_head,
)
from .current_turn import current_units, shrink
from .messages import SUMMARY_MARKER, render_text, tool_call_ids, without_idless_calls
from .recall_block import RECALL_MARKER
from .tool_pairs import group_units, pair_messages

__all__ = [
    "MISSING_RESULT_MARKER",
    "OMITTED_MARKER",
    "SUMMARY_HEADER",
    "SummaryText",
    "WindowEntry",
    "context_text",
    "is_summary_message",
    "render_messages",
]

SUMMARY_HEADER = "Summary of the earlier conversation:"


class SummaryText(NamedTuple):
    """What the summary message needs of a summary (read without its other columns)."""

    id: int
    content: str
    token_count: int


def is_summary_message(message: BaseMessage) -> bool:
    """True for a message tiermem wrote into a context rather than stored: the
    summary message that ``get_messages`` puts first, the note of what the budget
    left out, and the recalled block (``RECALL_MARKER``); integrations never store
    them back.

    The summary message is a ``SystemMessage``, or a ``HumanMessage`` where an
    integration hands it to the model in the user role (as
    ``SummarizationMiddleware`` does).
    """
    return isinstance(message, (SystemMessage, HumanMessage)) and (
        SUMMARY_MARKER in message.additional_kwargs or RECALL_MARKER in message.additional_kwargs
    )


def summary_message(summaries: Sequence[MemorySummary | SummaryText]) -> SystemMessage:
    """One system message holding every top-level summary, oldest first."""
    ids = [summary.id for summary in summaries]
    return system_head(ids, _summary_body([summary.content for summary in summaries]))


#: ``additional_kwargs`` key marking a stand-in result (see :func:`provider_order`).
MISSING_RESULT_MARKER = "tiermem_missing_result"
MISSING_RESULT_TEXT = "No result was recorded for this tool call before the conversation went on."


def _missing_result(call: ToolCall) -> ToolMessage:
    """The stand-in for the result of a call the conversation went on without."""
    call_id = call["id"] or ""
    return ToolMessage(
        content=MISSING_RESULT_TEXT,
        tool_call_id=call_id,
        name=call["name"],
        status="error",
        id=f"tiermem-missing-{call_id}",
        additional_kwargs={MISSING_RESULT_MARKER: True},
    )


def provider_order(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Messages in seq order, made provider-valid: each tool call directly followed
    by its results.

    Results normally follow their call already; a message appended between a
    call and its result would otherwise break the provider rule that an
    assistant tool call is immediately followed by its results, so the result is
    moved up. A result pairs with the latest earlier call of its id (the one that
    was pending when it was stored), so an id reused after it was answered keeps
    its own results. A call still unanswered when later messages follow (the
    conversation went on without it) gets a stand-in error result, marked with
    :data:`MISSING_RESULT_MARKER`, in the rendered context only; the store is
    untouched, and a real result added later takes its place. An unanswered
    call at the end stays as it is: its tool is presumably still running. A call
    without an id can never be answered and is left out of its message (see
    :func:`without_idless_calls`); the stored message keeps it.
    """
    messages = [m for m in map(without_idless_calls, messages) if m is not None]
    pairs = pair_messages(messages)
    if not pairs.owner and not pairs.open:
        return list(messages)
    placed = pairs.owner
    unanswered = pairs.unanswered()
    last = max((i for i in range(len(messages)) if i not in placed), default=-1)
    ordered: list[BaseMessage] = []
    for index, message in enumerate(messages):
        if index in placed:
            continue
        ordered.append(message)
        results = [cast("ToolMessage", messages[i]) for i in pairs.answers.get(index, [])]
        if index in unanswered and index < last and isinstance(message, AIMessage):
            missing = set(unanswered[index])
            results += [_missing_result(c) for c in message.tool_calls if c["id"] in missing]
        if results:  # in the order of the calls, as providers show them
            position = {call_id: n for n, call_id in enumerate(tool_call_ids(message))}
            results.sort(key=lambda result: position[result.tool_call_id])
            ordered.extend(results)
    return ordered


def render_messages(
    summaries: Sequence[MemorySummary | SummaryText],
    entries: Sequence[WindowEntry],
    *,
    max_tokens: int | None = None,
    counter: TokenCounter | None = None,
) -> list[BaseMessage]:
    """The summary message (if any) followed by the active messages, provider-valid;
    with ``max_tokens`` (and ``counter``), cut to fit it (see :mod:`tiermem._core.budget`).

    Raises:
        BudgetExceeded: when pinned context alone does not fit ``max_tokens``.
    """
    ordered = provider_order([entry.message for entry in entries])
    ids = [summary.id for summary in summaries]
    texts = [summary.content for summary in summaries]
    if max_tokens is None or counter is None:
        return ([summary_message(summaries)] if summaries else []) + ordered
    count = counter
    bound = head_upper_bound(count, SUMMARY_HEADER + "\n", [s.token_count for s in summaries])
    # The usual case: no stand-in results were added and everything fits by the stored
    # counts, so nothing is grouped or counted.
    if len(ordered) == len(entries) and bound + sum(e.tokens for e in entries) <= max_tokens:
        return ([summary_message(summaries)] if summaries else []) + ordered
    stored = {id(entry.message): entry for entry in entries}
    units = group_units(ordered)

    def cost(message: BaseMessage) -> int:
        entry = stored.get(id(message))  # stand-in results are not stored: count them
        return entry.tokens if entry is not None else count.count_message(message)

    unit_costs = [sum(cost(ordered[i]) for i in unit) for unit in units]
    pinned = [
        any(stored[id(ordered[i])].pinned for i in unit if id(ordered[i]) in stored)
        for unit in units
    ]
    check_pinned(unit_costs, pinned, max_tokens)
    required = current_units(ordered, units)

    def head(choice: Fitted) -> SystemMessage | None:
        kept = choice.summaries
        body = _summary_body(texts[len(ids) - kept :]) if kept else None
        return head_message(
            ids[len(ids) - kept :], body, choice.omitted_messages, choice.omitted_summaries
        )

    def total(choice: Fitted) -> int:
        first = head(choice)
        tokens = head_tokens(count, first) if first is not None else 0
        return tokens + sum(unit_costs[index] for index in choice.units)

    if bound + sum(unit_costs) <= max_tokens:  # stand-ins included, it still fits
        return ([summary_message(summaries)] if summaries else []) + ordered
    kept = [pin or need for pin, need in zip(pinned, required, strict=True)]
    sizes = [len(unit) for unit in units]
    # A current turn that fits alone is shown whole, the marker giving way (fit_units
    # drops it); one that must be cut anyway is cut enough to leave the marker room.
    fixed = [i for i, keep in enumerate(kept) if keep]
    over = total(Fitted(fixed, 0, 0, 0)) - max_tokens
    if over > 0:
        over = total(Fitted(fixed, 0, len(ordered), len(ids))) - max_tokens
    if over > 0:  # the current turn alone does not fit: show it truncated
        chosen = [
            i
            for index, unit in enumerate(units)
            if required[index] and not pinned[index]
            for i in unit
        ]
        cut = shrink([ordered[i] for i in chosen], over, count, cost)
        if cut is None:  # nothing left to cut: it gives way like any message
            kept = pinned
        else:
            for i, message in zip(chosen, cut, strict=True):
                ordered[i] = message
            unit_costs = [sum(cost(ordered[i]) for i in unit) for unit in units]
    choice = fit_units(unit_costs, sizes, kept, len(ids), max_tokens, total, cut_step(max_tokens))
    first = head(choice)
    kept_messages = [ordered[i] for index in choice.units for i in units[index]]
    return ([first] if first is not None else []) + kept_messages


#: The share of the budget by which the guard moves its cut (see ``fit_units``).
CUT_STEP = 0.25


def cut_step(max_tokens: int) -> int:
    """Tokens of the oldest messages left out or brought back at once when the budget
    guard moves its cut: large steps keep the context's prefix, which a provider's
    prompt cache serves, the same from turn to turn."""
    return int(max_tokens * CUT_STEP)


def _summary_body(texts: Sequence[str]) -> str:
    return f"{SUMMARY_HEADER}\n" + "\n\n".join(texts)


def context_text(
    summaries: Sequence[MemorySummary],
    entries: Sequence[MemoryEntry],
    *,
    max_tokens: int | None = None,
    counter: TokenCounter | None = None,
) -> str:
    """The plain-text context: summaries with time ranges, then recent entries;
    with ``max_tokens`` (and ``counter``), cut to fit it as counted by
    :meth:`TokenCounter.count_text` (see :mod:`tiermem._core.budget`)."""
    summary_lines = [_summary_line(summary) for summary in summaries]
    entry_lines = [_entry_line(entry) for entry in entries]
    whole = _context(summary_lines, entry_lines, [])
    if max_tokens is None or counter is None or counter.count_text(whole) <= max_tokens:
        return whole
    units = group_units([entry.message for entry in entries])
    # Line costs are only an estimate for the choice (a newline may merge with its
    # neighbours); the exact count of the whole text decides.
    unit_costs = [sum(counter.count_text(entry_lines[i]) + 1 for i in unit) for unit in units]
    pinned = [any(entries[i].pinned for i in unit) for unit in units]
    check_pinned(unit_costs, pinned, max_tokens)
    required = current_units([entry.message for entry in entries], units)
    kept = [pin or need for pin, need in zip(pinned, required, strict=True)]
    count = len(summary_lines)

    def render(choice: Fitted) -> str:
        note = (
            [omitted_note(choice.omitted_messages, choice.omitted_summaries)]
            if choice.omitted_messages or choice.omitted_summaries
            else []
        )
        kept = [entry_lines[i] for index in choice.units for i in units[index]]
        return _context(summary_lines[len(summary_lines) - choice.summaries :], kept, note)

    fixed = [index for index, keep in enumerate(kept) if keep]
    over = counter.count_text(render(Fitted(fixed, 0, 0, 0))) - max_tokens
    if over > 0:  # cut anyway: leave the marker room (see render_messages)
        over = counter.count_text(render(Fitted(fixed, 0, len(entries), count))) - max_tokens
    if over > 0:  # the current turn alone does not fit: show it truncated
        chosen = [i for index in fixed if not pinned[index] for i in units[index]]
        cut = shrink(
            [HumanMessage(entry_lines[i]) for i in chosen],
            over,
            counter,
            lambda line: counter.count_text(str(line.content)) + 1,
        )
        if cut is None:  # nothing left to cut: it gives way like any line
            kept = pinned
        else:
            for i, line in zip(chosen, cut, strict=True):
                entry_lines[i] = str(line.content)
            unit_costs = [
                sum(counter.count_text(entry_lines[i]) + 1 for i in unit) for unit in units
            ]
    choice = fit_units(
        unit_costs,
        [len(unit) for unit in units],
        kept,
        count,
        max_tokens,
        lambda choice: counter.count_text(render(choice)),
        cut_step(max_tokens),
    )
    return render(choice)


def _summary_line(summary: MemorySummary) -> str:
    start, end = (moment.strftime("%Y-%m-%d %H:%M") for moment in summary.time_range)
    return f"[{start} - {end}] {summary.content}"


def _entry_line(entry: MemoryEntry) -> str:
    label = entry.role if not entry.message.name else f"{entry.role} ({entry.message.name})"
    return f"{label}: {render_text(entry.message)}"


def _context(summary_lines: Sequence[str], entry_lines: Sequence[str], note: Sequence[str]) -> str:
    parts: list[str] = []
    if summary_lines:
        parts.append("=== Previous Conversation Summaries ===")
        parts.extend(summary_lines)
        parts.append("")
    parts.extend(note)
    if entry_lines:
        parts.append("=== Recent Conversation ===")
        parts.extend(entry_lines)
    return "\n".join(parts)
