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

from tiermem import ConversationMemory
from tiermem._core import messages as _messages
from tiermem._core.messages import (
    _CACHE,
    clear_cache,
    deserialize,
    parse_entry,
    remember,
    serialize,
)


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


def test_the_cache_is_bounded_by_characters_least_recently_used_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ``CACHE_MAX_CHARS`` characters of JSON the least recently read message is
    evicted; the running total always equals the characters held."""
    clear_cache()
    texts = [serialize(HumanMessage(f"{n} " + "x" * 1000), max_chars=10**6) for n in range(4)]
    monkeypatch.setattr(_messages, "CACHE_MAX_CHARS", sum(map(len, texts[:3])))
    for text in texts[:3]:
        deserialize(text)
    deserialize(texts[0])  # read again: now the most recently used
    deserialize(texts[3])
    assert list(_CACHE) == [texts[2], texts[0], texts[3]]
    assert _messages._cache_chars == sum(map(len, _CACHE)) <= _messages.CACHE_MAX_CHARS


def test_closing_a_memory_leaves_the_parse_cache_of_the_others(
    memory: ConversationMemory,
) -> None:
    """The parse cache is the process's, shared by every memory: closing one memory
    leaves the messages another one read cached (its next read parses nothing)."""
    for index in range(5):
        memory.add_user_message("s", f"message {index}")
    texts = [str(message.content) for message in memory.get_messages("s")]
    cached = list(_CACHE)
    assert len(cached) >= 5
    other = ConversationMemory("sqlite://")
    other.add_user_message("t", "a message of another memory")
    other.get_messages("t")
    other.close()
    assert set(cached) <= set(_CACHE)
    assert [str(message.content) for message in memory.get_messages("s")] == texts


def _scribble(value: object) -> None:
    """Edit every list and dict in ``value``, however deep."""
    if isinstance(value, dict):
        for inner in list(value.values()):
            _scribble(inner)
        value["edited"] = True
    elif isinstance(value, list):
        for inner in list(value):
            _scribble(inner)
        value.append("edited")


@pytest.mark.parametrize(
    "message",
    [
        AIMessage("", tool_calls=[{"name": "f", "args": {"x": [1, {"y": 2}]}, "id": "c1"}]),
        HumanMessage("with an extra field", custom={"nested": ["kept"]}),
        HumanMessage(content=[{"type": "text", "text": "a block"}], id="m-1", name="ann"),
        ToolMessage("result", tool_call_id="c1", artifact={"rows": [1, 2]}),
    ],
)
def test_every_read_is_a_model_of_its_own_equal_to_a_parse(message: BaseMessage) -> None:
    """Each read of a cached message is a new model equal to parsing its JSON (fields,
    extra fields, the fields given), and no edit of one read, however deep, reaches
    the cached message or a later read."""
    text = serialize(message, max_chars=10**6)
    first = deserialize(text)
    parsed = _parsed(text)
    assert _same(first, parsed) and first == parsed
    assert first.model_fields_set == parsed.model_fields_set
    assert first.__pydantic_extra__ == parsed.__pydantic_extra__
    assert first.__pydantic_private__ == parsed.__pydantic_private__
    for value in [*first.__dict__.values(), *(first.__pydantic_extra__ or {}).values()]:
        _scribble(value)
    first.model_fields_set.add("edited")
    again = deserialize(text)
    assert again is not first and _same(again, parsed) and again == parsed
    assert again.model_fields_set == parsed.model_fields_set
    assert again.__pydantic_extra__ == parsed.__pydantic_extra__


@pytest.mark.parametrize(
    "message",
    [
        HumanMessage("a plain question", id="q-1"),
        AIMessage("a plain answer", id="a-1"),
        SystemMessage("be brief", name="setup"),
        AIMessage("", id="a-2", tool_calls=[{"name": "f", "args": {"x": [1]}, "id": "c1"}]),
        AIMessage(
            "counted", usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
        ),
        ToolMessage("result", tool_call_id="c1", artifact={"rows": [1, 2]}),
        HumanMessage(content=[{"type": "text", "text": "a block"}], id="m-1"),
        HumanMessage("with an extra field", custom={"nested": ["kept"]}),
    ],
)
def test_an_entry_reads_back_as_its_json_parses_with_every_field_set(
    message: BaseMessage,
) -> None:
    """``parse_entry`` (a checkpoint's messages) gives what parsing the entry's JSON
    gives, every field counted as set, whether the parse cache held the message or
    not, and each read is a model of its own: an edit of one, however deep, reaches
    no other."""
    text = serialize(message, max_chars=10**6)
    parsed = _parsed(text)
    clear_cache()
    first = parse_entry(text)  # not cached: built from the JSON
    remember(text, message)
    reads = [first, parse_entry(text), parse_entry(text)]
    for read in reads:
        assert _same(read, parsed) and read == parsed
        assert read.model_fields_set == parsed.model_fields_set >= set(type(read).model_fields)
        assert read.__pydantic_extra__ == parsed.__pydantic_extra__
        assert read.__pydantic_private__ == parsed.__pydantic_private__
    for value in [*first.__dict__.values(), *(first.__pydantic_extra__ or {}).values()]:
        _scribble(value)
    again = parse_entry(text)
    assert _same(again, parsed) and _same(reads[1], parsed) and _same(reads[2], parsed)


def test_an_entry_in_the_parse_cache_is_copied_not_parsed() -> None:
    """A plain message the cache holds is read as a copy of the cached message (no
    JSON parsed): what a checkpoint read of a thread this process wrote does."""
    text = serialize(HumanMessage("as stored", id="q-1"), max_chars=10**6)
    clear_cache()
    remember(text, HumanMessage("as cached", id="q-1"))  # told apart from a parse
    read = parse_entry(text)
    assert read.content == "as cached" and read is not _CACHE[text]
    clear_cache()
    assert parse_entry(text).content == "as stored"
