"""The parse cache of stored messages, and seeding it from the messages being stored."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
)

from tiermem._messages import _CACHE, deserialize, remember, serialize


def _parsed(text: str) -> BaseMessage:
    return messages_from_dict([json.loads(text)])[0]


def _same(a: BaseMessage, b: BaseMessage) -> bool:
    return type(a) is type(b) and a.__dict__ == b.__dict__


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage("a plain question"),
        AIMessage("a plain answer", id="run-1"),
        SystemMessage("be brief", name="setup"),
        HumanMessage(content=[]),
    ],
)
def test_a_seeded_plain_message_reads_back_as_parsing_gives_it(message: BaseMessage) -> None:
    """A plain message is cached at store time; reading it gives what parsing its JSON
    gives, as a fresh copy that shares nothing with the caller's object."""
    text = serialize(message, max_chars=10**6)
    remember(text, message)
    assert text in _CACHE and _CACHE[text] is not message
    read = deserialize(text)
    assert _same(read, _parsed(text)) and read is not _CACHE[text]
    message.additional_kwargs["edited"] = True  # the caller keeps editing its own object
    assert "edited" not in deserialize(text).additional_kwargs


@pytest.mark.parametrize(
    "message",
    [
        AIMessage("", tool_calls=[{"name": "f", "args": {"x": 1}, "id": "c1"}]),
        AIMessage("tuple inside", additional_kwargs={"pair": (1, 2)}),
        HumanMessage("with metadata", response_metadata={"k": "v"}),
        HumanMessage("with an extra field", custom="kept"),
        HumanMessage(content=[{"type": "text", "text": "a block"}]),
        ToolMessage("result", tool_call_id="c1"),
    ],
)
def test_other_messages_are_parsed_on_first_read(message: BaseMessage) -> None:
    """Messages with values JSON could change (a tuple becomes a list) or other
    classes are not seeded: the first read parses them, so reads always equal a parse."""
    text = serialize(message, max_chars=10**6)
    remember(text, message)
    assert text not in _CACHE
    assert _same(deserialize(text), _parsed(text))
    if "pair" in message.additional_kwargs:
        assert deserialize(text).additional_kwargs["pair"] == [1, 2]
