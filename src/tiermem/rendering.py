"""How stored entries and summaries are handed to a model: pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.messages.tool import ToolCall

from ._messages import SUMMARY_MARKER, render_text, tool_call_ids
from .models import MemoryEntry, MemorySummary

__all__ = [
    "MISSING_RESULT_MARKER",
    "SUMMARY_HEADER",
    "SummaryText",
    "context_text",
    "is_summary_message",
    "render_messages",
]

SUMMARY_HEADER = "Summary of the earlier conversation:"


class SummaryText(NamedTuple):
    """What the summary message needs of a summary (read without its other columns)."""

    id: int
    content: str


def is_summary_message(message: BaseMessage) -> bool:
    """True for the summary message that ``get_messages`` puts first."""
    return isinstance(message, SystemMessage) and SUMMARY_MARKER in message.additional_kwargs


def summary_message(summaries: Sequence[MemorySummary | SummaryText]) -> SystemMessage:
    """One system message holding every top-level summary, oldest first."""
    ids = [summary.id for summary in summaries]
    body = "\n\n".join(summary.content for summary in summaries)
    return SystemMessage(
        content=f"{SUMMARY_HEADER}\n{body}",
        id=f"tiermem-summary-{ids[-1]}",
        additional_kwargs={SUMMARY_MARKER: ids},
    )


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
    call at the end stays as it is: its tool is presumably still running.
    """
    answers: dict[int, list[ToolMessage]] = {}
    placed: set[int] = set()
    open_calls: dict[str, int] = {}
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            owner = open_calls.pop(message.tool_call_id, None)
            if owner is not None:
                answers.setdefault(owner, []).append(message)
                placed.add(index)
        open_calls.update(dict.fromkeys(tool_call_ids(message), index))
    if not placed and not open_calls:
        return list(messages)
    unanswered: dict[int, list[str]] = {}
    for call_id, owner in open_calls.items():
        unanswered.setdefault(owner, []).append(call_id)
    last = max((i for i in range(len(messages)) if i not in placed), default=-1)
    ordered: list[BaseMessage] = []
    for index, message in enumerate(messages):
        if index in placed:
            continue
        ordered.append(message)
        results = answers.get(index, [])
        if index in unanswered and index < last and isinstance(message, AIMessage):
            missing = set(unanswered[index])
            results = results + [
                _missing_result(c) for c in message.tool_calls if c["id"] in missing
            ]
        if results:  # in the order of the calls, as providers show them
            position = {call_id: n for n, call_id in enumerate(tool_call_ids(message))}
            results.sort(key=lambda result: position[result.tool_call_id])
            ordered.extend(results)
    return ordered


def render_messages(
    summaries: Sequence[MemorySummary | SummaryText], messages: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """The summary message (if any) followed by the active messages, provider-valid."""
    head: list[BaseMessage] = [summary_message(summaries)] if summaries else []
    return head + provider_order(messages)


def context_text(summaries: Sequence[MemorySummary], entries: Sequence[MemoryEntry]) -> str:
    """The seed's plain-text context: summaries with time ranges, then recent entries."""
    parts: list[str] = []
    if summaries:
        parts.append("=== Previous Conversation Summaries ===")
        for summary in summaries:
            start, end = (moment.strftime("%Y-%m-%d %H:%M") for moment in summary.time_range)
            parts.append(f"[{start} - {end}] {summary.content}")
        parts.append("")
    if entries:
        parts.append("=== Recent Conversation ===")
        for entry in entries:
            label = entry.role if not entry.message.name else f"{entry.role} ({entry.message.name})"
            parts.append(f"{label}: {render_text(entry.message)}")
    return "\n".join(parts)
