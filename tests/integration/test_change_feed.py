"""The durable change feed: an event for each committed change, in the change's own
transaction; ordered reads, named consumers that resume where they acknowledged,
waiting followers, retention, and the feed turned off."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage

from tiermem import ConversationMemory, MemoryConfig
from tiermem._storage import entries, failpoints
from tiermem._storage import events as events_storage
from tiermem.errors import ImportValidationError, InvalidArgument, StorageError, SummarizerFailed
from tiermem.feed import EVENT_VERSION, ChangeEvent
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder, wait_for_feed

from ..conftest import MemoryFactory, pg_engine_for

SMALL = MemoryConfig(max_tokens=120, min_entries_to_compress=2, recent_window=2)


def settled(memory: ConversationMemory, **options: Any) -> list[ChangeEvent]:
    """Every event so far. On PostgreSQL an event is delivered once every older
    transaction on the server ended, and other clients' may run for seconds after a
    commit of ours: wait until every committed event is deliverable, then follow
    (the short idle timeout only ends the follow once it has read them all)."""
    wait_for_feed(memory)
    return list(memory.feed.follow(poll_interval=0.02, idle_timeout=0.05, **options))


def _kinds(memory: ConversationMemory) -> list[tuple[str, str | None]]:
    return [(event.kind, event.session_id) for event in settled(memory)]


def _signal_events(recorder: SignalRecorder) -> list[tuple[str, str | None]]:
    """The (kind, session) pairs the feed should hold for the recorded signals."""
    expected: list[tuple[str, str | None]] = []
    for name, kwargs in recorder.events:
        if "session_id" in kwargs:
            expected.append((name, kwargs["session_id"]))
        else:
            expected += [(name, session) for session in kwargs["session_ids"]]
            if kwargs.get("item_ids"):
                expected.append((name, None))
    return expected


def test_every_signal_has_its_event(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """Appends, a compression, a failed compression, a wake-up, a tier change, pruning
    and clearing each leave the events of the signals they sent, in the same order."""
    config = SMALL.replace(event_retention=timedelta(days=3650))  # pruning keeps them
    memory = make_memory(config=config, summarizer=FakeSummarizer())
    with SignalRecorder(sender=memory).recording() as recorder:
        for number in range(8):
            memory.add_user_message("a", f"message number {number} about the weather " * 3)
        memory.set_summarizer(FakeSummarizer(mode="raise", error=RuntimeError("model down")))
        with pytest.raises(SummarizerFailed):
            memory.compress("a", force=True)
        memory.add_user_message("b", "another conversation")
        clock.advance(days=40)
        memory.recalculate_tiers()
        memory.get_messages("a")  # an access wakes it
        clock.advance(days=400)
        memory.prune_expired()
        memory.add_user_message("c", "fresh")
        memory.clear_session("c")
    names = set(recorder.names())
    assert {"entry:added", "compressed", "compression_failed", "tier_changed"} <= names
    assert {"pruned", "session:cleared"} <= names
    assert _kinds(memory) == _signal_events(recorder)


def test_payloads_follow_the_schema(make_memory: MemoryFactory) -> None:
    """Each event carries the documented payload, the schema version and a position."""
    memory = make_memory(config=SMALL, summarizer=FakeSummarizer())
    for number in range(8):
        memory.add_user_message("a", f"message number {number} about the weather " * 3)
    memory.clear_session("a")
    events = settled(memory)
    added = [event for event in events if event.kind == "entry:added"]
    assert [event.payload["seq"] for event in added] == list(range(1, 9))
    assert set(added[0].payload) == {"entry_id", "seq", "type", "role", "token_count", "pinned"}
    assert added[0].payload["role"] == "user" and added[0].payload["type"] == "message"
    compressed = [event for event in events if event.kind == "compressed"]
    assert compressed and set(compressed[0].payload) == {
        "summary_id",
        "level",
        "first_seq",
        "last_seq",
        "entries_compressed",
        "merged_summaries",
        "tokens_before",
        "tokens_after",
    }
    assert events[-1].kind == "session:cleared" and events[-1].payload == {"entries_removed": 8}
    assert all(
        event.version == EVENT_VERSION and event.project == memory.project for event in events
    )
    positions = [event.position for event in events]
    assert len(set(positions)) == len(positions)


def test_content_only_when_asked(make_memory: MemoryFactory) -> None:
    """An entry's text is in its event only with ``event_content=True``."""
    plain = make_memory()
    plain.add_user_message("s", "secret text")
    assert "content" not in settled(plain)[0].payload
    with_content = make_memory(project="other", config=MemoryConfig(event_content=True))
    with_content.add_user_message("s", "secret text")
    assert settled(with_content)[0].payload["content"] == "secret text"


