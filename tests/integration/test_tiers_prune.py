"""prune_expired: boundary, order, limit, dry run, idempotence, cascade and bad input."""

from __future__ import annotations

import json
import re
from datetime import UTC, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, MemoryTier
from tiermem._storage.schema import entry_table, session_table, summary_table
from tiermem.errors import InvalidArgument
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder

from ..conftest import MemoryFactory
from .test_tiers_recalc import add_at, statements, stored_tiers

THIRTY_DAYS = timedelta(days=30)


def session_ids(engine: Engine) -> set[str]:
    """Every stored session id."""
    with engine.connect() as conn:
        return set(conn.execute(sa.select(session_table.c.session_id)).scalars())


def row_counts(engine: Engine) -> tuple[int, int, int]:
    """(sessions, entries, summaries) stored."""
    with engine.connect() as conn:
        return (
            conn.execute(sa.select(sa.func.count()).select_from(session_table)).scalar_one(),
            conn.execute(sa.select(sa.func.count()).select_from(entry_table)).scalar_one(),
            conn.execute(sa.select(sa.func.count()).select_from(summary_table)).scalar_one(),
        )


def expired_sessions(memory: ConversationMemory, clock: ManualClock, count: int) -> list[str]:
    """``count`` sessions last accessed 31..31+count days ago, oldest first."""
    now = clock.now
    ids = [f"old{index}" for index in range(count)]
    for index, session_id in enumerate(ids):
        add_at(memory, clock, session_id, now - timedelta(days=31 + count - index))
    return ids


