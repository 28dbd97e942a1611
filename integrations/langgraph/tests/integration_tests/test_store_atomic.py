"""A batch is one tiermem transaction: when it fails nothing of it is written and the
error is one of tiermem's typed errors."""

from __future__ import annotations

import pytest
from langgraph.store.base import GetOp, PutOp
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