@pytest.mark.parametrize("content", [False, True])
def test_entry_events_are_written_with_their_entries(
    make_memory: MemoryFactory, clock: ManualClock, content: bool
) -> None:
    """An append writes its entries' events with them, each stored with an empty kind
    and its payload as the JSON array of the entry's values (type and role as their
    numbers) with the id the insert gave it, and delivered as ``entry:added`` with
    the object, in seq order after the tier change it caused; on PostgreSQL in the
    entries' own INSERT statement."""
    memory = make_memory(config=MemoryConfig(event_content=content, auto_compress=False))
    memory.add_user_message("s", "first")
    clock.advance(days=10)
    memory.recalculate_tiers()  # the append below wakes the session
    texts = ['say "hi"', "ünïcødé \\ and } {", '{"entry_id": -1}', "42"]
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    sa.event.listen(memory.engine, "before_cursor_execute", seen)
    try:
        stored = memory.add_messages("s", [HumanMessage(text) for text in texts])
    finally:
        sa.event.remove(memory.engine, "before_cursor_execute", seen)
    with memory.engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT kind, payload FROM tiermem_event WHERE kind = '' ORDER BY id")
        ).all()
    expected, delivered = [], []
    for entry in stored:
        # type 0 and role 0: a message, the user's
        values: list[int | str] = [entry.id, entry.seq, entry.token_count, 0, 0, 0]
        payload = {
            "entry_id": entry.id,
            "seq": entry.seq,
            "type": entry.type.value,
            "role": entry.role,
            "token_count": entry.token_count,
            "pinned": entry.pinned,
        }
        if content:
            values.append(entry.content)
            payload["content"] = entry.content
        expected.append(json.dumps(values, separators=(",", ":")))
        delivered.append(payload)
    assert [payload for _, payload in rows[1:]] == expected
    events = settled(memory)
    assert [event.payload for event in events[-len(texts) :]] == delivered
    kinds = [event.kind for event in events]
    assert kinds[-len(texts) - 1 :] == ["tier_changed"] + ["entry:added"] * len(texts)
    if memory.engine.dialect.name == "postgresql":
        feed_inserts = [s for s in statements if "INSERT INTO tiermem_event" in s]
        together = [s for s in feed_inserts if "INSERT INTO tiermem_entry" in s]
        assert len(feed_inserts) == 2 and len(together) == 1  # the tier change's, the entries'


