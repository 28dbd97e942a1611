"""``rename_session``: a session's conversation, tier, checkpoints and change-feed
events move to a new id in one transaction; the signal and the event come only once
committed; a taken, unknown or bad id changes nothing."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem.errors import (
    InvalidArgument,
    InvalidSessionId,
    SessionExists,
    SessionNotFound,
)
from tiermem.feed import ChangeEvent
from tiermem.testing import FakeSummarizer, SignalRecorder, wait_for_feed

from ..conftest import MemoryFactory
from ..reliability.dump import canonical_dump

SMALL = MemoryConfig(max_tokens=400, min_entries_to_compress=2, recent_window=2)


def _events(memory: ConversationMemory) -> list[ChangeEvent]:
    wait_for_feed(memory)
    return list(memory.feed.follow(poll_interval=0.02, idle_timeout=0.05))


def _conversation(memory: ConversationMemory, session_id: str) -> None:
    for index in range(6):
        memory.add_user_message(session_id, f"kestrel question {index}")
        memory.add_assistant_message(session_id, f"kestrel answer {index}")
    memory.compress(session_id, force=True)


def test_the_conversation_moves_to_the_new_id(make_memory: MemoryFactory) -> None:
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    _conversation(memory, "visitor-1")
    before = memory.export_session("visitor-1")
    context = memory.get_messages("visitor-1", query="")
    memory.rename_session("visitor-1", "user-42")
    after = memory.export_session("user-42")
    assert after.entries == before.entries and after.summaries == before.summaries
    assert memory.get_messages("user-42", query="") == context
    assert [info.session_id for info in memory.list_sessions()] == ["user-42"]
    assert {hit.entry.session_id for hit in memory.search("kestrel")} == {"user-42"}
    with pytest.raises(SessionNotFound):
        memory.export_session("visitor-1")
    # The old id is free again: an append starts a new session of it.
    memory.add_user_message("visitor-1", "hello again")
    assert memory.get_stats("visitor-1").total_entries == 1
    assert memory.get_stats("user-42").total_entries == 12


def test_signal_and_event_after_commit_and_earlier_events_carry_the_new_id(
    make_memory: MemoryFactory,
) -> None:
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    memory.add_user_message("other", "unrelated")
    _conversation(memory, "visitor-1")
    recorder = SignalRecorder(sender=memory)
    with recorder.recording():
        memory.rename_session("visitor-1", "user-42")
    renamed = {"session_id": "user-42", "previous": "visitor-1"}
    assert recorder.events == [("session:renamed", renamed)]
    events = _events(memory)
    assert {event.session_id for event in events} == {"other", "user-42"}
    last = events[-1]
    assert (last.kind, last.session_id, last.payload) == (
        "session:renamed",
        "user-42",
        {"previous": "visitor-1"},
    )
    assert [event.kind for event in events if event.session_id == "user-42"].count(
        "entry:added"
    ) == 12


@pytest.mark.parametrize(
    ("source", "target", "error"),
    [
        ("visitor-1", "taken", SessionExists),
        ("unknown", "user-42", SessionNotFound),
        ("visitor-1", "visitor-1", InvalidArgument),
        ("visitor-1", " padded", InvalidSessionId),
        ("visitor-1", "", InvalidSessionId),
    ],
)
def test_a_refused_rename_changes_nothing(
    make_memory: MemoryFactory, engine: Engine, source: str, target: str, error: type[Exception]
) -> None:
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    _conversation(memory, "visitor-1")
    memory.add_user_message("taken", "mine")
    before = canonical_dump(engine)
    recorder = SignalRecorder(sender=memory)
    with recorder.recording(), pytest.raises(error):
        memory.rename_session(source, target)
    assert recorder.events == []
    assert canonical_dump(engine) == before


def test_forgetting_the_new_id_erases_the_events_of_the_old_one(
    make_memory: MemoryFactory,
) -> None:
    """The erasure finds a person's events by session id: after a rename every event
    of the session carries the new id, so none is left naming the old one."""
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    _conversation(memory, "visitor-1")
    memory.rename_session("visitor-1", "user-42")
    memory.forget(sessions=["user-42"])
    assert [event.kind for event in _events(memory)] == ["forgotten"]


def test_async_twin(make_memory: MemoryFactory) -> None:
    memory = make_memory(config=SMALL)
    memory.add_messages("a", [HumanMessage("hi"), AIMessage("hello")])

    async def main() -> None:
        await memory.arename_session("a", "b")
        with pytest.raises(SessionExists):
            memory.add_user_message("a", "new")
            await memory.arename_session("a", "b")

    asyncio.run(main())
    assert memory.get_stats("b").total_entries == 2
    assert memory.get_stats("a").total_entries == 1
