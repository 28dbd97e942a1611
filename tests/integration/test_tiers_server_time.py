"""Whose clock decides: PostgreSQL's now() when no clock is injected, so a skewed
application host changes nothing; the injected clock (or the host's) otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

import tiermem.memory
from tiermem import ConversationMemory, Database, TierStats
from tiermem.testing import ManualClock, check_invariants

from ..conftest import pg_engine_for, sqlite_engine


@pytest.fixture(name="pg")
def fixture_pg(pg_schema: str) -> Iterator[Engine]:
    """An engine on a fresh PostgreSQL schema (these cases are PostgreSQL-specific)."""
    engine = pg_engine_for(pg_schema)
    yield engine
    check_invariants(engine)
    engine.dispose()


def skew_host_clock(monkeypatch: pytest.MonkeyPatch, offset: timedelta) -> None:
    """Make the application host's default clock run ``offset`` off real time."""
    monkeypatch.setattr(tiermem.memory, "utc_now", lambda: datetime.now(UTC) + offset)


def server_now(engine: Engine) -> datetime:
    """PostgreSQL's clock, in its own transaction."""
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.now())).scalar_one()


def test_accesses_are_stamped_by_the_server(pg: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without an injected clock, reads, writes and track_access write PostgreSQL's now()."""
    skew_host_clock(monkeypatch, -timedelta(days=3))
    with ConversationMemory(engine=pg) as memory:
        before = server_now(pg)
        memory.add_user_message("s", "hello")
        memory.get_messages("s")
        info = memory.track_access("s")
        after = server_now(pg)
    assert before <= info.last_accessed <= after
    assert info.access_count == 3


def test_cutoffs_use_the_server_clock(pg: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the host 10 days ahead, a 25-day-old session is still not expired and stays."""
    skew_host_clock(monkeypatch, timedelta(days=10))
    with ConversationMemory(engine=pg) as memory:
        memory.add_user_message("young", "hello")
        memory.add_user_message("old", "hello")
        with pg.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE tiermem_session SET created_at = now() - interval '40 days',"
                    " last_accessed = now() - CASE session_id WHEN 'young'"
                    " THEN interval '25 days' ELSE interval '31 days' END"
                )
            )
        assert memory.get_tier_stats() == TierStats(2, 0, 0, 1, 1)
        assert [i.session_id for i in memory.least_recently_used("expired")] == ["old"]
        assert memory.recalculate_tiers() == 2
        assert memory.prune_expired(dry_run=True) == 1
        assert memory.prune_expired() == 1
        assert [i.session_id for i in memory.list_sessions()] == ["young"]


def test_an_injected_clock_wins_on_postgres(pg: Engine) -> None:
    """With clock= the memory's clock stamps accesses on PostgreSQL too."""
    clock = ManualClock()
    with ConversationMemory(engine=pg, clock=clock) as memory:
        memory.add_user_message("s", "hello")
        assert memory.track_access("s").last_accessed == clock.now
        clock.advance(days=30, seconds=1)
        assert memory.prune_expired() == 1


def test_sqlite_always_uses_the_application_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite has no server clock: server_time is off and the host's clock is used."""
    engine = sqlite_engine(tmp_path / "t.db")
    assert Database(engine=engine, server_time=True).server_time is False
    fixed = datetime(2030, 5, 5, 5, 5, tzinfo=UTC)
    monkeypatch.setattr(tiermem.memory, "utc_now", lambda: fixed)
    with ConversationMemory(engine=engine) as memory:
        memory.add_user_message("s", "hello")
        assert memory.track_access("s").last_accessed == fixed
    check_invariants(engine)
    engine.dispose()
