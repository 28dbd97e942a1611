"""Accesses: track_access, and reads and writes counting as access, on both backends."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, MemoryTier, SessionInfo
from tiermem._storage.schema import session_table
from tiermem.errors import InvalidSessionId, SessionNotFound
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder

from ..conftest import MemoryFactory


def _stored(engine: Engine, session_id: str) -> tuple[str, int]:
    """(memory_tier, access_count) of a session row."""
    with engine.connect() as conn:
        row = conn.execute(
            sa.select(session_table.c.memory_tier, session_table.c.access_count).where(
                session_table.c.session_id == session_id
            )
        ).one()
    return row[0], row[1]


def test_track_access_records_an_access(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """track_access stamps the clock's time, counts one access and makes the tier ACTIVE."""
    memory = make_memory()
    memory.add_user_message("s", "hello")
    clock.advance(days=2)
    assert memory.recalculate_tiers() == 1
    info = memory.track_access("s")
    assert isinstance(info, SessionInfo)
    assert info.session_id == "s" and info.project == "default"
    assert info.last_accessed == clock.now
    assert info.access_count == 2
    assert info.memory_tier == MemoryTier.ACTIVE
    assert memory.get_stats("s").access_count == 2


def test_track_access_signals_a_woken_session(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Waking an ARCHIVED session sends one tier_changed to active; an ACTIVE one sends none."""
    memory = make_memory(project="p")
    memory.add_user_message("s", "hello")
    clock.advance(days=3)
    memory.recalculate_tiers()
    recorder = SignalRecorder(memory)
    with recorder.recording():
        memory.track_access("s")
        memory.track_access("s")
    assert recorder.events == [
        ("tier_changed", {"session_ids": ("s",), "tier": "active", "project": "p"})
    ]


def test_track_access_of_unknown_session_raises(make_memory: MemoryFactory) -> None:
    """An unknown session raises SessionNotFound and is not created."""
    memory = make_memory()
    with pytest.raises(SessionNotFound):
        memory.track_access("missing")
    assert memory.list_sessions() == []


def test_track_access_refuses_bad_ids(make_memory: MemoryFactory) -> None:
    """A malformed session id (empty, padded, with NUL, not a str) raises InvalidSessionId."""
    memory = make_memory()
    for bad in ("", " padded ", "nul\x00", 7):
        with pytest.raises(InvalidSessionId):
            memory.track_access(bad)  # type: ignore[arg-type]


def test_reads_and_writes_count_as_access(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """get_messages and add_* each count one access and make an archived session ACTIVE."""
    memory = make_memory()
    memory.add_user_message("s", "hello")
    assert _stored(engine, "s") == ("active", 1)
    clock.advance(days=2)
    memory.recalculate_tiers()
    assert _stored(engine, "s") == ("archived", 1)
    memory.get_messages("s")
    assert _stored(engine, "s") == ("active", 2)
    clock.advance(days=2)
    memory.recalculate_tiers()
    memory.add_assistant_message("s", "again")
    assert _stored(engine, "s") == ("active", 3)
    assert memory.list_sessions()[0].last_accessed == clock.now


#: Each public read of a session and whether it records an access: reads of the
#: conversation do; statistics, listings, expansion, search and export do not.
READS: dict[str, tuple[Callable[[ConversationMemory, int], object], bool]] = {
    "get_messages": (lambda m, _: m.get_messages("s"), True),
    "get_context_for_llm": (lambda m, _: m.get_context_for_llm("s"), True),
    "get_entries": (lambda m, _: m.get_entries("s"), True),
    "get_active_entries": (lambda m, _: m.get_active_entries("s"), True),
    "get_summaries": (lambda m, _: m.get_summaries("s"), True),
    "get_stats": (lambda m, _: m.get_stats("s"), False),
    "list_sessions": (lambda m, _: m.list_sessions(), False),
    "expand_summary": (lambda m, summary_id: m.expand_summary(summary_id), False),
    "search in the session": (lambda m, _: m.search("question", session_id="s"), False),
    "search in the project": (lambda m, _: m.search("question"), False),
    "export_session": (lambda m, _: m.export_session("s"), False),
}


@pytest.mark.parametrize("name", list(READS))
def test_which_reads_record_an_access(
    name: str, make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """The reads the README lists as accesses bump access_count and last_accessed and
    wake an archived session; the inspection reads leave all three as they were."""
    memory = make_memory(
        config=MemoryConfig(auto_compress=False, recent_window=1, min_entries_to_compress=2),
        summarizer=FakeSummarizer(),
    )
    for turn in range(3):
        memory.add_user_message("s", f"question number {turn}, " + "with many words " * 20)
    result = memory.compress("s", force=True)
    assert result is not None
    written = memory.list_sessions()[0].last_accessed
    clock.advance(days=2)
    memory.recalculate_tiers()
    before = _stored(engine, "s")
    assert before[0] == "archived"
    read, counts = READS[name]
    read(memory, result.summary.id)
    after = _stored(engine, "s")
    last_accessed = memory.list_sessions()[0].last_accessed
    if counts:
        assert after == ("active", before[1] + 1)
        assert last_accessed == clock.now
    else:
        assert after == before
        assert last_accessed == written


def test_reads_and_writes_signal_a_woken_session(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """A read, an append or a turn that wakes a session from another tier sends one
    tier_changed to active, after its commit; accesses of an ACTIVE session send none."""
    memory = make_memory(project="p")
    memory.add_user_message("s", "hello")
    woken = ("tier_changed", {"session_ids": ("s",), "tier": "active", "project": "p"})
    wakes: list[Callable[[], object]] = [
        lambda: memory.get_messages("s"),
        lambda: memory.add_assistant_message("s", "again"),
        lambda: memory.add_and_get_messages("s", [HumanMessage("and a turn")]),
        lambda: memory.get_entries("s"),
    ]
    for wake in wakes:
        clock.advance(days=3)
        memory.recalculate_tiers()
        recorder = SignalRecorder(memory)
        with recorder.recording():
            wake()
            wake()  # the session is ACTIVE now: no second signal
        assert [e for e in recorder.events if e[0] == "tier_changed"] == [woken]
        assert memory.list_sessions()[0].memory_tier == MemoryTier.ACTIVE


def test_access_clamps_a_future_timestamp(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """An access writes now, so a last_accessed stamped in the future is pulled back."""
    memory = make_memory()
    start = clock.now
    memory.add_user_message("s", "hello")
    clock.advance(days=5)
    memory.add_user_message("s", "from a clock that ran ahead")
    clock.set(start + timedelta(days=1))
    info = memory.track_access("s")
    assert info.last_accessed == clock.now


async def test_atrack_access_is_the_same_operation(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """atrack_access records the access and signals the wake-up like track_access."""
    memory = make_memory()
    await memory.aadd_user_message("s", "hello")
    clock.advance(hours=2)
    await memory.arecalculate_tiers()
    recorder = SignalRecorder(memory)
    with recorder.recording():
        info = await memory.atrack_access("s")
    assert info.access_count == 2 and info.last_accessed == clock.now
    assert recorder.names() == ["tier_changed"]
    with pytest.raises(SessionNotFound):
        await memory.atrack_access("missing")
