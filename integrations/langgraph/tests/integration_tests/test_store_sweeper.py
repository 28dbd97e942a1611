"""The TTL sweeper outlives a failed sweep: the failure is logged, the sweep tried
again with a growing delay (at most the interval), and expired items are swept once
the database answers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import pytest
import sqlalchemy as sa
from tiermem._storage import failpoints as _failpoints
from tiermem.testing import ManualClock

from tiermem_langgraph import TieredStore
from tiermem_langgraph._sweeper import FIRST_RETRY_SECONDS, retry_delay

POINT = "ttl_sweep.before_delete"
#: A sweep every 30 ms: the test waits for sweeps, never for a time.
INTERVAL_MINUTES = 0.0005
#: How long a test waits at most for what the sweeper should do within milliseconds.
PATIENCE_SECONDS = 30


def _rows(store: TieredStore) -> int:
    with store.memory.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT count(*) FROM tiermem_document")).scalar_one())


def _fail_first_sweeps(monkeypatch: pytest.MonkeyPatch, failures: int) -> threading.Event:
    """Make the first ``failures`` sweeps fail at the sweep's failpoint (a database
    error, as a locked or lost database raises); the event is set at the first sweep
    after them."""
    real_hit = _failpoints.hit
    attempts: list[str] = []
    recovered = threading.Event()

    def hit(name: str) -> None:
        if name == POINT:
            attempts.append(name)
            if len(attempts) <= failures:
                real_hit(name)
            recovered.set()
        else:
            real_hit(name)

    monkeypatch.setitem(_failpoints._POINTS, POINT, "raise:OperationalError")
    monkeypatch.setattr(_failpoints, "hit", hit)
    return recovered


def _wait_for(condition: Callable[[], bool]) -> bool:
    done = threading.Event()
    for _ in range(PATIENCE_SECONDS * 20):
        if condition():
            return True
        done.wait(0.05)
    return condition()


@pytest.mark.parametrize("failures", [1, 3])
def test_the_sweeper_sweeps_again_after_failed_sweeps(
    store: TieredStore,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    failures: int,
) -> None:
    """After ``failures`` failed sweeps in a row the sweeper is still running and
    deletes the expired item; each failure is logged with how many in a row."""
    store.put(("a",), "old", {"v": 1}, ttl=1)
    store.put(("a",), "kept", {"v": 2})
    clock.advance(minutes=2)
    recovered = _fail_first_sweeps(monkeypatch, failures)
    caplog.set_level(logging.WARNING, logger="tiermem_langgraph._sweeper")
    future = store.start_ttl_sweeper(INTERVAL_MINUTES)
    try:
        assert recovered.wait(PATIENCE_SECONDS)
        assert _wait_for(lambda: _rows(store) == 1)
        assert not future.done()
    finally:
        assert store.stop_ttl_sweeper(PATIENCE_SECONDS)
    assert future.done()
    assert store.get(("a",), "kept") is not None
    logged = [r.getMessage() for r in caplog.records if r.name == "tiermem_langgraph._sweeper"]
    assert len(logged) == failures
    assert f"TTL sweep failed ({failures} in a row)" in logged[-1]


def test_retries_back_off_up_to_the_interval() -> None:
    """The delay after each failure in a row doubles from FIRST_RETRY_SECONDS and
    never exceeds the sweep interval, however many failures."""
    interval = 300.0
    delays = [retry_delay(failures, interval) for failures in range(1, 12)]
    assert delays[:4] == [FIRST_RETRY_SECONDS * 2**n for n in range(4)]
    assert delays == sorted(delays)
    assert max(delays) == interval
    assert retry_delay(10**6, interval) == interval
    assert retry_delay(1, 0.5) == 0.5
