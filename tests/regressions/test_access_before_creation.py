"""An access stamped before its session's creation (two processes' clocks racing)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.conftest import MemoryFactory
from tiermem.testing import ManualClock

CREATED = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_an_earlier_clock_never_stamps_an_access_before_creation(
    make_memory: MemoryFactory,
) -> None:
    """A writer whose clock read a time before another process created the session
    (it waited for the row meanwhile) records the access at the creation time, not
    before it: the I8 invariant holds (the fixture checks every invariant)."""
    creator = make_memory(clock=ManualClock(CREATED))
    late = make_memory(clock=ManualClock(CREATED - timedelta(seconds=2)))
    creator.add_user_message("s", "first")
    late.add_user_message("s", "second")
    late.track_access("s")
    (info,) = late.list_sessions()
    assert info.last_accessed == info.created_at == CREATED
