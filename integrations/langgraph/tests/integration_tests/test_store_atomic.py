"""A batch is one tiermem transaction: when it fails nothing of it is written and the
error is one of tiermem's typed errors."""

from __future__ import annotations

import pytest
from langgraph.store.base import GetOp, PutOp
from sqlalchemy import event as sa_event
from tiermem._storage import failpoints as _failpoints
from tiermem.errors import InvalidArgument, StorageError

from tiermem_langgraph import TieredStore


def test_failed_commit_writes_nothing(store: TieredStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure just before commit raises a StorageError and rolls back every put,
    update, delete and access of the batch."""
    store.put(("a",), "kept", {"v": 1})
    store.put(("a",), "doomed", {"v": 2})
    before = store.item_state(("a",), "kept")
    monkeypatch.setitem(_failpoints._POINTS, "transaction.before_commit", "raise:OperationalError")
    with pytest.raises(StorageError):
        store.batch(
            [
                PutOp(("a",), "new", {"v": 3}),
                PutOp(("a",), "kept", {"v": 10}),
                PutOp(("a",), "doomed", None),
                GetOp(("a",), "kept"),
            ]
        )
    monkeypatch.delitem(_failpoints._POINTS, "transaction.before_commit")
    assert store.get(("a",), "new") is None
    kept = store.get(("a",), "kept", refresh_ttl=False)
    assert kept is not None and kept.value == {"v": 1}
    assert store.get(("a",), "doomed") is not None
    after = store.item_state(("a",), "kept")
    assert before is not None and after is not None
    assert after.access_count == before.access_count + 1  # only the get after the failure


def test_invalid_op_anywhere_runs_nothing(store: TieredStore) -> None:
    """An invalid op late in a batch is refused before the batch's first op runs."""
    with pytest.raises(InvalidArgument):
        store.batch([PutOp(("a",), "k", {"v": 1}), PutOp(("a",), "j", {"v": 2}, ttl=-5)])
    assert store.get(("a",), "k") is None


def test_only_reads_commit_without_waiting(store: TieredStore) -> None:
    """On PostgreSQL a batch of reads, which writes only access records, commits
    without waiting for the disk; a batch with a put or a delete waits (its document
    and event must be durable when the call returns). SQLite never asks."""
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement)

    store.put(("a",), "k", {"v": 1})
    engine = store.memory.engine
    sa_event.listen(engine, "before_cursor_execute", seen)
    try:
        lazy = "SET LOCAL synchronous_commit = off"
        store.get(("a",), "k")
        store.search(("a",), filter={"v": 1})
        on_pg = engine.dialect.name == "postgresql"
        assert statements.count(lazy) == (2 if on_pg else 0)
        statements.clear()
        store.batch([GetOp(("a",), "k"), PutOp(("a",), "k2", {"v": 2})])
        store.delete(("a",), "k2")
        assert lazy not in statements
    finally:
        sa_event.remove(engine, "before_cursor_execute", seen)
