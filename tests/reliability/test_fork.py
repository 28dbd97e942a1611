"""T19: children forked from a process with a warm pool never reuse its connections."""

from __future__ import annotations

import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tiermem import ConversationMemory

from .harness import StoreSpec, join_all, kill, read_log, store_healthy, write_log
from .workers import open_memory

CHILDREN = 4
APPENDS = 20


def _track_pids(memory: ConversationMemory, log: Path) -> None:
    """Record which process opened each pooled connection; log any checkout by another."""

    def on_connect(_dbapi: Any, record: Any) -> None:
        record.info["pid"] = os.getpid()

    def on_checkout(_dbapi: Any, record: Any, _proxy: Any) -> None:
        if record.info.get("pid") != os.getpid():
            write_log(log, {"shared_by": os.getpid(), "opened_by": record.info.get("pid")})

    sa.event.listen(memory.engine, "connect", on_connect)
    sa.event.listen(memory.engine, "checkout", on_checkout)


def _child(memory: ConversationMemory, worker: int, log: str) -> None:
    for index in range(APPENDS):
        memory.add_user_message("s", f"child{worker}.{index}")
    write_log(log, {"worker": worker, "done": True})


def test_forked_children_use_their_own_connections(store: StoreSpec, tmp_path: Path) -> None:
    """After the parent warms a pool of 2+ connections, 4 forked children append through the
    inherited memory while the parent keeps appending: every append lands, no connection is
    shared across processes, no child hangs, and the store stays healthy."""
    memory = open_memory(store)
    log = tmp_path / "log.jsonl"
    _track_pids(memory, log)
    memory.add_user_message("s", "parent.start")
    # Warm the pool with two simultaneously checked-out connections.
    first, second = memory.engine.connect(), memory.engine.connect()
    first.close()
    second.close()
    pool = memory.engine.pool
    assert isinstance(pool, sa.pool.QueuePool) and pool.checkedin() >= 2
    fork = multiprocessing.get_context("fork")
    children = [
        fork.Process(target=_child, args=(memory, k, str(log)), daemon=True)
        for k in range(CHILDREN)
    ]
    parent_errors: list[BaseException] = []

    def parent_appends() -> None:
        try:
            for index in range(APPENDS):
                memory.add_user_message("s", f"parent.{index}")
        except BaseException as exc:  # reported below
            parent_errors.append(exc)

    try:
        for child in children:
            child.start()
        appender = threading.Thread(target=parent_appends)
        appender.start()
        join_all(list(children), 10 * CHILDREN)
        appender.join(30)
        assert not appender.is_alive() and parent_errors == []
    finally:
        for child in children:
            kill(child)
        memory.close()
    records = read_log(log)
    assert [r for r in records if "shared_by" in r] == []
    assert sorted(r["worker"] for r in records if r.get("done")) == list(range(CHILDREN))
    store_healthy(store)
    with open_memory(store) as check:
        texts = {str(e.message.content) for e in check.get_entries("s")}
    expected = {"parent.start"} | {f"parent.{i}" for i in range(APPENDS)}
    expected |= {f"child{k}.{i}" for k in range(CHILDREN) for i in range(APPENDS)}
    assert texts == expected
