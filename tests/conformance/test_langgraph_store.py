"""langgraph-checkpoint's store tests, with every ``InMemoryStore`` they build
replaced by a ``TieredStore`` on a new tiermem project of this module's fresh
database, on SQLite and PostgreSQL.

The test file comes from the pinned langgraph-checkpoint sdist
(``tests/conformance/fetch.py``). Each store a peer test builds is empty and apart
from the others (its own project); the stores use the database's clock, as a
deployed store does.
"""

from __future__ import annotations

from typing import Any

import pytest

from ._langgraph import ConformanceStore, fixture_store_engine, fixture_substitute_stores
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
def _substitute(substitute_stores: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every store a peer test builds is a ``TieredStore`` on this module's database."""
    monkeypatch.setattr(PEER, "InMemoryStore", ConformanceStore)


#: The peer's ``fake_embeddings`` fixture (character-frequency embeddings).
fake_embeddings = PEER.fake_embeddings

for _name, (_argname, _kept, _reason) in NARROWED.items():
    narrow(getattr(PEER, _name), _argname, _kept)

__all__ = ["fixture_store_engine", "fixture_substitute_stores"]

globals().update(adopt(PEER, NOT_ABOUT_THE_STORE, DIFFERENCES))
