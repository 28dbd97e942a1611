"""How active messages become a provider-valid context (pure functions)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem import MISSING_RESULT_MARKER
from tiermem._core.render import MISSING_RESULT_TEXT, provider_order
from tiermem.doctor import provider_shape_problems


def call(*ids: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "search", "args": {}, "id": i} for i in ids])


def result(call_id: str, text: str = "ok") -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=call_id, name="search")


def shape(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [
        (m.type, m.tool_call_id if isinstance(m, ToolMessage) else str(m.content)) for m in messages
    ]


def assert_valid(messages: list[BaseMessage]) -> None:
    for provider in ("openai", "anthropic"):
        assert provider_shape_problems(messages, provider) == []


def test_plain_messages_pass_through_unchanged() -> None:
    messages: list[BaseMessage] = [HumanMessage("hi"), AIMessage("hello")]
    assert provider_order(messages) == messages


def test_a_result_stored_after_another_message_is_moved_up_to_its_call() -> None:
    ordered = provider_order([call("a"), HumanMessage("meanwhile"), result("a")])
    assert shape(ordered) == [("ai", ""), ("tool", "a"), ("human", "meanwhile")]
    assert_valid(ordered)


def test_results_follow_in_the_order_of_the_calls() -> None:
    ordered = provider_order([call("a", "b"), result("b"), result("a")])
    assert shape(ordered) == [("ai", ""), ("tool", "a"), ("tool", "b")]


def test_a_call_the_conversation_went_on_without_gets_a_stand_in_result() -> None:
    ordered = provider_order([call("a"), HumanMessage("never mind"), AIMessage("ok")])
    assert shape(ordered) == [("ai", ""), ("tool", "a"), ("human", "never mind"), ("ai", "ok")]
    stand_in = ordered[1]
    assert isinstance(stand_in, ToolMessage)
    assert stand_in.status == "error"
    assert stand_in.content == MISSING_RESULT_TEXT
    assert stand_in.additional_kwargs == {MISSING_RESULT_MARKER: True}
    assert_valid(ordered)


def test_a_partly_answered_call_gets_stand_ins_only_for_the_missing_results() -> None:
    ordered = provider_order([call("a", "b", "c"), result("b", "real"), HumanMessage("next")])
    assert shape(ordered) == [
        ("ai", ""),
        ("tool", "a"),
        ("tool", "b"),
        ("tool", "c"),
        ("human", "next"),
    ]
    assert [m.text for m in ordered[1:4]] == [MISSING_RESULT_TEXT, "real", MISSING_RESULT_TEXT]
    assert_valid(ordered)


def test_an_unanswered_call_at_the_end_is_left_for_its_tool() -> None:
    ordered = provider_order([HumanMessage("find x"), call("a", "b"), result("a")])
    assert shape(ordered) == [("human", "find x"), ("ai", ""), ("tool", "a")]
    assert not any(MISSING_RESULT_MARKER in m.additional_kwargs for m in ordered)
