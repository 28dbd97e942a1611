"""recalculate_tiers: set-based tier refresh in batches, its counts and signals."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryTier, calculate_tier
from tiermem._storage.schema import session_table
from tiermem.errors import InvalidArgument
from tiermem.testing import ManualClock, SignalRecorder

from ..conftest import MemoryFactory

S = session_table.c
SECOND, HOUR, DAY = timedelta(seconds=1), timedelta(hours=1), timedelta(days=1)
#: Ages one second either side of every threshold of the default policy.
BOUNDARY_AGES = [
    timedelta(0),
    HOUR - SECOND,
    HOUR,
    HOUR + SECOND,
    DAY - SECOND,
    DAY,
    DAY + SECOND,
    30 * DAY - SECOND,
    30 * DAY,
    30 * DAY + SECOND,
]


def stored_tiers(engine: Engine, project: str = "default") -> dict[str, str]:
    """session_id -> stored memory_tier of a project."""
    with engine.connect() as conn:
        rows = conn.execute(
            sa.select(S.session_id, S.memory_tier).where(S.project == project)
        ).all()
    return {row[0]: row[1] for row in rows}


def add_at(memory: ConversationMemory, clock: ManualClock, session_id: str, when: datetime) -> None:
    """Create (or write to) a session with the clock at ``when``."""
    saved = clock.now
    clock.set(when)
    memory.add_user_message(session_id, "hello")
    clock.set(saved)


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """Record every SQL statement sent through ``engine`` in the block."""
    seen: list[str] = []

    def spy(*args: Any) -> None:
        seen.append(args[2])

    event.listen(engine, "before_cursor_execute", spy)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", spy)


def test_stored_tiers_match_calculate_tier_at_every_boundary(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """After a recalculation each stored tier equals calculate_tier, ±1 s around each threshold."""
    memory = make_memory()
    now = clock.now + 60 * DAY
    expected = {}
    for index, age in enumerate(BOUNDARY_AGES):
        add_at(memory, clock, f"s{index}", now - age)
        expected[f"s{index}"] = calculate_tier(now - age, now).value
    clock.set(now)
    changed = memory.recalculate_tiers()
    assert stored_tiers(engine) == expected
    assert changed == sum(tier != "active" for tier in expected.values())
    stats = memory.get_tier_stats()
    counts = [list(expected.values()).count(t.value) for t in MemoryTier]
    assert (stats.active, stats.recent, stats.archived, stats.expired) == tuple(counts)
    assert stats.total == len(BOUNDARY_AGES)


def test_recalculation_counts_only_changes_and_is_idempotent(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Only sessions whose tier changed are counted and signalled; a second run changes nothing."""
    memory = make_memory()
    for session_id in ("a", "b", "c"):
        memory.add_user_message(session_id, "hello")
    clock.advance(hours=2)
    memory.add_user_message("c", "still here")
    recorder = SignalRecorder(memory)
    with recorder.recording():
        assert memory.recalculate_tiers() == 2
        assert memory.recalculate_tiers() == 0
    assert recorder.events == [
        ("tier_changed", {"session_ids": ("a", "b"), "tier": "recent", "project": "default"})
    ]


