"""``load_context`` stamped its accesses with a time read before it waited for the
write lock: another writer that created a session meanwhile, at a later time, left
that session accessed before it was created (I8 in ``tiermem doctor``)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from sqlalchemy.engine import Engine

from tests.conftest import MemoryFactory
from tiermem.testing import ManualClock, check_invariants
from tiermem.types import LoadedSession

CREATED = datetime(2026, 3, 1, 12, tzinfo=UTC)


class ClockThenWait(ManualClock):
    """A clock whose next reading, once armed, is followed by a wait until ``go``:
    the reader then goes on as a writer that read the time and then waited for the
    write lock while another writer committed."""

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self.armed = False
        self.read = threading.Event()
        self.go = threading.Event()

    def __call__(self) -> datetime:
        moment = super().__call__()
        if self.armed:
            self.armed = False
            self.read.set()
            assert self.go.wait(30), "the other writer never committed"
        return moment


def test_a_load_that_waited_never_stamps_an_access_before_creation(
    engine: Engine, make_memory: MemoryFactory
) -> None:
    """The loader reads its clock, then a session is created at a later time and
    committed before the loader's transaction runs: the loader's access of that
    session is stamped at its creation, not before, and the checker finds nothing."""
    creator = make_memory(clock=ManualClock(CREATED))
    clock = ClockThenWait(CREATED - timedelta(seconds=2))
    loader = make_memory(clock=clock)
    results: list[list[LoadedSession]] = []

    clock.armed = True
    thread = threading.Thread(target=lambda: results.append(loader.load_context()))
    thread.start()
    assert clock.read.wait(30)
    creator.add_user_message("s", "created while the load waited")
    clock.go.set()
    thread.join()

    (loaded,) = results[0]
    assert loaded.session.session_id == "s"
    assert loaded.session.last_accessed == loaded.session.created_at == CREATED
    check_invariants(engine)
