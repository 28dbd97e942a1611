"""Event retention measured on the clock that stamped the events.

On PostgreSQL without an injected clock events carry the server's ``now()``, but
retention cut by the application host's clock: a host 8 days ahead deleted events
written a second earlier, before any consumer read them (``feed.prune``,
``prune_expired``, ``tiermem events prune``). PostgreSQL only: elsewhere one clock
stamps and cuts.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from typer.testing import CliRunner

import tiermem.memory
from tiermem import ConversationMemory, cli

from ..conftest import PG_URL, pg_engine_for


@pytest.fixture(name="pg")
def fixture_pg(pg_schema: str) -> Iterator[Engine]:
    """An engine on a fresh PostgreSQL schema."""
    engine = pg_engine_for(pg_schema)
    yield engine
    engine.dispose()


def skew_host_clock(monkeypatch: pytest.MonkeyPatch, offset: timedelta) -> None:
    """Make the application host's default clock run ``offset`` off real time."""
    monkeypatch.setattr(tiermem.memory, "utc_now", lambda: datetime.now(UTC) + offset)


def _kept(engine: Engine) -> list[str]:
    with engine.connect() as conn:
        return list(
            conn.execute(sa.text("SELECT payload FROM tiermem_event ORDER BY id")).scalars()
        )


def _age_events(engine: Engine, days: int) -> None:
    """Make every event ``days`` old by the server's clock."""
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE tiermem_event SET created_at = now() - make_interval(days => :d)"),
            {"d": days},
        )


def test_a_host_ahead_keeps_events_younger_than_the_retention(
    pg: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the host 8 days ahead, ``feed.prune`` and ``prune_expired`` keep the event
    just written; one that is 8 days old by the server's clock goes."""
    skew_host_clock(monkeypatch, timedelta(days=8))
    with ConversationMemory(engine=pg) as memory:
        memory.add_user_message("s", "written a moment ago")
        assert memory.feed.prune() == 0
        memory.prune_expired()
        assert len(_kept(pg)) == 1
        _age_events(pg, 8)
        assert memory.feed.prune() == 1
        assert _kept(pg) == []


def test_a_host_behind_still_prunes_what_is_old_on_the_server(
    pg: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the host 8 days behind, an event 8 days old by the server's clock is
    past the 7-day retention and ``prune_expired`` deletes it."""
    skew_host_clock(monkeypatch, -timedelta(days=8))
    with ConversationMemory(engine=pg) as memory:
        memory.add_user_message("s", "old")
        _age_events(pg, 8)
        memory.prune_expired()
    assert _kept(pg) == []


def test_events_prune_command_uses_the_server_clock(
    pg: Engine, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tiermem events prune`` on a host 8 days ahead deletes nothing just written."""
    skew_host_clock(monkeypatch, timedelta(days=8))
    url = f"{PG_URL}?options=-csearch_path%3D{pg_schema}"
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "written a moment ago")
    result = CliRunner().invoke(cli.app, ["events", "prune", "--url", url])
    assert result.exit_code == 0, result.output
    assert "deleted 0 events" in result.output
    assert len(_kept(pg)) == 1
