"""An entry's row keeps its text once: the message JSON leaves a hole where the text
is, and every read puts it back exactly."""

from __future__ import annotations

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from tiermem import ConversationMemory
from tiermem._core import messages as messages_module
from tiermem._core.messages import (
    _CACHE,
    clear_cache,
    deserialize,
    full_json,
    hollow,
    parse_entry,
    render_text,
    serialize,
    store_text,
    stored_message,
)
from tiermem._core.packing import unpack

HOLLOWED = [
    HumanMessage("What did I say about Lisbon?", id="h-1"),
    AIMessage('You said "the trams".\nAnd \\ more, é ✓', id="a-1"),
    ToolMessage("42 rows", tool_call_id="call-1", name="query"),
    SystemMessage("be brief", name="setup"),
    ChatMessage(content="a chat line", role="critic"),
    AIMessageChunk(content="a chunk"),
    HumanMessage("a NUL \x00 and a control \x1f character"),
    HumanMessage("\ufdd0 starts with the escape marker"),
    AIMessage("Looking it up.", tool_calls=[{"name": "f", "args": {"q": 1}, "id": "c-1"}]),
]


@pytest.mark.parametrize("message", HOLLOWED, ids=lambda m: type(m).__name__)
def test_a_text_message_is_stored_without_its_text_and_reads_back_whole(
    message: BaseMessage,
) -> None:
    whole = serialize(message, max_chars=10**6)
    text = render_text(message)
    kept = hollow(whole, message, text)
    assert str(message.content) not in kept and len(kept) < len(whole)
    stored = stored_message(kept, store_text(text))
    assert full_json(stored) == whole
    for read in (deserialize(stored), parse_entry(stored)):
        assert type(read) is type(message) and read == message


@pytest.mark.parametrize(
    "message",
    [
        AIMessage("", id="empty"),
        AIMessage(content=[{"type": "text", "text": "blocks"}]),
        AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c-1"}]),
        AIMessage("  spaced  ", tool_calls=[{"name": "f", "args": {}, "id": "c-1"}]),
    ],
    ids=["empty", "blocks", "calls-only", "stripped"],
)
def test_a_message_whose_text_is_not_its_content_is_stored_whole(message: BaseMessage) -> None:
    """Content blocks, empty text, and a tool call whose text does not begin with the
    content (it is stripped) keep the JSON as it is; it reads back as before."""
    whole = serialize(message, max_chars=10**6)
    text = render_text(message)
    kept = hollow(whole, message, text)
    assert unpack(kept) == whole  # packed (see test_packed_messages), not hollowed
    assert full_json(stored_message(kept, store_text(text))) == whole
    assert deserialize(whole) == message


def test_rows_written_whole_by_an_earlier_version_still_read() -> None:
    """A row whose JSON holds its text (every row before this format) is read as it
    is, whatever its content column says."""
    message = HumanMessage("stored before the text was kept once")
    whole = serialize(message, max_chars=10**6)
    assert stored_message(whole, "anything") == whole
    assert parse_entry(stored_message(whole, "anything")) == message


def test_two_messages_with_one_shell_are_cached_apart() -> None:
    """Messages that differ only in their text share a hollow JSON: the cache keys
    them by the JSON and the text together."""
    first, second = HumanMessage("first text"), HumanMessage("second text")
    shells = {
        unpack(hollow(serialize(m, max_chars=10**6), m, render_text(m))) for m in (first, second)
    }
    assert len(shells) == 1
    (shell,) = shells
    assert parse_entry((shell, "first text")) == first
    assert parse_entry((shell, "second text")) == second
    assert (shell, "first text") in _CACHE and (shell, "second text") in _CACHE


@pytest.mark.parametrize(
    "text",
    ["a plain question", "a NUL \x00 inside", "\ufdd0 the escape marker first"],
    ids=["plain", "nul", "marker"],
)
def test_an_appended_message_is_read_back_from_the_cache(text: str) -> None:
    """The append seeds the parse cache under the key a read of the row makes (its
    hollow JSON and its text as the text column gives it back), so the turn that
    stores a message reads it without parsing, whatever escaping the column needs."""
    memory = ConversationMemory("sqlite://")
    try:
        clear_cache()
        memory.add_messages("s", [HumanMessage(text, id="h-1")])
        (key,) = list(_CACHE)
        assert isinstance(key, tuple) and key[1] == text
        cached = _CACHE[key]
        parsed: list[object] = []
        original = messages_module._construct

        def counting(stored: dict[str, object]) -> object:
            parsed.append(stored)
            return original(stored)

        messages_module._construct = counting  # type: ignore[assignment]
        try:
            assert memory.get_messages("s") == [HumanMessage(text, id="h-1")]
        finally:
            messages_module._construct = original
        assert parsed == [] and _CACHE[key] is cached
    finally:
        memory.close()