def test_signals_are_batched_per_tier_and_batch(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """With batch_size=2 each batch sends one tier_changed per new tier, never one per row."""
    memory = make_memory()
    now = clock.now + 60 * DAY
    ages = [2 * HOUR, 2 * DAY, 3 * HOUR, 40 * DAY, 2 * DAY]  # s0..s4, created in pk order
    for index, age in enumerate(ages):
        add_at(memory, clock, f"s{index}", now - age)
    clock.set(now)
    recorder = SignalRecorder(memory)
    with recorder.recording():
        assert memory.recalculate_tiers(batch_size=2) == 5
    assert [(kw["tier"], kw["session_ids"]) for kw in recorder.of("tier_changed")] == [
        ("recent", ("s0",)),
        ("archived", ("s1",)),
        ("recent", ("s2",)),
        ("expired", ("s3",)),
        ("archived", ("s4",)),
    ]
    assert stored_tiers(engine) == {
        "s0": "recent",
        "s1": "archived",
        "s2": "recent",
        "s3": "expired",
        "s4": "archived",
    }


def test_one_signal_per_tier_in_a_batch(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """Sessions moving to the same tier in one batch share a single signal."""
    memory = make_memory()
    for index in range(6):
        memory.add_user_message(f"s{index}", "hello")
    clock.advance(days=2)
    recorder = SignalRecorder(memory)
    with recorder.recording():
        memory.recalculate_tiers()
    assert [len(kw["session_ids"]) for kw in recorder.of("tier_changed")] == [6]


def test_count_without_listeners_is_the_same(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """With nobody listening the rows are still updated and counted."""
    memory = make_memory()
    for index in range(4):
        memory.add_user_message(f"s{index}", "hello")
    clock.advance(days=40)
    assert memory.recalculate_tiers(batch_size=3) == 4
    assert set(stored_tiers(engine).values()) == {"expired"}


def test_recalculation_is_scoped_to_a_project(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """Only the named project's sessions change; project=None means the memory's own."""
    alpha = make_memory(project="alpha")
    beta = make_memory(project="beta")
    alpha.add_user_message("a", "hello")
    beta.add_user_message("b", "hello")
    clock.advance(days=2)
    assert alpha.recalculate_tiers() == 1
    assert stored_tiers(engine, "beta") == {"b": "active"}
    recorder = SignalRecorder(alpha)
    with recorder.recording():
        assert alpha.recalculate_tiers(project="beta") == 1
    assert recorder.of("tier_changed")[0]["project"] == "beta"
    assert stored_tiers(engine, "beta") == {"b": "archived"}
    assert alpha.recalculate_tiers(project="nobody") == 0


def test_future_access_is_clamped_and_still_expires(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """A last_accessed in the future is clamped to now (ACTIVE), so it expires 30 d later."""
    memory = make_memory()
    start = clock.now
    clock.advance(days=365)
    memory.add_user_message("f", "written by a clock a year ahead")
    clock.set(start)
    memory.recalculate_tiers()
    info = memory.least_recently_used(MemoryTier.ACTIVE)[0]
    assert info.last_accessed == start and info.created_at == start
    assert stored_tiers(engine) == {"f": "active"}
    clock.advance(days=30, seconds=1)
    assert memory.prune_expired() == 1


def test_progress_reports_every_batch(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """progress(done, total) is called after each batch and ends at (total, total)."""
    memory = make_memory()
    for index in range(5):
        memory.add_user_message(f"s{index}", "hello")
    calls: list[tuple[int, int]] = []
    memory.recalculate_tiers(batch_size=2, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(2, 5), (4, 5), (5, 5)]


#: Arguments recalculate_tiers refuses.
BAD_KWARGS: list[dict[str, Any]] = [
    {"batch_size": 0},
    {"batch_size": -1},
    {"batch_size": True},
    {"batch_size": 2.5},
    {"project": ""},
    {"project": 3},
    {"progress": "bar"},
]


def test_bad_arguments_are_refused_before_sql(make_memory: MemoryFactory, engine: Engine) -> None:
    """Bad batch sizes, projects or progress callbacks raise InvalidArgument and run no SQL."""
    memory = make_memory()
    for kwargs in BAD_KWARGS:
        with statements(engine) as seen, pytest.raises(InvalidArgument):
            memory.recalculate_tiers(**kwargs)
        assert seen == [], kwargs


def test_empty_project_changes_nothing(make_memory: MemoryFactory) -> None:
    """A project without sessions recalculates to 0."""
    assert make_memory().recalculate_tiers() == 0


async def test_arecalculate_tiers_is_the_same_operation(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """arecalculate_tiers counts, signals and refuses bad input like recalculate_tiers."""
    memory = make_memory()
    await memory.aadd_user_message("s", "hello")
    clock.advance(days=31)
    recorder = SignalRecorder(memory)
    with recorder.recording():
        assert await memory.arecalculate_tiers() == 1
    assert recorder.of("tier_changed")[0]["tier"] == "expired"
    with pytest.raises(InvalidArgument):
        await memory.arecalculate_tiers(batch_size=0)