def test_rolled_back_work_leaves_no_event(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append that fails before its commit stores neither the entry nor its event."""
    memory = make_memory()
    memory.add_user_message("s", "kept")
    monkeypatch.setitem(failpoints._POINTS, "append.before_commit", "raise:OperationalError")
    with pytest.raises(StorageError):
        memory.add_user_message("s", "lost")
    monkeypatch.delitem(failpoints._POINTS, "append.before_commit")
    assert [entry.content for entry in memory.get_entries("s")] == ["kept"]
    assert _kinds(memory) == [("entry:added", "s")]


def test_feed_off(make_memory: MemoryFactory) -> None:
    """``change_feed=False`` writes no events; signals are still sent."""
    memory = make_memory(config=MemoryConfig(change_feed=False))
    with SignalRecorder(sender=memory).recording() as recorder:
        memory.add_user_message("s", "hello")
    assert recorder.names() == ["entry:added"]
    assert settled(memory) == []


def test_changes_pages_and_filters(make_memory: MemoryFactory) -> None:
    """``after`` and ``limit`` page through the feed; ``session_id`` filters it."""
    memory = make_memory()
    for number in range(5):
        memory.add_user_message("a" if number % 2 else "b", f"m{number}")
    settled(memory)
    first = memory.feed.changes(limit=2)
    rest = memory.feed.changes(first[-1], limit=10)
    assert len(first) == 2 and len(rest) == 3
    assert memory.feed.changes(rest[-1].position) == []
    assert memory.feed.last_position() == rest[-1].position
    assert [event.session_id for event in memory.feed.changes(session_id="a")] == ["a", "a"]
    other = make_memory(project="elsewhere")
    assert other.feed.changes() == []  # projects have feeds of their own


def test_consumers_resume_after_their_acknowledgement(make_memory: MemoryFactory) -> None:
    """A consumer resumes after the last event it acknowledged: unacknowledged events
    come again (at least once); an old acknowledgement never moves it back."""
    memory = make_memory()
    for number in range(4):
        memory.add_user_message("s", f"m{number}")
    settled(memory)
    assert memory.feed.position("indexer") is None
    seen = [event for _, event in zip(range(2), memory.feed.follow("indexer"), strict=False)]
    memory.feed.ack("indexer", seen[0])  # handled the first, crashed on the second
    again = list(memory.feed.follow("indexer", idle_timeout=0.05))
    assert [event.payload["seq"] for event in again] == [2, 3, 4]
    memory.feed.ack("indexer", again[-1])
    memory.feed.ack("indexer", seen[0])  # late: ignored
    assert memory.feed.position("indexer") == again[-1].position
    assert list(memory.feed.follow("indexer", idle_timeout=0.05)) == []
    other = list(memory.feed.follow("auditor", idle_timeout=0.05))
    assert len(other) == 4  # consumers are independent


def test_follow_wakes_for_new_events(
    backend: str, make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower waiting at the end of the feed receives an event committed later:
    on PostgreSQL at once, woken by the notification long before its 5-second poll
    interval; on SQLite at its next poll. (Counted from when the event became
    deliverable: on PostgreSQL other clients' older transactions may delay that.)"""
    memory = make_memory()
    writer = make_memory()
    received: list[tuple[ChangeEvent, float]] = []
    poll = 5.0 if backend == "postgres" else 0.2
    listening = threading.Event()
    wait = events_storage.Listener.wait

    def waiting(listener: events_storage.Listener, timeout: float) -> None:
        listening.set()  # the follower read the (empty) feed and now waits
        wait(listener, timeout)

    monkeypatch.setattr(events_storage.Listener, "wait", waiting)

    def follow() -> None:
        for event in memory.feed.follow(poll_interval=poll, idle_timeout=30.0):
            received.append((event, time.monotonic()))
            return

    thread = threading.Thread(target=follow)
    thread.start()
    assert listening.wait(30)
    writer.add_user_message("s", "wake up")
    wait_for_feed(writer)
    deliverable = time.monotonic()
    thread.join(timeout=40)
    assert len(received) == 1 and received[0][0].kind == "entry:added"
    assert received[0][1] - deliverable < 1.5


def test_async_feed_matches_sync(make_memory: MemoryFactory) -> None:
    """``achanges``, ``afollow``, ``aack``, ``aposition`` and ``alast_position`` see
    and do what their sync twins do."""
    memory = make_memory()
    for number in range(3):
        memory.add_user_message("s", f"m{number}")
    settled(memory)

    async def scenario() -> tuple[list[ChangeEvent], list[ChangeEvent], list[str | None]]:
        listed = await memory.feed.achanges()
        followed = []
        async for event in memory.feed.afollow("async-consumer", idle_timeout=0.05):
            followed.append(event)
            await memory.feed.aack("async-consumer", event)
        positions = [
            await memory.feed.aposition("async-consumer"),
            await memory.feed.aposition("never-acknowledged"),
            await memory.feed.alast_position(),
        ]
        return listed, followed, positions

    listed, followed, positions = asyncio.run(scenario())
    assert listed == memory.feed.changes() == followed
    assert positions == [listed[-1].position, None, listed[-1].position]
    assert positions == [
        memory.feed.position("async-consumer"),
        memory.feed.position("never-acknowledged"),
        memory.feed.last_position(),
    ]


def test_retention(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """Events older than ``event_retention`` go with ``prune_expired``; ``prune``
    takes any age."""
    memory = make_memory(config=MemoryConfig(event_retention=timedelta(days=1)))
    memory.add_user_message("s", "old")
    clock.advance(days=2)
    memory.add_user_message("s", "new")
    memory.prune_expired()
    assert [event.payload["seq"] for event in settled(memory)] == [2]
    clock.advance(seconds=1)
    assert memory.feed.prune(timedelta(0)) == 1
    assert memory.feed.changes() == []


def test_retention_finds_an_old_event_behind_a_newer_one(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Retention deletes every event older than the cut-off, also one that comes in
    the feed after an event stamped later (writers whose clocks differ), and keeps
    the younger one before it."""
    memory = make_memory(config=MemoryConfig(event_retention=timedelta(days=1)))
    start = clock()
    clock.set(start + timedelta(days=5))
    memory.add_user_message("s", "stamped later")
    clock.set(start)
    memory.add_user_message("s", "stamped earlier, written after")
    clock.set(start + timedelta(days=5, hours=12))
    assert memory.feed.prune() == 1
    assert [event.payload["seq"] for event in settled(memory)] == [1]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.feed.changes("nonsense"), "position"),
        (lambda m: m.feed.changes(limit=0), "limit"),
        (lambda m: m.feed.ack("", "0:0"), "consumer"),
        (lambda m: m.feed.ack("c", 12), "position"),
        (lambda m: next(m.feed.follow(poll_interval=0)), "poll_interval"),
        (lambda m: next(m.feed.follow(batch=0)), "batch"),
        (lambda m: m.feed.prune(timedelta(days=-1)), "older_than"),
    ],
)
def test_bad_arguments(make_memory: MemoryFactory, call: Any, message: str) -> None:
    """Bad feed arguments raise ``InvalidArgument`` naming what is wrong."""
    with pytest.raises(InvalidArgument, match=message):
        call(make_memory())


@pytest.mark.parametrize(
    "changes",
    [{"change_feed": "yes"}, {"event_retention": timedelta(0)}, {"event_retention": 7}],
)
def test_bad_config(changes: dict[str, Any]) -> None:
    """The feed's settings are checked like every other."""
    with pytest.raises(InvalidArgument):
        MemoryConfig(**changes)


def test_pg_events_wait_for_older_transactions(pg_schema: str) -> None:
    """On PostgreSQL an event is delivered only once every older transaction ended:
    a transaction that began earlier may still commit an event with a smaller id,
    and a reader that went past it would skip it. (SQLite serializes writers, so
    there ids follow commits.)"""
    engine = pg_engine_for(pg_schema)
    memory = ConversationMemory(engine=engine)
    try:
        with engine.connect() as older:
            transaction = older.begin()
            older.execute(sa.text("SELECT pg_current_xact_id()"))  # takes a transaction id
            memory.add_user_message("s", "committed after the older transaction began")
            assert memory.feed.changes() == []
            assert memory.feed.last_position() == "0:0"  # following from it skips nothing
            transaction.rollback()
        assert [event.kind for event in settled(memory)] == ["entry:added"]
    finally:
        memory.close()
        engine.dispose()


def test_wait_for_feed_waits_for_older_transactions(pg_schema: str) -> None:
    """``tiermem.testing.wait_for_feed`` returns once every committed event is
    deliverable, and fails while an older transaction still holds one back (the
    test holds it, so the short timeout cannot be too short)."""
    engine = pg_engine_for(pg_schema)
    memory = ConversationMemory(engine=engine)
    try:
        wait_for_feed(memory, timeout=0.2)  # nothing written: nothing to wait for
        with engine.connect() as older:
            transaction = older.begin()
            older.execute(sa.text("SELECT pg_current_xact_id()"))  # takes a transaction id
            memory.add_user_message("s", "committed after the older transaction began")
            with pytest.raises(AssertionError, match="did not deliver"):
                wait_for_feed(memory, timeout=0.2)
            transaction.rollback()
        wait_for_feed(memory)
        assert [event.kind for event in memory.feed.changes()] == ["entry:added"]
    finally:
        memory.close()
        engine.dispose()


def test_layer_changes_have_events(make_memory: MemoryFactory) -> None:
    """Layer items stored, cleared and compacted leave events (layer changes send no
    signals), with the scope and layer in the payload."""
    memory = make_memory()
    layers = memory.layers("research")
    layers.learn("capital", "Paris")
    for number in range(4):
        layers.append("episodic", f"episode {number}")
    layers.append("working", "scratch")  # the working layer lives in the process
    layers.compact("episodic", keep_last=1, summarize_older=False)
    layers.clear("semantic")
    events = [event for event in settled(memory) if event.kind.startswith("layer:")]
    assert [event.kind for event in events] == ["layer:appended"] * 5 + [
        "layer:compacted",
        "layer:cleared",
    ]
    assert events[0].payload == {
        "scope": "research",
        "layer": "semantic",
        "item_id": events[0].payload["item_id"],
        "key": "capital",
    }
    assert isinstance(events[0].payload["item_id"], int)
    assert events[5].payload == {
        "scope": "research",
        "layer": "episodic",
        "removed": 3,
        "summary_id": None,
    }
    assert events[6].payload == {"scope": "research", "layer": "semantic", "removed": 1}
    assert all(event.session_id is None for event in events)


def test_large_batches_of_events(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change with more events than one INSERT takes (a large prune or tier change)
    writes them all, in order."""
    monkeypatch.setattr(events_storage, "_PG_ROWS", 2)
    monkeypatch.setattr(entries, "ENTRIES_PER_STATEMENT", 2)
    memory = make_memory()
    stored = memory.add_messages("s", [HumanMessage(f"m{n}") for n in range(5)])
    assert [entry.seq for entry in stored] == [1, 2, 3, 4, 5]
    assert [event.payload["seq"] for event in settled(memory)] == [1, 2, 3, 4, 5]
    assert [event.payload["entry_id"] for event in settled(memory)] == [e.id for e in stored]


def test_an_append_longer_than_a_statement_takes(make_memory: MemoryFactory) -> None:
    """An append of more entries than one statement's 65,535 parameters hold (14 per
    entry with its event on PostgreSQL) stores them all, each with its event."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    count = 65_535 // 14 + 10
    stored = memory.add_messages("s", [HumanMessage(f"m{n}") for n in range(count)])
    assert [entry.seq for entry in stored] == list(range(1, count + 1))
    with memory.engine.connect() as conn:
        written = conn.execute(
            sa.text("SELECT count(*) FROM tiermem_event WHERE kind = ''")
        ).scalar_one()
    assert written == count


def test_an_import_has_its_event(make_memory: MemoryFactory) -> None:
    """Importing a session (which sends no signal) leaves an event, so a consumer of
    the feed learns its entries were written; a refused import leaves none."""
    memory = make_memory()
    memory.add_user_message("s", "hello")
    memory.add_assistant_message("s", "hi")
    state = memory.export_session("s")
    memory.import_session(state, session_id="copy")
    memory.import_session(state, session_id="copy", overwrite=True)
    with pytest.raises(ImportValidationError):
        memory.import_session(state, session_id="copy")  # exists: refused
    imported = [event for event in settled(memory) if event.kind == "session:imported"]
    assert [(event.session_id, event.payload) for event in imported] == [
        ("copy", {"entries": 2, "summaries": 0, "overwrite": False}),
        ("copy", {"entries": 2, "summaries": 0, "overwrite": True}),
    ]


def test_an_entry_event_reads_the_same_after_its_entry_is_gone(make_memory: MemoryFactory) -> None:
    """An entry's event holds its payload's values itself: after the session is
    cleared the event is delivered as before, content included when asked."""
    memory = make_memory(config=MemoryConfig(event_content=True))
    memory.add_messages("s", [HumanMessage("first"), HumanMessage("second")])
    before = [event.payload for event in settled(memory) if event.kind == "entry:added"]
    memory.clear_session("s")
    after = [event.payload for event in settled(memory) if event.kind == "entry:added"]
    assert after == before
    assert [payload["content"] for payload in after] == ["first", "second"]
