"""The context the middleware hands the model, as pure functions."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from tiermem import TokenCounter

from tiermem_agents._context import model_context, safe_start, turn_start

COUNTER = TokenCounter()


def _exchange() -> list[BaseMessage]:
    return [
        HumanMessage("old question", id="h0"),
        AIMessage("old answer", id="a0"),
        HumanMessage("what does the report say?", id="h1"),
        AIMessage("", id="c1", tool_calls=[{"name": "fetch", "args": {}, "id": "x"}]),
        ToolMessage(" ".join(f"w{i}" for i in range(3000)), tool_call_id="x", id="t1"),
    ]


def test_the_turn_starts_at_the_newest_question() -> None:
    """The turn in progress begins at the newest human message; a cut inside a tool
    exchange moves back to its call."""
    messages = _exchange()
    assert turn_start(messages) == 2
    assert safe_start(messages, 4) == 3
    assert safe_start(messages, 1) == 1


def test_a_context_that_shows_the_kept_messages_is_kept() -> None:
    """When tiermem's context shows every kept message, it is used as it is."""
    messages = _exchange()
    assert model_context(messages, messages, 0, 100_000, COUNTER) is messages


def test_a_hidden_turn_is_shown_fitted_and_truncated() -> None:
    """With nothing of the turn shown, the model gets the turn (older kept messages left
    out first), the oversized result truncated with a marker, within the budget."""
    messages = _exchange()
    context = model_context([], messages, 0, 1000, COUNTER)
    assert [m.id for m in context] == ["h1", "c1", "t1"]
    assert "truncated to stay within the token budget" in str(context[-1].content)
    assert COUNTER.count_messages(context) <= 1000
    assert str(messages[-1].content).startswith("w0 w1")  # the original is not changed
    assert "truncated" not in str(messages[-1].content)
