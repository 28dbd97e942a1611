"""langgraph-checkpoint's store tests, with every ``InMemoryStore`` they build
replaced by a ``TieredStore`` on a fresh tiermem project of this test's database,
on SQLite and PostgreSQL.

The test file comes from the pinned langgraph-checkpoint sdist
(``tests/conformance/fetch.py``). Each store a peer test builds is empty and apart
from the others (its own project); the stores use the database's clock, as a
deployed store does.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from langgraph.store.base import IndexConfig, TTLConfig
from tiermem_langgraph import TieredStore

from ..conftest import MemoryFactory
from ._peers import adopt, load, narrow

PROJECT = "langgraph-checkpoint"

#: Peer tests that check something other than a store's behaviour.
NOT_ABOUT_THE_STORE: dict[str, str] = {
    "test_async_batch_store_resilience": (
        "tests LangGraph's AsyncBatchedBaseStore queue surviving cancelled callers"
    ),
    "test_async_batch_store_handles_cancellation": (
        "tests LangGraph's AsyncBatchedBaseStore queue surviving cancelled callers"
    ),
    "test_async_batch_store": "tests AsyncBatchedBaseStore's queue with a stubbed abatch",
    "test_async_batch_store_deduplication": (
        "counts the operations AsyncBatchedBaseStore merges into one InMemoryStore.batch call"
    ),
    "test_dedupe_ops_maps_repeated_reads_and_puts_to_one_op": (
        "tests LangGraph's _dedupe_ops helper"
    ),
    "test_get_text_at_path": "tests LangGraph's get_text_at_path helper",
    "test_get_text_at_path_with_non_dict_mapping": "tests LangGraph's get_text_at_path helper",
    "test_validate_op_namespace_rejects_invalid_labels": (
        "tests LangGraph's validate_op_namespace helper on bare operations"
    ),
    "test_validate_op_namespace_allows_empty_prefix_and_wildcards": (
        "tests LangGraph's validate_op_namespace helper on bare operations"
    ),
    "test_async_batched_vector_search_concurrent": (
        "tests AsyncBatchedBaseStore's merging of 150 concurrent writes and 9 searches"
    ),
}

#: Peer tests run with only the parameters that reach the store: (name, kept values, reason).
NARROWED: dict[str, tuple[str, list[object], str]] = {
    "test_async_rejects_invalid_namespace_labels": (
        "batched",
        [False],
        "with batched=True the peer's AsyncBatchedBaseStore wrapper refuses the label"
        " before any store is called",
    ),
}

#: Documented, deliberate differences (mirrored in the package README), as strict xfails.
DIFFERENCES: dict[str, str] = {}


class ConformanceStore(TieredStore):
    """``TieredStore`` built the way the peer tests build ``InMemoryStore``.

    Each instance is a store on a new tiermem project of the test's database;
    ``index=`` and ``ttl=`` are the same configurations ``InMemoryStore`` takes.
    """

    make_memory: ClassVar[MemoryFactory | None] = None
    _projects: ClassVar[Iterator[int]] = itertools.count()

    def __init__(
        self, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None, **_: Any
    ) -> None:
        # Read from the class: a function stored on it would bind to the instance.
        make_memory = ConformanceStore.make_memory
        assert make_memory is not None
        memory = make_memory(project=f"peer-{next(self._projects)}", clock=None)
        super().__init__(memory, index=index, ttl=ttl)


def _peer_module() -> Any:
    utils = load(PROJECT, "tests/embed_test_utils.py", "peer_langgraph_embed_test_utils", {})
    return load(
        PROJECT,
        "tests/test_store.py",
        "peer_langgraph_store",
        {"tests.embed_test_utils": utils},
    )


PEER = _peer_module()


@pytest.fixture(autouse=True)
def _substitute(make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store a peer test builds is a ``TieredStore`` on this test's backend."""
    monkeypatch.setattr(ConformanceStore, "make_memory", make_memory)
    monkeypatch.setattr(PEER, "InMemoryStore", ConformanceStore)


#: The peer's ``fake_embeddings`` fixture (character-frequency embeddings).
fake_embeddings = PEER.fake_embeddings

for _name, (_argname, _kept, _reason) in NARROWED.items():
    narrow(getattr(PEER, _name), _argname, _kept)

globals().update(adopt(PEER, NOT_ABOUT_THE_STORE, DIFFERENCES))
