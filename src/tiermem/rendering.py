"""How stored entries and summaries are handed to a model: pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage

from ._messages import SUMMARY_MARKER, render_text, tool_call_ids
from .models import MemoryEntry, MemorySummary

__all__ = [
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


def provider_order(entries: Sequence[MemoryEntry]) -> list[BaseMessage]:
    """Entries as messages, each tool result moved right after the call it answers.

    Results normally follow their call already; a message appended between a
    call and its result would otherwise break the provider rule that an
    assistant tool call is immediately followed by its results. A result pairs
    with the latest earlier call of its id (the one that was pending when it
    was stored), so an id reused after it was answered keeps its own results.
    """
    answers: dict[int, list[ToolMessage]] = {}
    placed: set[int] = set()
    open_calls: dict[str, int] = {}
    for index, entry in enumerate(entries):
        message = entry.message
        if isinstance(message, ToolMessage):
            owner = open_calls.pop(message.tool_call_id, None)
            if owner is not None:
                answers.setdefault(owner, []).append(message)
                placed.add(index)
        open_calls.update(dict.fromkeys(tool_call_ids(message), index))
    ordered: list[BaseMessage] = []
    for index, entry in enumerate(entries):
        if index in placed:
            continue
        ordered.append(entry.message)
        results = answers.get(index, [])
        if results:  # in the order of the calls, as providers show them
            position = {call_id: n for n, call_id in enumerate(tool_call_ids(entry.message))}
            results.sort(key=lambda result: position[result.tool_call_id])
            ordered.extend(results)
    return ordered


def render_messages(
    summaries: Sequence[MemorySummary | SummaryText], entries: Sequence[MemoryEntry]
) -> list[BaseMessage]:
    """The summary message (if any) followed by the active entries, provider-valid."""
    head: list[BaseMessage] = [summary_message(summaries)] if summaries else []
    return head + provider_order(entries)


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
