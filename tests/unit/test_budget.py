"""Fitting a context into max_tokens (pure functions of tiermem.budget and rendering)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from tiermem import OMITTED_MARKER, TokenCounter, is_summary_message
from tiermem._core.budget import WindowEntry, group_units, head_tokens, head_upper_bound
from tiermem._core.current_turn import TRUNCATED_MARKER
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


def test_a_single_message_larger_than_the_budget_is_shown_truncated_never_dropped() -> None:
    """A message that alone exceeds the budget is the question: it is shown cut,
    with a marker giving its whole size, and the context fits."""
    message = HumanMessage("start of the question " + "word " * 500)
    out = render_messages([], [entry(message)], max_tokens=60, counter=COUNTER)
    assert len(out) == 1 and isinstance(out[0], HumanMessage)
    assert str(out[0].content).startswith("start of the question")
    assert "truncated to fit the token budget" in str(out[0].content)
    assert out[0].additional_kwargs[TRUNCATED_MARKER] == COUNTER.count_message(message)
    assert COUNTER.count_messages(out) <= 60
    assert message.content == "start of the question " + "word " * 500  # not changed


def test_the_newest_human_message_and_the_tool_exchange_in_progress_are_always_kept() -> None:
    """Older messages give way, then the current turn is cut to fit; the note counts
    only what is really left out, all of it earlier."""
    older = [entry(AIMessage(f"older answer {i} " + "word " * 30)) for i in range(5)]
    question = entry(HumanMessage("what is in the report? " + "detail " * 300))
    exchange = [
        entry(call("c1")),
        entry(ToolMessage("report body " + "line " * 300, tool_call_id="c1")),
    ]
    out = render_messages([], [*older, question, *exchange], max_tokens=200, counter=COUNTER)
    assert COUNTER.count_messages(out) <= 200
    kinds = [type(message).__name__ for message in out]
    assert kinds == ["SystemMessage", "HumanMessage", "AIMessage", "ToolMessage"]
    assert out[0].additional_kwargs[OMITTED_MARKER] == 5
    assert "5 earlier messages" in str(out[0].content)
    assert str(out[1].content).startswith("what is in the report?")
    assert str(out[3].content).startswith("report body")


def test_a_fitting_current_turn_is_never_cut() -> None:
    """Truncation is the last resort: when the current turn fits, older messages go
    and the newest is shown whole."""
    older = [entry(HumanMessage(f"old {i} " + "word " * 40)) for i in range(6)]
    newest = entry(HumanMessage("the question " + "word " * 30))
    out = render_messages([], [*older, newest], max_tokens=100, counter=COUNTER)
    assert out[-1] is newest.message and COUNTER.count_messages(out) <= 100


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


def test_the_guard_moves_its_cut_in_large_steps() -> None:
    """A conversation growing at its end keeps the same first message for many turns:
    the cut falls only where the running total of older messages crosses a quarter
    of the budget, so the omitted count (and the prefix) changes rarely."""
    messages = [entry(HumanMessage(f"message {i} " + "word " * 20)) for i in range(200)]
    firsts, counts = [], []
    for length in range(60, 200):
        out = render_messages([], messages[:length], max_tokens=1_000, counter=COUNTER)
        assert COUNTER.count_messages(out) <= 1_000
        firsts.append(out[1].content)
        counts.append(out[0].additional_kwargs[OMITTED_MARKER])
    changes = sum(1 for a, b in zip(firsts, firsts[1:], strict=False) if a != b)
    assert changes <= len(firsts) // 8  # about every quarter budget (10 messages)
    assert counts == sorted(counts)
