"""Hybrid search: entries embedded after the append, dense similarity fused with BM25."""

from __future__ import annotations

import asyncio
import re
import threading

import numpy as np
import pytest
import sqlalchemy as sa
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from tests.conftest import MemoryFactory
from tiermem import ConversationMemory
from tiermem._core.dense import encode_all
from tiermem._storage.vectors import store_vectors
from tiermem.errors import EmbeddingFailed, InvalidArgument
from tiermem.testing import ManualClock

#: Words of one concept share a direction: "canine" is near "dog", far from "car".
CONCEPTS = {
    "dog": 0,
    "canine": 0,
    "puppy": 0,
    "beagle": 0,
    "car": 1,
    "vehicle": 1,
    "automobile": 1,
    "sedan": 1,
    "dinner": 2,
    "meal": 2,
    "supper": 2,
}


class ConceptEmbeddings(Embeddings):
    """A tiny model: one dimension per concept, plus one that every text has."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self.calls = 0

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.size
        for word in re.findall(r"\w+", text.lower()):
            if word in CONCEPTS:
                vector[CONCEPTS[word]] += 1.0
        vector[-1] = 0.05
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


class BrokenEmbeddings(ConceptEmbeddings):
    """Raises on every call."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("model offline")

    def embed_query(self, text: str) -> list[float]:
        raise RuntimeError("model offline")


class JunkEmbeddings(ConceptEmbeddings):
    """Returns one vector too few, then NaN."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float("nan")] * self.size for _ in texts[1:]]


class NumpyEmbeddings(ConceptEmbeddings):
    """Returns numpy float32 values, as many real models do."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(np.asarray(self._vector(text), dtype=np.float32)) for text in texts]


