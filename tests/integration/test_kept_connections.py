"""A Database on a SQLite file keeps a few connections checked out between transactions."""

from __future__ import annotations

import gc
import multiprocessing
import os
import sqlite3
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tiermem import ConversationMemory
from tiermem._storage.database import _IDLE_MAX, Database
from tiermem.errors import StorageBusy


def _checked_out(db: Database) -> int:
    pool = db.engine.pool
    assert isinstance(pool, sa.pool.QueuePool)
    return pool.checkedout()


def test_transactions_reuse_one_connection_and_dispose_returns_it(tmp_path: Path) -> None:
    """Sequential transactions share one kept connection per kind (write, read); dispose
    hands them back to the pool."""
    db = Database(f"sqlite:///{tmp_path / 'kept.db'}")
    for _ in range(5):
        db.run(lambda conn: conn.exec_driver_sql("SELECT 1").scalar_one())
        db.run(lambda conn: conn.exec_driver_sql("SELECT 1").scalar_one(), write=False)
    assert _checked_out(db) == 2
    db.dispose()
    assert _checked_out(db) == 0


def test_a_failed_transaction_leaves_a_usable_connection(tmp_path: Path) -> None:
    """Work that raises rolls back; the kept connection then serves the next transaction
    with nothing of the failed one in it."""
    db = Database(f"sqlite:///{tmp_path / 'kept.db'}")
    db.run(lambda conn: conn.exec_driver_sql("CREATE TABLE t (x INTEGER)"))

    def insert_then_fail(conn: sa.Connection) -> None:
        conn.exec_driver_sql("INSERT INTO t VALUES (1)")
        raise ValueError("work failed")

    with pytest.raises(ValueError, match="work failed"):
        db.run(insert_then_fail)
    assert db.run(lambda conn: conn.exec_driver_sql("SELECT count(*) FROM t").scalar_one()) == 0
    assert _checked_out(db) == 1
    db.dispose()


def test_concurrent_transactions_keep_at_most_a_few(tmp_path: Path) -> None:
    """Threads each take their own connection; afterwards at most _IDLE_MAX per kind stay."""
    memory = ConversationMemory(f"sqlite:///{tmp_path / 'kept.db'}")
    barrier = threading.Barrier(8)

    def turn(index: int) -> None:
        barrier.wait()
        memory.add_user_message(f"s{index}", "hello")
        memory.get_messages(f"s{index}")

    threads = [threading.Thread(target=turn, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(memory.list_sessions()) == 8
    assert _checked_out(memory.database) <= 2 * _IDLE_MAX
    memory.close()
    assert _checked_out(memory.database) == 0


def test_a_memory_dropped_without_close_returns_its_connections(tmp_path: Path) -> None:
    """No connection is left for the garbage collector to drop with a warning."""
    memory = ConversationMemory(f"sqlite:///{tmp_path / 'kept.db'}")
    memory.add_user_message("s", "hello")
    pool = memory.engine.pool
    assert isinstance(pool, sa.pool.QueuePool) and pool.checkedout() == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del memory
        gc.collect()
    assert pool.checkedout() == 0


def test_an_engine_passed_in_is_not_held(tmp_path: Path) -> None:
    """With a caller's engine, every transaction returns its connection to the pool."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'kept.db'}")
    with ConversationMemory(engine=engine) as memory:
        memory.add_user_message("s", "hello")
        assert isinstance(engine.pool, sa.pool.QueuePool) and engine.pool.checkedout() == 0
    engine.dispose()


def test_a_failed_commit_never_leaves_a_kept_connection_in_a_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A COMMIT that fails (busy) leaves SQLite's transaction open while SQLAlchemy counts
    it as over: that connection goes back to the pool, which rolls it back, so nothing is
    half-written and the next transaction can begin."""
    db = Database(f"sqlite:///{tmp_path / 'kept.db'}")
    db.run(lambda conn: conn.exec_driver_sql("CREATE TABLE t (x INTEGER)"))
    commit = db.engine.dialect.do_commit
    failed: list[bool] = []

    def busy_once(dbapi_connection: Any) -> None:
        if not failed:
            failed.append(True)
            raise sqlite3.OperationalError("database is locked")
        commit(dbapi_connection)

    monkeypatch.setattr(db.engine.dialect, "do_commit", busy_once)
    with pytest.raises(StorageBusy):
        db.run(lambda conn: conn.exec_driver_sql("INSERT INTO t VALUES (1)"))
    assert db.run(lambda conn: conn.exec_driver_sql("SELECT count(*) FROM t").scalar_one()) == 0
    db.run(lambda conn: conn.exec_driver_sql("INSERT INTO t VALUES (2)"))
    assert db.run(lambda conn: conn.exec_driver_sql("SELECT x FROM t").scalar_one()) == 2
    db.dispose()


def _open_on(path: Path) -> set[int]:
    """The descriptors this process has open on ``path`` (Linux)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == str(path):
                found.add(int(name))
        except OSError:  # closed while listing
            pass
    return found


def _child_appends(memory: ConversationMemory, path: Path, result: Any) -> None:
    """In a forked child: append through the inherited memory, collect garbage, and
    report the appends, whether the inherited descriptors stayed open, and warnings."""
    inherited = _open_on(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        memory.add_user_message("child", "from the child")
        gc.collect()
    kept = inherited <= _open_on(path)
    stored = memory.get_stats("child").total_entries
    result.put((stored, bool(inherited), kept, [str(w.message) for w in caught]))


def test_a_forked_child_leaves_the_parents_kept_connections_alone(tmp_path: Path) -> None:
    """A child drops the parent's kept connections unused: it closes none of their
    descriptors (SQLite: a connection must not be carried across fork, closing
    included), warns of nothing, stores through its own; the parent's still work."""
    path = tmp_path / "kept.db"
    memory = ConversationMemory(f"sqlite:///{path}")
    memory.add_user_message("parent", "hello")
    memory.get_messages("parent")
    context = multiprocessing.get_context("fork")
    result = context.Queue()
    child = context.Process(target=_child_appends, args=(memory, path, result))
    child.start()
    stored, inherited, kept, caught = result.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0 and stored == 1 and caught == []
    assert inherited and kept
    memory.add_user_message("parent", "still here")
    assert memory.get_stats("parent").total_entries == 2
    memory.close()
