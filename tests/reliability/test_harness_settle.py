"""The crash tests' health check: a SIGKILLed worker's backend may still hold its
transaction's locks for a moment; a lock that outlives the settle time still fails."""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from tiermem import ConversationMemory

from . import harness
from .harness import StoreSpec, store_healthy


def hold_advisory_lock(store: StoreSpec, seconds: float) -> threading.Thread:
    """Hold a transaction-level advisory lock under the test's application name for
    ``seconds``, in a thread; returns the thread once the lock is held."""
    held = threading.Event()

    def hold() -> None:
        engine = store.engine()
        try:
            with engine.begin() as conn:
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(4242)"))
                held.set()
                time.sleep(seconds)
        finally:
            engine.dispose()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert held.wait(10)
    return thread


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_lock_released_within_the_settle_time_passes(store: StoreSpec) -> None:
    """A lock released 0.5 s after the check starts (a dying backend's) is no leak."""
    with ConversationMemory(store.url) as memory:
        memory.add_user_message("s", "hello")
    holder = hold_advisory_lock(store, 0.5)
    store_healthy(store)
    holder.join()


@pytest.mark.parametrize("backend", ["postgres"])
def test_a_lock_held_past_the_settle_time_fails(
    store: StoreSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock still held when the settle time is over fails the check as a leak."""
    with ConversationMemory(store.url) as memory:
        memory.add_user_message("s", "hello")
    monkeypatch.setattr(harness, "BACKEND_SETTLE_SECONDS", 0.3)
    holder = hold_advisory_lock(store, 2.0)
    with pytest.raises(AssertionError, match="advisory lock"):
        store_healthy(store)
    holder.join()
