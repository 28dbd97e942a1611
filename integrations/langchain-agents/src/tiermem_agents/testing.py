"""Helpers for testing agents that use ``TieredMemoryMiddleware``, without a real model."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, cast

from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from pydantic import Field
from tiermem import is_summary_message

__all__ = [
    "LookupConversation",
    "ToolCallingFakeModel",
    "assert_provider_valid",
    "lookup",
    "lookup_conversation",
    "tool_turns",
]


class ToolCallingFakeModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` that accepts ``bind_tools`` and records its inputs.

    ``create_agent`` binds the agent's tools to its model; this fake ignores them
    and answers with the next scripted message. ``requests`` holds every list of
    messages the model was called with, so tests can check what the agent sent.
    """

    requests: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Return the model itself; the script decides which tools get called.

        Args:
            tools: Ignored.
            tool_choice: Ignored.
            **kwargs: Ignored.

        Returns:
            This model.
        """
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        """Record the request, then answer with the next scripted message."""
        self.requests.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def tool_turns(
    turns: int,
    *,
    tool: str = "lookup",
    calls_per_turn: Callable[[int], int] = lambda turn: 1 + turn % 2,
    answer: Callable[[int], str] = lambda turn: f"Answer {turn}: done.",
    call_text: Callable[[int], str] = lambda turn: "",
) -> Iterator[AIMessage]:
    """Script a model that calls tools once per turn, then answers.

    Each turn yields an ``AIMessage`` with ``calls_per_turn(turn)`` parallel calls of
    ``tool`` (argument ``{"query": "item <turn>-<i>"}``), then a final answer; the
    agent therefore calls the model exactly twice per turn.

    Args:
        turns: Number of user turns to script.
        tool: The tool name to call.
        calls_per_turn: Parallel calls in turn ``turn``.
        answer: The final answer text of turn ``turn``.
        call_text: The text of the message that makes turn ``turn``'s calls
            (none by default).

    Yields:
        The model's messages, in call order.
    """
    for turn in range(turns):
        calls = [
            {"name": tool, "args": {"query": f"item {turn}-{i}"}, "id": f"call_{turn}_{i}"}
            for i in range(calls_per_turn(turn))
        ]
        yield AIMessage(content=call_text(turn), tool_calls=calls, id=f"ai_{turn}_call")
        yield AIMessage(content=answer(turn), id=f"ai_{turn}_answer")


@tool
def lookup(query: str) -> str:
    """Look up a record by its query and return it."""
    return f"Record {query}: the code word is {query.replace(' ', '-')}-zulu."


class LookupConversation(NamedTuple):
    """A scripted conversation of tool calls in which every message says something
    no other message says (see :func:`lookup_conversation`)."""

    #: The user's question of each turn.
    questions: list[str]
    #: The model's messages (for :class:`ToolCallingFakeModel`).
    script: Iterator[AIMessage]
    #: One text per message of the conversation (question, call, each result,
    #: answer), found in no other message: what a count of stored copies looks for.
    texts: list[str]


def lookup_conversation(turns: int) -> LookupConversation:
    """``turns`` turns in which the model says it looks something up, calls
    :func:`lookup` once or twice (:func:`tool_turns`) and answers."""
    script = tool_turns(
        turns,
        call_text=lambda turn: f"Looking up turn {turn} now.",
        answer=lambda turn: f"Turn {turn} is answered.",
    )
    questions = [f"Question number {turn}, please." for turn in range(turns)]
    texts = []
    for turn in range(turns):
        texts += [questions[turn], f"Looking up turn {turn} now."]
        texts += [f"item-{turn}-{i}-zulu." for i in range(1 + turn % 2)]
        texts.append(f"Turn {turn} is answered.")
    return LookupConversation(questions, script, texts)


def assert_provider_valid(messages: Sequence[BaseMessage]) -> None:
    """Assert that a message list is valid input for tool-calling providers.

    Rules: a summary message only follows system messages; every ``AIMessage`` with tool calls
    is immediately followed by exactly one ``ToolMessage`` per call (any order);
    no ``ToolMessage`` appears anywhere else.

    Args:
        messages: The messages, as sent to the model or held in the agent state.

    Raises:
        AssertionError: Naming the first offending position.
    """
    index = 0
    while index < len(messages):
        message = messages[index]
        if is_summary_message(message) and any(m.type != "system" for m in messages[:index]):
            raise AssertionError(f"summary message at position {index} follows the conversation")
        if isinstance(message, ToolMessage):
            raise AssertionError(f"tool result {message.tool_call_id!r} at {index} has no call")
        index += 1
        if isinstance(message, AIMessage) and message.tool_calls:
            expected = {call["id"] for call in message.tool_calls}
            answered: list[str | None] = []
            while index < len(messages) and isinstance(messages[index], ToolMessage):
                answered.append(cast("ToolMessage", messages[index]).tool_call_id)
                index += 1
            if sorted(map(str, answered)) != sorted(map(str, expected)):
                raise AssertionError(f"calls {sorted(map(str, expected))} answered by {answered}")
