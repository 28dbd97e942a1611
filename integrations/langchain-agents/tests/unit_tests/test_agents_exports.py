"""The public surface of tiermem_agents and its test helpers."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

import tiermem_agents
from tiermem_agents.testing import (
    ToolCallingFakeModel,
    assert_provider_valid,
    lookup,
    lookup_conversation,
    tool_turns,
)


def test_all_is_pinned() -> None:
    """__all__ lists exactly the documented names, and a version is set."""
    assert tiermem_agents.__all__ == [
        "TieredMemoryMiddleware",
        "recall_tool",
        "session_id_from_config",
    ]
    assert tiermem_agents.__version__


def test_tool_turns_script_calls_then_answers() -> None:
    """The script alternates one and two parallel calls, each followed by an answer."""
    script = list(tool_turns(2))
    assert [len(m.tool_calls) for m in script] == [1, 0, 2, 0]
    assert script[3].content == "Answer 1: done."
    assert script[0].content == ""  # a call says nothing unless asked to
    said = list(tool_turns(2, call_text=lambda turn: f"Looking up {turn}."))
    assert [m.content for m in said[::2]] == ["Looking up 0.", "Looking up 1."]


def test_lookup_conversation_lists_each_message_text_once() -> None:
    """Each text of a lookup conversation is what one message says (question, call,
    each tool result, answer), in order, and no text contains another."""
    conversation = lookup_conversation(2)
    script = list(conversation.script)
    results = [
        str(lookup.invoke(call["args"])) for message in script for call in message.tool_calls
    ]
    assert conversation.questions == ["Question number 0, please.", "Question number 1, please."]
    said = [conversation.questions[0], script[0].content, results[0], script[1].content]
    said += [conversation.questions[1], script[2].content, *results[1:], script[3].content]
    texts = conversation.texts
    assert len(texts) == len(said) == 9
    assert all(text in message for text, message in zip(texts, said, strict=True))
    assert not any(a in b for a in texts for b in texts if a is not b)


def test_fake_model_binds_tools_and_records_requests() -> None:
    """bind_tools returns the model itself and every request is recorded."""
    model = ToolCallingFakeModel(messages=iter(["hi"]))
    assert model.bind_tools([]) is model
    assert model.invoke([HumanMessage("hello")]).content == "hi"
    assert [m.content for m in model.requests[0]] == ["hello"]


def _call(call_id: str) -> AIMessage:
    """An assistant message calling one tool."""
    return AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": call_id}])


def _result(call_id: str) -> ToolMessage:
    """The result of call ``call_id``."""
    return ToolMessage("ok", tool_call_id=call_id)


@pytest.mark.parametrize(
    "messages",
    [
        [_result("a")],
        [_call("a"), HumanMessage("x"), _result("a")],
        [_call("a")],
        [_call("a"), _result("a"), _result("a")],
        [HumanMessage("x"), SystemMessage("s", additional_kwargs={"tiermem_summary_ids": [1]})],
    ],
)
def test_provider_check_rejects_invalid_shapes(messages: list[BaseMessage]) -> None:
    """Orphan results, split or unanswered calls, duplicates and a late summary fail."""
    with pytest.raises(AssertionError):
        assert_provider_valid(messages)


def test_provider_check_accepts_valid_shapes() -> None:
    """Parallel results in any order right after their call pass."""
    two = AIMessage(
        "",
        tool_calls=[{"name": "t", "args": {}, "id": "a"}, {"name": "t", "args": {}, "id": "b"}],
    )
    assert_provider_valid(
        [SystemMessage("p"), HumanMessage("x"), two, _result("b"), _result("a"), AIMessage("y")]
    )
