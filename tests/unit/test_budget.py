"""Fitting a context into max_tokens (pure functions of tiermem.budget and rendering)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from tiermem import OMITTED_MARKER, TokenCounter, is_summary_message
from tiermem._core.budget import WindowEntry, group_units, head_tokens, head_upper_bound
from tiermem._core.render import SUMMARY_HEADER, SummaryText, render_messages, summary_message
from tiermem.errors import BudgetExceeded

COUNTER = TokenCounter()


def entry(message: BaseMessage, *, pinned: bool = False) -> WindowEntry:
    """A window entry with its true stored count."""
    return WindowEntry(message, COUNTER.count_message(message), pinned)


def summary(ident: int, text: str) -> SummaryText:
    return SummaryText(ident, text, COUNTER.count_text(text))


def call(call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": call_id}, "id": call_id}])


def test_a_tool_call_and_its_results_form_one_unit() -> None:
    """Units never separate a call from the results that follow it."""
    messages: list[BaseMessage] = [
        HumanMessage("hi"),
        call("a"),
        ToolMessage("x", tool_call_id="a"),
        AIMessage("done"),
        ToolMessage("orphan", tool_call_id="zz"),
    ]
    assert group_units(messages) == [[0], [1, 2], [3], [4]]


def test_a_context_within_budget_is_returned_whole_without_a_marker() -> None:
    """Nothing is cut, and no marker is added, when everything fits."""
    entries = [entry(HumanMessage("hello")), entry(AIMessage("hi there"))]
    out = render_messages([], entries, max_tokens=1_000, counter=COUNTER)
    assert out == [e.message for e in entries]


def test_the_newest_messages_are_kept_and_the_marker_counts_the_rest() -> None:
    """Over budget, the oldest messages go first and the head names how many."""
    entries = [entry(HumanMessage(f"message number {i} " + "word " * 10)) for i in range(20)]
    out = render_messages([], entries, max_tokens=80, counter=COUNTER)
    assert COUNTER.count_messages(out) <= 80
    head = out[0]
    assert is_summary_message(head) and head.additional_kwargs[OMITTED_MARKER] == 21 - len(out)
    assert out[1:] == [e.message for e in entries[-(len(out) - 1) :]]


def test_a_single_message_larger_than_the_budget_leaves_only_the_marker() -> None:
    """A message that alone exceeds the budget is left out too."""
    out = render_messages([], [entry(HumanMessage("word " * 500))], max_tokens=60, counter=COUNTER)
    assert len(out) == 1 and out[0].additional_kwargs[OMITTED_MARKER] == 1
    assert COUNTER.count_messages(out) <= 60


def test_summaries_are_left_out_oldest_first_when_they_alone_do_not_fit() -> None:
    """When the summaries alone pass the budget, the oldest ones are left out."""
    summaries = [summary(i, f"summary {i}: " + "fact " * 30) for i in range(1, 5)]
    out = render_messages(summaries, [entry(HumanMessage("hi"))], max_tokens=90, counter=COUNTER)
    assert COUNTER.count_messages(out) <= 90
    head = out[0]
    assert "summary 4:" in str(head.content) and "summary 1:" not in str(head.content)
    assert "earlier summaries" in str(head.content) or "earlier summary" in str(head.content)


def test_pinned_context_is_kept_and_too_much_of_it_is_a_typed_error() -> None:
    """Pinned entries survive any cut; pinned entries over the budget raise."""
    pin = entry(SystemMessage("rule: be brief"), pinned=True)
    chatter = [entry(HumanMessage("chatter " * 20)) for _ in range(10)]
    out = render_messages([], [pin, *chatter], max_tokens=60, counter=COUNTER)
    assert pin.message in out and COUNTER.count_messages(out) <= 60
    with pytest.raises(BudgetExceeded):
        render_messages([], [pin, *chatter], max_tokens=5, counter=COUNTER)


def test_when_pinned_context_leaves_no_room_the_marker_is_dropped() -> None:
    """The budget outranks the marker: only pinned context is returned then."""
    pin = entry(SystemMessage("rule " * 40), pinned=True)
    out = render_messages(
        [], [entry(HumanMessage("hi " * 30)), pin], max_tokens=pin.tokens + 3, counter=COUNTER
    )
    assert out == [pin.message]


@given(st.lists(st.text(min_size=1, max_size=300), min_size=1, max_size=6))
def test_the_head_bound_is_never_below_the_exact_count(texts: list[str]) -> None:
    """The stored-count bound that spares counting summaries on every read is an upper
    bound of the head message's exact count."""
    summaries = [summary(i + 1, text) for i, text in enumerate(texts)]
    exact = head_tokens(COUNTER, summary_message(summaries))
    bound = head_upper_bound(COUNTER, SUMMARY_HEADER + "\n", [s.token_count for s in summaries])
    assert exact <= bound