def test_thirty_days_exactly_survives_one_second_more_goes(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """Only sessions strictly older than 30 days are deleted."""
    memory = make_memory()
    now = clock.now
    add_at(memory, clock, "exactly", now - THIRTY_DAYS)
    add_at(memory, clock, "over", now - THIRTY_DAYS - timedelta(seconds=1))
    add_at(memory, clock, "under", now - THIRTY_DAYS + timedelta(seconds=1))
    assert memory.prune_expired() == 1
    assert session_ids(engine) == {"exactly", "under"}


def test_oldest_first_within_the_limit(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """A limit deletes that many, the least recently accessed first."""
    memory = make_memory()
    ids = expired_sessions(memory, clock, 5)
    memory.add_user_message("fresh", "hi")
    recorder = SignalRecorder(memory)
    with recorder.recording():
        assert memory.prune_expired(limit=2) == 2
    assert recorder.of("pruned") == [
        {"session_ids": tuple(ids[:2]), "item_ids": (), "project": "default"}
    ]
    assert session_ids(engine) == {*ids[2:], "fresh"}
    assert memory.prune_expired(limit=10) == 3
    assert session_ids(engine) == {"fresh"}


def test_dry_run_counts_and_deletes_nothing(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """dry_run returns what would go (within the limit), deletes nothing and sends nothing."""
    memory = make_memory()
    expired_sessions(memory, clock, 4)
    before = row_counts(engine)
    recorder = SignalRecorder(memory)
    with recorder.recording():
        assert memory.prune_expired(dry_run=True) == 4
        assert memory.prune_expired(limit=3, dry_run=True) == 3
        assert memory.prune_expired(limit=0, dry_run=True) == 0
    assert row_counts(engine) == before
    assert recorder.events == []


def test_prune_is_idempotent(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """A second prune finds nothing and sends no signal."""
    memory = make_memory()
    expired_sessions(memory, clock, 3)
    assert memory.prune_expired() == 3
    recorder = SignalRecorder(memory)
    with recorder.recording():
        assert memory.prune_expired() == 0
    assert recorder.events == []


def test_entries_and_summaries_go_with_their_session(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """Pruning deletes a compressed session's entries and summaries; other sessions keep theirs."""
    memory = make_memory(
        config=MemoryConfig(
            max_tokens=400, max_entries=8, recent_window=2, min_entries_to_compress=2
        ),
        summarizer=FakeSummarizer(),
    )
    for turn in range(12):
        memory.add_user_message("old", f"question {turn} about the tides and the moon")
        memory.add_assistant_message("old", f"answer {turn}: the moon pulls the oceans")
    assert memory.get_stats("old").summaries >= 1
    clock.advance(days=31)
    memory.add_user_message("kept", "hello")
    memory.add_assistant_message("kept", "hi")
    assert memory.prune_expired() == 1
    assert row_counts(engine) == (1, 2, 0)
    assert [m.content for m in memory.get_messages("kept")] == ["hello", "hi"]


def test_pruned_session_can_start_again(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """After a prune the id is free: writing to it starts an empty new session."""
    memory = make_memory()
    expired_sessions(memory, clock, 1)
    memory.prune_expired()
    assert memory.get_messages("old0") == []
    memory.add_user_message("old0", "again")
    assert memory.get_stats("old0").total_entries == 1


#: Limits prune_expired refuses: negative, bools, floats, strings and lists.
ODD_LIMITS: list[Any] = [-1, True, False, 1.5, "5", [1]]
#: Other arguments it refuses.
BAD_KWARGS: list[dict[str, Any]] = [
    {"dry_run": "yes"},
    {"batch_size": 0},
    {"batch_size": None},
    {"progress": 1},
]


def test_odd_limits_are_refused_before_any_sql(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """Negative, bool, float, str and list limits raise InvalidArgument and execute no SQL."""
    memory = make_memory()
    expired_sessions(memory, clock, 2)
    for limit in ODD_LIMITS:
        with statements(engine) as seen, pytest.raises(InvalidArgument, match="limit"):
            memory.prune_expired(limit=limit)
        assert seen == [], limit
    assert len(session_ids(engine)) == 2


def test_other_bad_arguments_are_refused_before_any_sql(
    make_memory: MemoryFactory, engine: Engine
) -> None:
    """A non-bool dry_run, a bad batch size or progress raises InvalidArgument, no SQL."""
    memory = make_memory()
    for kwargs in BAD_KWARGS:
        with statements(engine) as seen, pytest.raises(InvalidArgument):
            memory.prune_expired(**kwargs)
        assert seen == [], kwargs


def test_limit_zero_deletes_nothing(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """limit=0 is allowed, returns 0 and runs no SQL."""
    memory = make_memory()
    expired_sessions(memory, clock, 2)
    with statements(engine) as seen:
        assert memory.prune_expired(limit=0) == 0
    assert seen == []
    assert len(session_ids(engine)) == 2


def test_huge_limit_is_no_overflow(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """A limit past 64 bits deletes everything expired, with no driver overflow."""
    memory = make_memory()
    expired_sessions(memory, clock, 2)
    assert memory.prune_expired(limit=2**63, dry_run=True) == 2
    assert memory.prune_expired(limit=2**63) == 2


def test_batches_each_signal_and_report_progress(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Each batch commits and sends one pruned signal; progress goes up to the total."""
    memory = make_memory()
    ids = expired_sessions(memory, clock, 5)
    calls: list[tuple[int, int]] = []
    recorder = SignalRecorder(memory)
    with recorder.recording():
        removed = memory.prune_expired(
            batch_size=2, progress=lambda done, total: calls.append((done, total))
        )
    assert removed == 5
    assert [kw["session_ids"] for kw in recorder.of("pruned")] == [
        tuple(ids[0:2]),
        tuple(ids[2:4]),
        tuple(ids[4:5]),
    ]
    assert calls == [(2, 5), (4, 5), (5, 5)]


def test_limit_spanning_batches(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """A limit larger than a batch still stops exactly at the limit."""
    memory = make_memory()
    expired_sessions(memory, clock, 7)
    assert memory.prune_expired(limit=5, batch_size=2) == 5
    assert memory.prune_expired(dry_run=True) == 2


def test_only_this_project_is_pruned(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """Expired sessions of another project are left alone and signals name the project."""
    alpha = make_memory(project="alpha")
    beta = make_memory(project="beta")
    expired_sessions(alpha, clock, 1)
    expired_sessions(beta, clock, 2)
    recorder = SignalRecorder(alpha)
    with recorder.recording():
        assert alpha.prune_expired() == 1
    assert recorder.of("pruned") == [{"session_ids": ("old0",), "item_ids": (), "project": "alpha"}]
    assert beta.prune_expired(dry_run=True) == 2


def test_a_session_accessed_since_its_tier_was_stored_survives(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """Expiry is judged by the current last_accessed, not the stored tier."""
    memory = make_memory()
    expired_sessions(memory, clock, 2)
    memory.recalculate_tiers()
    memory.get_messages("old1")
    assert memory.prune_expired() == 1
    assert session_ids(engine) == {"old1"}


async def test_aprune_expired_is_the_same_operation(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """aprune_expired deletes, signals and validates like prune_expired."""
    memory = make_memory()
    expired_sessions(memory, clock, 3)
    recorder = SignalRecorder(memory)
    with recorder.recording():
        assert await memory.aprune_expired(dry_run=True) == 3
        assert await memory.aprune_expired(limit=2) == 2
    assert recorder.names() == ["pruned"]
    with pytest.raises(InvalidArgument):
        await memory.aprune_expired(limit=-1)
    assert session_ids(engine) == {"old2"}


def test_a_failed_recheck_rolls_the_batch_back(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """If the session DELETE's re-check ever disagreed with the selection, the batch
    raises StorageBusy and rolls back: no entry or summary is lost."""
    from sqlalchemy import event

    from tiermem.errors import StorageBusy

    memory = make_memory()
    expired_sessions(memory, clock, 2)
    before = row_counts(engine)

    def refresh(conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("DELETE FROM tiermem_session") and not conn.info.get("hit"):
            conn.info["hit"] = True  # what a broken lock would let through
            conn.execute(
                sa.update(session_table)
                .where(session_table.c.session_id == "old1")
                .values(last_accessed=clock.now)
            )

    event.listen(engine, "before_cursor_execute", refresh)
    try:
        with pytest.raises(StorageBusy):
            memory.prune_expired()
    finally:
        event.remove(engine, "before_cursor_execute", refresh)
    assert row_counts(engine) == before


#: How SQLite stores every tiermem time: UTC, space-separated, with microseconds.
SQLITE_STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}")


def test_times_in_any_offset_are_pruned_by_their_instant(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine, backend: str
) -> None:
    """Accesses stamped by clocks in other UTC offsets, with or without microseconds, or
    imported with an offset, are stored as one UTC format (SQLite compares the stored
    text, so a second format would sort wrongly) and pruned and tiered by their instant:
    exactly 30 days old stays ARCHIVED, 30 days and 1 s or 1 us more goes (T30)."""
    memory = make_memory()
    now = clock.now
    plus5 = timezone(timedelta(hours=5))
    minus7 = timezone(timedelta(hours=-7))
    plus530 = timezone(timedelta(hours=5, minutes=30))
    moments = {
        "exact+05": (now - THIRTY_DAYS).astimezone(plus5),
        "over-07": (now - THIRTY_DAYS - timedelta(seconds=1)).astimezone(minus7),
        "over-us+0530": (now - THIRTY_DAYS - timedelta(microseconds=1)).astimezone(plus530),
        "under-us-07": (now - THIRTY_DAYS + timedelta(microseconds=1)).astimezone(minus7),
        "under+05": (now - THIRTY_DAYS + timedelta(seconds=1)).astimezone(plus5),
    }
    for session_id, moment in moments.items():
        add_at(memory, clock, session_id, moment)
    template = json.loads(memory.export_session("exact+05").to_json())
    imported = {
        "imported-exact": (now - THIRTY_DAYS).astimezone(plus5),
        "imported-over": (now - THIRTY_DAYS - timedelta(seconds=1)).astimezone(minus7),
    }
    for session_id, moment in imported.items():
        stamp = moment.isoformat()
        assert not stamp.endswith(("Z", "+00:00"))
        memory.import_session(
            json.dumps({**template, "created_at": stamp, "last_accessed": stamp}),
            session_id=session_id,
        )
    moments.update(imported)
    with engine.connect() as conn:
        stored = dict(
            conn.execute(sa.select(session_table.c.session_id, session_table.c.last_accessed)).all()
        )
    if backend == "sqlite":
        with engine.connect() as conn:
            raw: dict[str, str] = {
                str(row[0]): str(row[1])
                for row in conn.exec_driver_sql(
                    "SELECT session_id, last_accessed FROM tiermem_session"
                )
            }
        for session_id, moment in moments.items():
            text = raw[session_id]
            assert SQLITE_STAMP.fullmatch(text), (session_id, text)
            expected = moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
            assert text == expected, session_id
    for session_id, moment in moments.items():
        value = stored[session_id]
        assert (value if value.tzinfo else value.replace(tzinfo=UTC)) == moment, session_id
    memory.recalculate_tiers()
    tiers = stored_tiers(engine)
    gone = {"over-07", "over-us+0530", "imported-over"}
    assert {sid for sid, tier in tiers.items() if tier == MemoryTier.EXPIRED} == gone
    assert tiers["exact+05"] == tiers["imported-exact"] == MemoryTier.ARCHIVED
    assert memory.prune_expired(dry_run=True) == 3
    assert memory.prune_expired() == 3
    assert session_ids(engine) == set(moments) - gone
