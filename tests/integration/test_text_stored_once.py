"""Each message's text is stored once: in its entry's ``content`` column, not again in
the message JSON beside it; every way of reading the entry gets the message whole."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem.doctor import find_violations
from tiermem.errors import InvalidArgument
from tiermem.testing import FakeSummarizer, stored_copies

from ..conftest import MemoryFactory
from ..reliability.dump import tiermem_table_names

#: Tables that hold a text for search alone (full-text shadow tables and the like).
SEARCH_ONLY = ("_fts", "fts_")


def _conversation() -> list[BaseMessage]:
    return [
        HumanMessage("Remind me what the harbour pilot from Gdansk said.", id="q-1"),
        AIMessage(
            "Calling the notes tool.",
            id="a-1",
            tool_calls=[{"name": "notes", "args": {"q": "pilot"}, "id": "c-1"}],
        ),
        ToolMessage("The pilot Wiktor said the north quay closes at dusk.", tool_call_id="c-1"),
        AIMessage("Wiktor, the harbour pilot, said the north quay closes at dusk.", id="a-2"),
        HumanMessage('And the "ferry" times?\nThe ones with \\ slashes, é ✓', id="q-2"),
    ]


def _copies(engine: Engine, needle: str) -> dict[str, int]:
    """How many times ``needle`` occurs in each tiermem table (bytes as UTF-8)."""
    found: dict[str, int] = {}
    with engine.connect() as conn:
        for name in tiermem_table_names(engine):
            if any(part in name for part in SEARCH_ONLY):
                continue
            for row in conn.execute(sa.text(f"SELECT * FROM {name}")):
                for value in row:
                    if isinstance(value, bytes | bytearray | memoryview):
                        value = bytes(value).decode("utf-8", "replace")
                    count = str(value).count(needle)
                    if count:
                        found[name] = found.get(name, 0) + count
    return found


def _check(memory: ConversationMemory, engine: Engine, session: str) -> None:
    sent = _conversation()
    for message in sent:
        if isinstance(message.content, str):
            assert _copies(engine, message.content) == {"tiermem_entry": 1}, message.content
    assert memory.get_messages(session) == sent
    entries = memory.get_entries(session)
    assert [entry.message for entry in entries] == sent
    assert [entry.content for entry in entries][-1] == sent[-1].content
    exported = memory.export_session(session)
    assert [entry.message["data"]["content"] for entry in exported.entries] == [
        m.content for m in sent
    ]
    assert memory.search("Wiktor quay", session_id=session)[0].entry.message == sent[2]


def test_an_appended_message_keeps_its_text_once(
    make_memory: MemoryFactory, engine: Engine
) -> None:
    memory = make_memory()
    memory.add_messages("s", _conversation())
    _check(memory, engine, "s")
    assert find_violations(engine, deep=True) == []


def test_stored_copies_counts_each_stored_text(make_memory: MemoryFactory) -> None:
    """``tiermem.testing.stored_copies``: one copy of each text of a conversation,
    two once a second session holds it too, none of a text never stored."""
    memory = make_memory()
    memory.add_messages("s", _conversation())
    texts = [str(m.content) for m in _conversation()]
    assert stored_copies(memory, texts) == 1.0
    memory.add_messages("t", [HumanMessage(texts[0])])
    assert stored_copies(memory, texts[:1]) == 2.0
    assert stored_copies(memory.engine, ["never said anywhere"]) == 0.0
    with pytest.raises(InvalidArgument):
        stored_copies(memory, [])


def test_an_imported_session_keeps_its_text_once(
    make_memory: MemoryFactory, engine: Engine
) -> None:
    source = make_memory()
    source.add_messages("s", _conversation())
    bundle = source.export_session("s")
    source.import_session(bundle, overwrite=True)
    _check(source, engine, "s")
    assert find_violations(engine, deep=True) == []


def test_compressed_entries_read_back_whole(make_memory: MemoryFactory, engine: Engine) -> None:
    """Compression links entries to a summary (an update of their rows); expanding the
    summary gives the messages whole."""
    config = MemoryConfig(max_tokens=400, recent_window=2, min_entries_to_compress=2)
    memory = make_memory(config=config, summarizer=FakeSummarizer())
    sent = [
        HumanMessage(f"Turn {n}: the lighthouse keeper counted {n} gulls at noon.")
        for n in range(40)
    ]
    for message in sent:
        memory.add_messages("s", [message])
    (summary, *_) = memory.get_summaries("s")
    expanded = memory.expand_summary(summary.id)
    assert expanded and all(entry.message in sent for entry in expanded)
    # (the extractive summary may quote it: that is the summary's text, not a copy)
    assert _copies(engine, str(sent[0].content))["tiermem_entry"] == 1
    assert find_violations(engine, deep=True) == []
