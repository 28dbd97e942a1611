"""load_context: a project's sessions by tier then recency, each load an access."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import LoadedSession, MemoryTier
from tiermem._storage.schema import session_table
from tiermem.errors import InvalidArgument
from tiermem.memory import ConversationMemory
from tiermem.testing import ManualClock, SignalRecorder

from ..conftest import MemoryFactory

S = session_table.c

#: Session id -> age of its last access: two ACTIVE, one RECENT, two ARCHIVED, one EXPIRED.
AGES = {
    "active-new": timedelta(minutes=5),
    "active-old": timedelta(minutes=40),
    "recent": timedelta(hours=3),
    "archived-new": timedelta(days=2),
    "archived-old": timedelta(days=20),
    "expired": timedelta(days=45),
}
EXPECTED_ORDER = ["active-new", "active-old", "recent", "archived-new", "archived-old"]


def seed(memory: ConversationMemory, clock: ManualClock) -> None:
    """One message per session of AGES, written at its age, then the clock back to now."""
    now = clock.now
    for session_id, age in sorted(AGES.items(), key=lambda item: -item[1]):
        clock.set(now - age)
        memory.add_user_message(session_id, f"about {session_id}")
    clock.set(now)


def rows(engine: Engine, project: str) -> dict[str, tuple[str, int]]:
    """session_id -> (stored tier, access_count) of a project's rows."""
    with engine.connect() as conn:
        found = conn.execute(
            sa.select(S.session_id, S.memory_tier, S.access_count).where(S.project == project)
        ).all()
    return {row.session_id: (row.memory_tier, row.access_count) for row in found}


def test_orders_by_tier_then_recency_without_expired(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """ACTIVE sessions come first, then RECENT, then ARCHIVED, newest first inside a tier;
    the EXPIRED session is not loaded."""
    memory = make_memory(project="p")
    seed(memory, clock)
    loaded = memory.load_context(limit=50)
    assert all(isinstance(item, LoadedSession) for item in loaded)
    assert [item.session.session_id for item in loaded] == EXPECTED_ORDER
    assert [item.tier for item in loaded] == [
        MemoryTier.ACTIVE,
        MemoryTier.ACTIVE,
        MemoryTier.RECENT,
        MemoryTier.ARCHIVED,
        MemoryTier.ARCHIVED,
    ]


def test_each_load_records_an_access(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """Every loaded session is stamped now, counted once more and stored ACTIVE; the
    expired session is left as it was (not revived)."""
    memory = make_memory(project="p")
    seed(memory, clock)
    memory.recalculate_tiers()
    before = rows(engine, "p")
    loaded = memory.load_context(limit=50)
    after = rows(engine, "p")
    for item in loaded:
        session_id = item.session.session_id
        assert item.session.last_accessed == clock.now
        assert item.session.access_count == before[session_id][1] + 1
        assert item.session.memory_tier == MemoryTier.ACTIVE
        assert after[session_id] == (MemoryTier.ACTIVE.value, before[session_id][1] + 1)
    assert after["expired"] == before["expired"] == (MemoryTier.EXPIRED.value, 1)
    assert memory.prune_expired(dry_run=True) == 1


def test_limit_keeps_the_most_relevant(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """A limit loads the first sessions of the order and records no access of the others;
    a limit of 0 loads and records nothing."""
    memory = make_memory(project="p")
    seed(memory, clock)
    before = rows(engine, "p")
    assert memory.load_context(0) == []
    assert rows(engine, "p") == before
    loaded = memory.load_context(2)
    assert [item.session.session_id for item in loaded] == EXPECTED_ORDER[:2]
    after = rows(engine, "p")
    changed = {name for name in before if before[name] != after[name]}
    assert changed == set(EXPECTED_ORDER[:2])


def test_tier_changed_after_commit(
    make_memory: MemoryFactory, clock: ManualClock, engine: Engine
) -> None:
    """One tier_changed names the sessions whose stored tier was not ACTIVE, sent when the
    accesses are already committed (another connection sees them)."""
    memory = make_memory(project="p")
    seed(memory, clock)
    memory.recalculate_tiers()
    seen: list[dict[str, tuple[str, int]]] = []
    memory.on("tier_changed", lambda sender, **kwargs: seen.append(rows(engine, "p")))
    recorder = SignalRecorder(memory)
    with recorder.recording():
        memory.load_context(50)
    assert recorder.events == [
        (
            "tier_changed",
            {
                "session_ids": ("recent", "archived-new", "archived-old"),
                "tier": "active",
                "project": "p",
            },
        )
    ]
    assert len(seen) == 1
    assert all(seen[0][name][0] == MemoryTier.ACTIVE.value for name in EXPECTED_ORDER)


def test_only_the_memorys_project(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """Sessions of another project are never loaded."""
    seed(make_memory(project="other"), clock)
    memory = make_memory(project="p")
    memory.add_user_message("mine", "hello")
    assert [item.session.session_id for item in memory.load_context()] == ["mine"]


@pytest.mark.parametrize("limit", [-1, True, 2.5, "3", None])
def test_bad_limit(make_memory: MemoryFactory, limit: object) -> None:
    """A limit that is not an int >= 0 is InvalidArgument, raised before any SQL."""
    memory = make_memory()
    with pytest.raises(InvalidArgument, match="limit must be an int >= 0"):
        memory.load_context(limit)  # type: ignore[arg-type]


async def test_async_twin(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """aload_context loads the same sessions in the same order."""
    memory = make_memory(project="p")
    seed(memory, clock)
    loaded = await memory.aload_context(3)
    assert [item.session.session_id for item in loaded] == EXPECTED_ORDER[:3]