class BlockedEmbeddings(ConceptEmbeddings):
    """Waits for a release before answering documents."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        assert self.release.wait(30)
        return super().embed_documents(texts)


def _vectors(memory: ConversationMemory) -> list[tuple[int, str]]:
    with memory.database.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT entry_id, model FROM tiermem_entry_vector"))
        return sorted((int(row[0]), str(row[1])) for row in rows)


def _drain(memory: ConversationMemory) -> None:
    embedder = memory.context.embedder
    assert embedder is not None
    embedder.queue.drain()


def _talk(memory: ConversationMemory) -> None:
    memory.add_user_message("s", "We adopted a beagle last spring.")
    memory.add_assistant_message("s", "Lovely! How is the training going?")
    memory.add_user_message("s", "I finally sold my old sedan.")
    memory.add_user_message("s", "Tonight we cook supper for six people.")
    for n in range(20):
        memory.add_user_message("s", f"Filler note number {n} about the weather.")


def test_a_match_by_meaning_alone_is_found(make_memory: MemoryFactory) -> None:
    """'canine' shares no word with 'beagle', yet the beagle entry ranks first; without
    embeddings the same query finds nothing."""
    memory = make_memory(embeddings=ConceptEmbeddings())
    _talk(memory)
    _drain(memory)
    hits = memory.search("which canine do they have?", session_id="s", limit=3)
    assert hits[0].entry.content == "We adopted a beagle last spring."
    plain = make_memory()
    assert plain.search("which canine do they have?", session_id="s") == []


def test_words_and_meaning_are_fused(make_memory: MemoryFactory) -> None:
    """An entry matching both the words and the meaning outranks one matching either."""
    memory = make_memory(embeddings=ConceptEmbeddings())
    memory.add_user_message("s", "The vehicle inspection is due.")  # meaning only
    memory.add_user_message("s", "My car inspection is due.")  # words and meaning
    memory.add_user_message("s", "The car wash loyalty card expired.")  # words only: "car"
    _drain(memory)
    hits = memory.search("car inspection", session_id="s", limit=3)
    assert hits[0].entry.content == "My car inspection is due."
    assert {hit.entry.content for hit in hits} >= {"The vehicle inspection is due."}


def _rivals(memory: ConversationMemory, clock: ManualClock) -> None:
    """Three entries holding the query's word "dog" once: an older one all about dogs,
    a shorter one (a higher BM25) about cars from an hour ago, and a long one about
    cars (the lowest BM25)."""
    memory.add_user_message("s", "dog beagle puppy canine")
    memory.add_user_message("s", "dog car car sedan sedan vehicle vehicle automobile car sedan")
    for n in range(5):
        memory.add_user_message("s", f"Filler note number {n} about the weather.")
    clock.advance(hours=22)
    memory.add_user_message("s", "dog car sedan")
    clock.advance(hours=1)
    _drain(memory)


def test_far_more_similar_beats_a_newer_word_match(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """An entry far more similar to the query wins over one created 22 hours later
    whose BM25 is a little higher: the difference of meaning is not outweighed by
    the words and recency (rank fusion scored the two alike, first and second of
    each list, and let the newer one win)."""
    memory = make_memory(embeddings=ConceptEmbeddings())
    _rivals(memory, clock)
    hits = memory.search("dog", session_id="s", limit=2)
    assert [hit.entry.content for hit in hits] == ["dog beagle puppy canine", "dog car sedan"]
    assert hits[0].score > hits[1].score
    plain = make_memory()  # words alone: the shorter, newer one first
    assert plain.search("dog", session_id="s", limit=1)[0].entry.content == "dog car sedan"


def test_dense_weight_zero_ranks_by_words(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """With dense_weight=0 similarity no longer counts: the higher BM25 wins, as
    without embeddings."""
    memory = make_memory(embeddings=ConceptEmbeddings(), dense_weight=0)
    _rivals(memory, clock)
    hits = memory.search("dog", session_id="s", limit=2)
    assert [hit.entry.content for hit in hits] == ["dog car sedan", "dog beagle puppy canine"]


def test_appends_do_not_wait_for_the_model(make_memory: MemoryFactory) -> None:
    """A blocked model holds up no append; the entry is found by words meanwhile and
    embedded once the model answers."""
    model = BlockedEmbeddings()
    memory = make_memory(embeddings=model)
    entry = memory.add_user_message("s", "The beagle chewed the sofa.")
    assert _vectors(memory) == []
    assert [hit.entry.id for hit in memory.search("sofa", session_id="s")] == [entry.id]
    model.release.set()
    _drain(memory)
    assert [row[0] for row in _vectors(memory)] == [entry.id]


def test_a_failing_model_loses_nothing(make_memory: MemoryFactory) -> None:
    """The append commits, search falls back to words, and the backfill raises a typed
    error without storing anything."""
    memory = make_memory(embeddings=BrokenEmbeddings())
    entry = memory.add_user_message("s", "The beagle chewed the sofa.")
    _drain(memory)
    assert [hit.entry.id for hit in memory.search("sofa", session_id="s")] == [entry.id]
    with pytest.raises(EmbeddingFailed, match="model offline"):
        memory.embed_missing()
    assert _vectors(memory) == []
    assert memory.get_messages("s")[-1].content == "The beagle chewed the sofa."


def test_junk_vectors_are_refused(make_memory: MemoryFactory) -> None:
    """A wrong number of vectors, or non-finite values, store nothing."""
    memory = make_memory(embeddings=JunkEmbeddings())
    memory.add_user_message("s", "one")
    memory.add_user_message("s", "two")
    with pytest.raises(EmbeddingFailed):
        memory.embed_missing()
    assert _vectors(memory) == []


def test_numpy_numbers_are_vectors(make_memory: MemoryFactory) -> None:
    """Vectors of numpy float32 values (not Python floats) are stored and searched."""
    memory = make_memory(embeddings=NumpyEmbeddings())
    _talk(memory)
    _drain(memory)
    assert len(_vectors(memory)) == 24
    assert memory.search("canine", session_id="s")[0].entry.content.startswith("We adopted")


def test_a_new_model_ignores_old_vectors_until_backfilled(make_memory: MemoryFactory) -> None:
    """Vectors carry their model's id; another model's are not used for search and the
    backfill replaces every one of them."""
    old = make_memory(embeddings=ConceptEmbeddings(size=4))
    _talk(old)
    _drain(old)
    count = len(_vectors(old))
    assert count == 24
    new_model = ConceptEmbeddings(size=6)
    new = make_memory(embeddings=new_model)
    assert new.search("canine", session_id="s") == []  # the old vectors are not its own
    assert new.embed_missing() == count
    assert {model for _, model in _vectors(new)} == {new.context.embedder.model}  # type: ignore[union-attr]
    assert new.search("canine", session_id="s")[0].entry.content.startswith("We adopted")
    assert new.embed_missing() == 0


def test_backfill_embeds_entries_stored_without_embeddings(make_memory: MemoryFactory) -> None:
    """Entries appended by a memory without embeddings are embedded by embed_missing,
    in batches, and then found by meaning."""
    plain = make_memory()
    _talk(plain)
    model = ConceptEmbeddings()
    memory = make_memory(embeddings=model)
    assert memory.embed_missing() == 24
    assert memory.search("automobile", session_id="s")[0].entry.content.endswith("sedan.")


def test_vectors_go_with_their_entries(make_memory: MemoryFactory) -> None:
    """Clearing a session deletes its vectors; a search after it finds nothing stale."""
    memory = make_memory(embeddings=ConceptEmbeddings())
    _talk(memory)
    _drain(memory)
    assert memory.search("canine", session_id="s")
    memory.clear_session("s")
    assert _vectors(memory) == []
    memory.add_user_message("s", "A new session about dinner.")
    _drain(memory)
    hits = memory.search("canine meal", session_id="s")
    assert [hit.entry.content for hit in hits] == ["A new session about dinner."]


def test_project_wide_search_reranks_word_matches(make_memory: MemoryFactory) -> None:
    """Across sessions, the word matches are re-ranked by meaning: two entries with
    the same BM25 are told apart by their similarity."""
    memory = make_memory(embeddings=ConceptEmbeddings(), dense_weight=2.0)
    memory.add_user_message("a", "note: the puppy slept")
    memory.add_user_message("b", "note: the sedan stalled")
    _drain(memory)
    hits = memory.search("note about a dog")
    assert [hit.entry.session_id for hit in hits] == ["a", "b"]


def test_two_writers_of_one_vector_do_not_conflict(make_memory: MemoryFactory) -> None:
    """A vector stored while another transaction stores one for the same entry (the
    background worker and embed_missing) is skipped, not a unique-key error: the
    first writer's vector stays."""
    memory = make_memory()
    entry = memory.add_user_message("s", "The beagle chewed the sofa.")
    engine = memory.database.engine
    with engine.connect() as conn:
        pk = conn.execute(sa.text(f"SELECT session_pk FROM tiermem_entry WHERE id = {entry.id}"))
        session_pk = int(pk.scalar_one())
    first, second = encode_all([[1.0, 0.0]], 1)[0], encode_all([[0.0, 1.0]], 1)[0]
    errors: list[BaseException] = []

    def late_writer() -> None:
        try:
            with engine.begin() as conn:
                store_vectors(conn, "m", [(entry.id, session_pk, second)])
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    with engine.begin() as conn:
        store_vectors(conn, "m", [(entry.id, session_pk, first)])
        writer = threading.Thread(target=late_writer)
        writer.start()
        writer.join(0.5)  # it waits for this transaction's lock on the entry's vector
    writer.join(30)
    assert errors == []
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT vector FROM tiermem_entry_vector")).scalars().all()
    assert len(stored) == 1


