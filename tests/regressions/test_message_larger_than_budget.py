"""A message larger than the budget leaves the model its question: the newest human
message and a tool exchange in progress are always in the context, shown truncated
with a marker when they alone pass ``max_tokens``, their whole text still stored."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from tiermem import OMITTED_MARKER, ConversationMemory, MemoryConfig
from tiermem._core.current_turn import TRUNCATED_MARKER

from ..conftest import MemoryFactory

QUESTION = "Please check this contract for me. " + "The supplier delivers parts weekly. " * 250


def _fits(memory: ConversationMemory, messages: list[BaseMessage]) -> None:
    assert memory.counter.count_messages(messages) <= memory.config.max_tokens


def test_an_oversized_question_is_shown_truncated_on_every_read(
    make_memory: MemoryFactory,
) -> None:
    """The reported case: 500 tokens, "hello", an answer, then a ~1,500-token question.
    Every read shows the question (cut, marked), within budget; it is stored whole."""
    memory = make_memory(config=MemoryConfig(max_tokens=500))
    memory.add_user_message("s", "hello")
    memory.add_assistant_message("s", "hi, how can I help?")
    entry = memory.add_user_message("s", QUESTION)
    assert entry.token_count > 1_500
    for messages in (
        memory.get_messages("s"),
        memory.history("s").messages,
        memory.add_and_get_messages("s", []),
    ):
        _fits(memory, messages)
        last = messages[-1]
        assert isinstance(last, HumanMessage)
        assert str(last.content).startswith("Please check this contract for me.")
        assert last.additional_kwargs[TRUNCATED_MARKER] == entry.token_count
        for message in messages[:-1]:  # whatever is left out is earlier than it
            assert OMITTED_MARKER not in message.additional_kwargs or "earlier" in str(
                message.content
            )
    text = memory.get_context_for_llm("s")
    assert memory.counter.count_text(text) <= 500
    assert "Please check this contract for me." in text and "truncated" in text
    stored = memory.get_entries("s")[-1]
    assert stored.content == QUESTION and stored.message.content == QUESTION


def test_a_tool_result_larger_than_the_budget_keeps_the_question_and_the_call(
    make_memory: MemoryFactory,
) -> None:
    """A tool answers with far more than the budget: the question, the call and a
    truncated result are all in the model's next context."""
    memory = make_memory(config=MemoryConfig(max_tokens=400, auto_compress=False))
    for turn in range(10):
        memory.add_user_message("s", f"small talk {turn}")
        memory.add_assistant_message("s", f"answer {turn}")
    memory.add_user_message("s", "What does the log say?")
    call = AIMessage("", tool_calls=[{"name": "read_log", "args": {"path": "app.log"}, "id": "c1"}])
    result = ToolMessage("ERROR disk full " * 900, tool_call_id="c1", name="read_log")
    messages = memory.add_and_get_messages("s", [call, result])
    _fits(memory, messages)
    assert [type(m).__name__ for m in messages[-3:]] == ["HumanMessage", "AIMessage", "ToolMessage"]
    assert messages[-3].content == "What does the log say?"
    assert str(messages[-1].content).startswith("ERROR disk full")
    assert TRUNCATED_MARKER in messages[-1].additional_kwargs
    assert memory.get_entries("s")[-1].content == result.content


def test_a_turn_that_fits_without_the_marker_is_shown_whole(
    make_memory: MemoryFactory,
) -> None:
    """The note on earlier messages gives way before a word of the current turn: a
    question that fits the budget alone is shown whole, not cut to make room for a
    note about what was left out (a random run once got both messages of the turn
    cut to nothing, and no note either)."""
    question = "Which of the suppliers delivers on Fridays, and at what time? " * 4
    probe = make_memory(config=MemoryConfig(max_tokens=10_000))
    probe.add_user_message("p", question)
    alone = probe.counter.count_messages(probe.get_messages("p"))
    memory = make_memory(config=MemoryConfig(max_tokens=alone + 3, auto_compress=False))
    for turn in range(3):
        memory.add_user_message("s", f"small talk {turn}")
        memory.add_assistant_message("s", f"answer {turn}")
    memory.add_user_message("s", question)
    for messages in (memory.get_messages("s"), memory.add_and_get_messages("s", [])):
        assert messages == [HumanMessage(question)]
    text = memory.get_context_for_llm("s")
    assert "truncated" not in text and question.strip() in text
