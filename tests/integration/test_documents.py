"""The document store's public facade (``memory.documents``): typed batches of gets,
puts, searches and namespace listings in one transaction, checked before anything
runs, with times to live, access state and embeddings; sync and async alike."""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from datetime import timedelta
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from tiermem import ConversationMemory, MemoryTier
from tiermem.document_types import (
    Document,
    DocumentOp,
    DocumentState,
    GetDocument,
    ListNamespaces,
    NamespaceMatch,
    PutDocument,
    SearchDocuments,
    TimeToLive,
)
from tiermem.documents import DocumentStore, plain_texts_at
from tiermem.errors import InvalidArgument
from tiermem.testing import ManualClock

from ..conftest import MemoryFactory
from .helpers import RETRY_LOGGER, deadlock_retries

ADA = ("users", "ada")


def test_memory_documents_is_a_document_store(memory: ConversationMemory) -> None:
    """``memory.documents`` is the facade over the memory's project."""
    assert isinstance(memory.documents, DocumentStore)
    assert memory.documents.embeddings is None


def test_a_batch_puts_reads_searches_and_lists(memory: ConversationMemory) -> None:
    """Reads in a batch see the documents as they were before its writes; results
    come in the order of the operations, as typed values."""
    documents = memory.documents
    documents.setup()
    first = documents.batch(
        [
            PutDocument(ADA, "prefs", {"seat": "window", "meal": "vegan"}),
            PutDocument(("users", "bob"), "prefs", {"seat": "aisle"}),
            GetDocument(ADA, "prefs"),
        ]
    )
    assert first == [None, None, None]
    got, hits, spaces, suffixed = documents.batch(
        [
            GetDocument(ADA, "prefs"),
            SearchDocuments(("users",), query="vegan"),
            ListNamespaces(),
            ListNamespaces(match=(NamespaceMatch("suffix", ("bob",)),), max_depth=2),
        ]
    )
    assert isinstance(got, Document)
    assert (got.namespace, got.key, got.value) == (
        ADA,
        "prefs",
        {"seat": "window", "meal": "vegan"},
    )
    assert isinstance(hits, list) and [
        (h.namespace, h.key) for h in hits if isinstance(h, Document)
    ] == [(ADA, "prefs")]
    assert spaces == [ADA, ("users", "bob")]
    assert suffixed == [("users", "bob")]


def test_of_several_writes_to_one_document_the_last_wins(memory: ConversationMemory) -> None:
    """A put then a delete of one key in a batch leaves no document."""
    documents = memory.documents
    documents.batch([PutDocument(ADA, "k", {"n": 1}), PutDocument(ADA, "k", None)])
    assert documents.batch([GetDocument(ADA, "k")]) == [None]
    documents.batch([PutDocument(ADA, "k", None), PutDocument(ADA, "k", {"n": 2})])
    (found,) = documents.batch([GetDocument(ADA, "k")])
    assert isinstance(found, Document) and found.value == {"n": 2}


def test_filters_run_on_the_stored_values(memory: ConversationMemory) -> None:
    """A search's filter keeps only the documents it matches."""
    documents = memory.documents
    documents.batch([PutDocument(ADA, str(n), {"score": n}) for n in range(5)])
    (hits,) = documents.batch([SearchDocuments(ADA, filter={"score": {"$gte": 3}})])
    assert isinstance(hits, list)
    assert sorted(hit.key for hit in hits if isinstance(hit, Document)) == ["3", "4"]


@pytest.mark.parametrize(
    "make_op",
    [
        lambda: PutDocument(ADA, "k", ["not", "a", "mapping"]),  # type: ignore[arg-type]
        lambda: PutDocument(ADA, "k", {"x": math.nan}),
        lambda: PutDocument(ADA, "k", {"x": object()}),
        lambda: PutDocument(ADA, "k\x00", {"x": 1}),
        lambda: PutDocument(ADA, "k", {"x": 1}, ttl=0),
        lambda: SearchDocuments(ADA, limit=-1),
        lambda: ListNamespaces(max_depth=True),
        lambda: NamespaceMatch("middle", ("a",)),  # type: ignore[arg-type]
        lambda: TimeToLive(default_minutes=-5),
    ],
)
def test_a_bad_operation_is_refused_when_made(make_op: Any) -> None:
    """Each operation checks its arguments when it is made."""
    with pytest.raises(InvalidArgument):
        make_op()


def test_a_bad_filter_refuses_the_whole_batch(memory: ConversationMemory) -> None:
    """A batch with a bad filter writes nothing, not even its valid puts."""
    documents = memory.documents
    with pytest.raises(InvalidArgument):
        documents.batch(
            [PutDocument(ADA, "k", {"x": 1}), SearchDocuments(ADA, filter={"x": {"$near": 1}})]
        )
    assert documents.batch([GetDocument(ADA, "k")]) == [None]