def test_sync_and_async_agree(make_memory: MemoryFactory) -> None:
    """search/asearch and embed_missing/aembed_missing run the same operations."""
    memory = make_memory(embeddings=DeterministicFakeEmbedding(size=8))
    for n in range(5):
        memory.add_user_message("s", f"entry number {n}")
    _drain(memory)
    assert asyncio.run(memory.aembed_missing()) == memory.embed_missing() == 0
    sync = memory.search("entry number 3", session_id="s")
    assert asyncio.run(memory.asearch("entry number 3", session_id="s")) == sync
    assert sync[0].entry.content == "entry number 3"


def test_bad_embeddings_arguments_are_typed_errors(make_memory: MemoryFactory) -> None:
    """Something that is not an Embeddings, or a negative weight, is refused."""
    with pytest.raises(InvalidArgument, match="Embeddings"):
        make_memory(embeddings="e5")
    with pytest.raises(InvalidArgument, match="dense_weight"):
        make_memory(embeddings=ConceptEmbeddings(), dense_weight=-1)
    with pytest.raises(InvalidArgument, match="no embeddings"):
        make_memory().embed_missing()


def test_a_hit_brings_its_window(make_memory: MemoryFactory) -> None:
    """window=n gives each hit the n entries before and after it, in order; the ends
    of a session cut it short; a negative window is refused."""
    memory = make_memory()
    for n in range(10):
        memory.add_user_message("s", f"turn {n} " + ("walrus" if n in (0, 5) else "plain"))
    hits = memory.search("walrus", session_id="s", window=2)
    windows = {hit.entry.content: [entry.seq for entry in hit.window] for hit in hits}
    first = memory.get_entries("s")[0].seq
    assert windows == {
        "turn 5 walrus": [first + 3, first + 4, first + 5, first + 6, first + 7],
        "turn 0 walrus": [first, first + 1, first + 2],
    }
    assert all(hit.window == () for hit in memory.search("walrus", session_id="s"))
    with pytest.raises(InvalidArgument, match="window"):
        memory.search("walrus", window=-1)


def test_a_forked_child_searches_with_a_fresh_cache(make_memory: MemoryFactory) -> None:
    """A fork while another thread held the vector cache's lock leaves the child a new
    cache, so its first search does not wait forever for the parent's thread."""
    memory = make_memory(embeddings=ConceptEmbeddings())
    _talk(memory)
    _drain(memory)
    assert memory.search("canine", session_id="s")
    embedder = memory.context.embedder
    assert embedder is not None
    old = embedder.cache
    with old._lock:  # the parent's thread, mid-search, at the fork
        embedder.after_fork()
        assert embedder.cache is not old
        hits = memory.search("canine", session_id="s")
    assert hits[0].entry.content == "We adopted a beagle last spring."
