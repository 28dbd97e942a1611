"""Whose clock a time to live runs by: on PostgreSQL without an injected clock the
server's ``now()`` (so hosts whose clocks differ agree on what expired: a host 15
minutes ahead sees, and does not sweep, an item another host put with ``ttl=10`` a
moment earlier); on SQLite, or with an injected clock, the memory's clock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
import tiermem.memory

from tiermem_langgraph import TieredStore


def _skew_host_clock(monkeypatch: pytest.MonkeyPatch, offset: timedelta) -> datetime:
    """Stop the host's default clock (a memory without clock=) ``offset`` off real
    time; returns the time it shows."""
    shown = datetime.now(UTC) + offset
    monkeypatch.setattr(tiermem.memory, "utc_now", lambda: shown)
    return shown


@pytest.fixture(name="open_hosts")
def fixture_open_hosts(url: str) -> Iterator[Callable[[], tuple[TieredStore, TieredStore]]]:
    """Open two stores on one database, as two hosts without injected clocks run them
    (a memory takes the host's clock when it is made); closed after the test."""
    made: list[TieredStore] = []

    def open_hosts() -> tuple[TieredStore, TieredStore]:
        made.extend([TieredStore.from_url(url), TieredStore.from_url(url)])
        return made[-2], made[-1]

    yield open_hosts
    for store in made:
        store.close()


def _database_now(store: TieredStore) -> datetime:
    with store.memory.engine.connect() as conn:
        return conn.execute(sa.select(sa.func.now())).scalar_one()


def _backdate_expiry(store: TieredStore, key: str) -> None:
    """Make ``key``'s time to live end a second ago by the database's clock."""
    with store.memory.engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE tiermem_document SET expires_at = now() - interval '1 second' "
                "WHERE key = :key"
            ),
            {"key": key},
        )


@pytest.mark.parametrize("ahead", [timedelta(minutes=15), timedelta(days=-1)])
def test_ttls_run_by_the_server_clock_on_postgres(
    open_hosts: Callable[[], tuple[TieredStore, TieredStore]],
    backend: str,
    monkeypatch: pytest.MonkeyPatch,
    ahead: timedelta,
) -> None:
    """With the hosts' clocks ``ahead`` of real time: on PostgreSQL a put with ttl=10
    expires 10 minutes after the server's now, a read restarts it from the server's
    now, the item stays visible to the other host and is not swept; once the
    server's clock passes its expiry it is hidden and swept, whatever the hosts'
    clocks say. On SQLite (no server clock) the TTL runs from the host's clock."""
    shown = _skew_host_clock(monkeypatch, ahead)
    writer, reader = open_hosts()
    if backend == "sqlite":
        writer.put(("users", "ada"), "seat", {"text": "aisle"}, ttl=10)
        state = reader.item_state(("users", "ada"), "seat")
        assert state is not None and state.expires_at is not None
        # SQLite keeps whole seconds.
        assert abs(state.expires_at - (shown + timedelta(minutes=10))) < timedelta(seconds=1)
        return
    before = _database_now(writer)
    writer.put(("users", "ada"), "seat", {"text": "aisle"}, ttl=10)
    reader.get(("users", "ada"), "seat")  # restarts the TTL
    after = _database_now(writer)
    state = reader.item_state(("users", "ada"), "seat")
    assert state is not None and state.expires_at is not None
    assert before + timedelta(minutes=10) <= state.expires_at <= after + timedelta(minutes=10)
    assert reader.sweep_ttl() == 0
    assert [item.key for item in reader.search(("users",))] == ["seat"]
    assert reader.list_namespaces() == [("users", "ada")]

    _backdate_expiry(writer, "seat")
    assert reader.get(("users", "ada"), "seat") is None
    assert reader.search(("users",)) == []
    assert reader.list_namespaces() == []
    assert reader.item_state(("users", "ada"), "seat") is None
    assert reader.sweep_ttl() == 1
    assert writer.memory.prune_expired() == 0  # already swept