def test_a_time_to_live_expires_and_is_swept(
    memory: ConversationMemory, clock: ManualClock
) -> None:
    """A document past its time to live is not read, and a sweep deletes it."""
    documents = memory.documents
    documents.batch(
        [PutDocument(ADA, "short", {"x": 1}, ttl=1), PutDocument(ADA, "kept", {"x": 2})]
    )
    state = documents.state(ADA, "short")
    assert isinstance(state, DocumentState)
    assert (state.tier, state.access_count, state.ttl_minutes) == (MemoryTier.ACTIVE, 1, 1.0)
    clock.advance(timedelta(minutes=2))
    assert documents.batch([GetDocument(ADA, "short")]) == [None]
    assert documents.state(ADA, "short") is None
    assert documents.sweep_expired() == 1
    assert documents.sweep_expired() == 0
    assert documents.state(ADA, "kept") is not None


def test_async_twins_give_the_same_results(make_memory: MemoryFactory) -> None:
    """``abatch``, ``astate`` and ``asweep_expired`` return what their sync twins do."""
    documents = make_memory().documents

    reads: list[DocumentOp] = [
        GetDocument(ADA, "k"),
        SearchDocuments(ADA, query="hello"),
        ListNamespaces(),
    ]

    async def run() -> tuple[Any, ...]:
        await documents.asetup()
        await documents.abatch([PutDocument(ADA, "k", {"text": "hello"})])
        read = await documents.abatch(reads)
        return read, await documents.astate(ADA, "k"), await documents.asweep_expired()

    read, state, swept = asyncio.run(run())
    assert read[0] is not None and read[2] == [ADA]
    assert state == documents.state(ADA, "k")  # a state is not an access
    assert read == documents.batch(reads)
    assert swept == documents.sweep_expired() == 0


def test_embeddings_score_a_search(memory: ConversationMemory) -> None:
    """With an embedding model, a query is scored by cosine similarity, and the
    model's dimensions are required."""
    with pytest.raises(InvalidArgument, match="dims"):
        memory.documents.indexed(embeddings=DeterministicFakeEmbedding(size=8))
    documents = memory.documents.indexed(embeddings=DeterministicFakeEmbedding(size=8), dims=8)
    documents.batch(
        [
            PutDocument(ADA, "a", {"text": "red apples"}, fields=("text",)),
            PutDocument(ADA, "b", {"text": "blue sky"}, fields=("text",)),
        ]
    )
    (hits,) = documents.batch([SearchDocuments(ADA, query="red apples")])
    assert isinstance(hits, list) and len(hits) == 2
    best = hits[0]
    assert isinstance(best, Document) and best.key == "a"
    assert best.score is not None and best.score == pytest.approx(1.0, abs=1e-5)


def test_plain_texts_at_reads_dotted_paths() -> None:
    """The default path reader: ``"$"`` is the whole value, ``a.b`` a field of a field."""
    value = {"a": {"b": "x", "c": [1, "y"]}, "d": True}
    assert plain_texts_at(value, "$") == ['{"a": {"b": "x", "c": [1, "y"]}, "d": true}']
    assert plain_texts_at(value, "a.b") == ["x"]
    assert plain_texts_at(value, "a") == ["x", "1", "y"]
    assert plain_texts_at(value, "a.missing") == []


def test_overlapping_batches_run_concurrently_without_deadlocks(
    make_memory: MemoryFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Two workers run batches over the same documents, listed in opposite orders,
    each reading (an access, some refreshing a time to live) and writing several
    documents: no statement ever fails with a deadlock, because every batch locks
    the rows it writes in one order. (PostgreSQL locks rows as it meets them. A
    deadlock is retried, so the log of retries is what shows it.)"""
    caplog.set_level(logging.INFO, logger=RETRY_LOGGER)
    keys = [f"k{n}" for n in range(12)]
    seed = make_memory().documents
    seed.batch([PutDocument(ADA, key, {"n": 0}, ttl=60) for key in keys])
    failures: list[BaseException] = []

    def worker(order: list[str], rounds: int) -> None:
        documents = make_memory().documents
        try:
            for n in range(rounds):
                documents.batch(
                    [
                        GetDocument(ADA, key, refresh_ttl=i % 2 == n % 2)
                        for i, key in enumerate(order)
                    ]
                    + [PutDocument(ADA, key, {"n": n}, ttl=60) for key in order[::2]]
                    + [PutDocument(ADA, f"new{n % 3}", {"n": n})]
                    + [PutDocument(ADA, order[-1 - n % 4], None)]
                )
        except BaseException as error:  # reported by the test's thread
            failures.append(error)

    orders = [keys, keys[::-1], keys[6:] + keys[:6], keys[5::-1] + keys[:5:-1]]
    threads = [threading.Thread(target=worker, args=(order, 150)) for order in orders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert deadlock_retries(caplog.records) == []
