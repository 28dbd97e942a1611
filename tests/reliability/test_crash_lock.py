"""T10: a writer killed while holding the write lock never blocks the next one."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem.errors import StorageError

from .harness import (
    CTX,
    StoreSpec,
    join_all,
    kill,
    read_log,
    spawn,
    store_healthy,
    wait_backends_gone,
    wait_for,
    wait_for_hit,
)
from .workers import append_one, append_timed, opened

pytestmark = pytest.mark.slow


@contextmanager
def failing_first_statement(engine: Engine) -> Iterator[list[str]]:
    """Make the first statement on ``engine`` raise OperationalError (a fault on reopen)."""
    seen: list[str] = []

    def fail(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)
        if len(seen) == 1:
            raise sa.exc.OperationalError(statement, None, Exception("disk I/O error"))

    sa.event.listen(engine, "before_cursor_execute", fail)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", fail)


def test_killed_lock_holder_releases_writer(store: StoreSpec, fp_dir: Path, tmp_path: Path) -> None:
    """B waits while A holds the write lock (BEGIN IMMEDIATE / FOR UPDATE), then completes
    without StorageBusy once A is SIGKILLed; a fault on the next open is typed and the
    open after it works (compound failure)."""
    with opened(store) as memory:
        memory.add_user_message("s", "first")
    log = tmp_path / "b.jsonl"
    ready, go = CTX.Event(), CTX.Event()
    # B warms up first: its first open creates or checks the schema under the write lock.
    contender = spawn(append_timed, store, "s", str(log), 20.0, ready, go)
    processes = [contender]
    try:
        wait_for(ready.is_set, 60, "the contender to warm up")
        holder = spawn(
            append_one, store, "s", "held", failpoints="append.before_commit=pause", fp_dir=fp_dir
        )
        processes.append(holder)
        wait_for_hit(fp_dir, "append.before_commit", holder)
        go.set()
        wait_for(lambda: len(read_log(log)) >= 1, 60, "the contender to start")
        time.sleep(1.0)
        assert len(read_log(log)) == 1, "the contender was not blocked by the lock holder"
        killed_at = time.time()
        kill(holder)
        join_all([contender], 30)
    finally:
        for process in processes:
            kill(process)
    end = read_log(log)[-1]
    assert end["outcome"] == "ok" and end["seq"] == 2
    assert end["t"] - killed_at < 5.0
    wait_backends_gone(store)
    store_healthy(store)
    with opened(store) as memory:
        with failing_first_statement(memory.engine), pytest.raises(StorageError) as caught:
            memory.add_user_message("s", "during a faulty open")
        assert isinstance(caught.value.__cause__, sa.exc.OperationalError)
        assert memory.add_user_message("s", "after").seq == 3
        texts = [str(e.message.content) for e in memory.get_entries("s")]
    assert texts == ["first", "contender", "after"]
    store_healthy(store)
