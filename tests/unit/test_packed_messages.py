"""An entry's row keeps its message JSON packed: the runs nearly every message
repeats are kept as one control character each, and every read puts them back
exactly."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from tiermem import ConversationMemory
from tiermem._core.messages import (
    full_json,
    hollow,
    parse_entry,
    render_text,
    serialize,
    store_text,
    stored_message,
)
from tiermem._core.packing import pack, unpack
from tiermem.doctor import find_violations

MESSAGES = [
    HumanMessage("plain", id="h-1"),
    AIMessage("plain", id="a-1"),
    SystemMessage("be brief"),
    ToolMessage("42 rows", tool_call_id="call-1"),
    ChatMessage(content="a chat line", role="critic"),
    HumanMessage("named", name="ada", additional_kwargs={"k": 1}),
    AIMessage(
        "with usage",
        response_metadata={"model_name": "m"},
        usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3},
    ),
    AIMessage("calls", tool_calls=[{"name": "f", "args": {"name": None}, "id": "c-1"}]),
    ToolMessage("failed", tool_call_id="c-1", status="error", artifact={"rows": []}),
    # The text of a run inside a string is escaped (\"), so it is no run; a nested
    # field at its usual value is one, and is put back all the same.
    HumanMessage(',"name":null', additional_kwargs={"inner": {"x": 1, "name": None}}),
    HumanMessage([{"type": "text", "text": "blocks"}]),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: f"{type(m).__name__}")
def test_a_packed_row_reads_back_the_exact_json(message: BaseMessage) -> None:
    whole = serialize(message, max_chars=10**6)
    text = render_text(message)
    kept = hollow(whole, message, text)
    assert len(kept) < len(whole)
    assert full_json(stored_message(kept, store_text(text))) == whole
    assert parse_entry(stored_message(kept, store_text(text))) == message


def test_plain_messages_lose_their_usual_fields_from_the_row() -> None:
    """What a row keeps of a plain question and answer: the type, the hole where the
    text is, the id, and one character for each run."""
    human, ai = HumanMessage("q", id="h-1"), AIMessage("a", id="a-1")
    kept = [hollow(serialize(m, max_chars=10**6), m, str(m.content)) for m in (human, ai)]
    assert kept == [
        '{"type":"human","data":{"content":0\x01\x0e\x03,"id":"h-1"}}',
        '{"type":"ai","data":{"content":0\x01\x0f\x03,"id":"a-1"\x04}}',
    ]
    assert [len(unpack(k)) - len(k) for k in kept] == [70, 128]


def test_json_stored_before_packing_reads_as_it_is() -> None:
    whole = serialize(AIMessage("old row", id="a-1"), max_chars=10**6)
    assert unpack(whole) == whole
    assert stored_message(whole, "anything") == whole


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["name", "type", "tool_calls", "x", "additional_kwargs"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@given(kwargs=st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4), text=st.text())
def test_packing_is_undone_exactly_for_any_json(kwargs: dict[str, Any], text: str) -> None:
    """Any message JSON, runs and their look-alikes anywhere in it, comes back as it
    was; a value holding a control character is escaped by JSON, so no code clashes."""
    whole = serialize(HumanMessage(text, additional_kwargs=kwargs), max_chars=10**9)
    assert unpack(pack(whole)) == whole
    assert json.loads(unpack(pack(whole))) == json.loads(whole)


def test_a_stored_row_is_packed_and_checked_clean(tmp_path: Path) -> None:
    """The store writes packed rows, and the doctor's checks of tool calls read them."""
    calls = AIMessage("", id="a-1", tool_calls=[{"name": "f", "args": {}, "id": "c-1"}])
    with ConversationMemory(f"sqlite:///{tmp_path / 'm.db'}") as memory:
        memory.add_messages("s", [HumanMessage("q", id="h-1"), calls])
        # The call is open: the doctor must read it from its packed row to agree.
        assert find_violations(memory.engine, deep=True) == []
        memory.add_messages("s", [ToolMessage("r", tool_call_id="c-1", id="t-1")])
        assert find_violations(memory.engine, deep=True) == []
        result = ToolMessage("r", tool_call_id="c-1", id="t-1")
        assert memory.get_messages("s")[1:] == [calls, result]
    with sqlite3.connect(tmp_path / "m.db") as conn:
        rows = [row[0] for row in conn.execute("SELECT message FROM tiermem_entry ORDER BY seq")]
    assert all(unpack(row) != row for row in rows)
