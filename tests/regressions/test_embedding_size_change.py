"""A model that changes its vectors' size under one model id: the odd vectors are
refused when written, and a search never raises (issue 29, item 19)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from langchain_core.embeddings import Embeddings

from tiermem import ConversationMemory
from tiermem.errors import EmbeddingFailed

from ..conftest import MemoryFactory

WORDS = ("beagle", "sedan", "supper", "weather", "canine", "dog", "car", "cook")


class ShiftingEmbeddings(Embeddings):
    """One dimension per known word, padded to ``width`` numbers: change ``width``
    and the same model (one model id) answers with vectors of another size."""

    def __init__(self, width: int = 8) -> None:
        self.width = width

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.width
        for index, word in enumerate(WORDS):
            if word in text.lower():
                vector[index % self.width] += 1.0
        vector[-1] = 0.05
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def _sizes(memory: ConversationMemory) -> list[int]:
    with memory.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT length(vector) FROM tiermem_entry_vector"))
        return sorted({int(row[0]) for row in rows})


def _talk(memory: ConversationMemory, tag: str) -> None:
    memory.add_user_message("s", f"We adopted a beagle last spring ({tag}).")
    memory.add_user_message("s", f"I finally sold my old sedan ({tag}).")
    memory.layers("x").append("episodic", f"Cooked supper for six ({tag})")


def _searches_work(memory: ConversationMemory) -> None:
    """Session, project-wide and layer searches answer, by words at least."""
    assert memory.search("beagle", session_id="s")[0].entry.content.startswith("We adopted")
    assert memory.search("sedan")[0].entry.content.startswith("I finally sold")
    assert memory.layers("x").search("episodic", "supper")


def test_vectors_of_another_size_are_refused_when_written(make_memory: MemoryFactory) -> None:
    """After the model's first vectors, vectors of another size under the same model
    id are refused with EmbeddingFailed and never stored; searches still work."""
    model = ShiftingEmbeddings(width=8)
    memory = make_memory(embeddings=model)
    _talk(memory, "first")
    assert memory.embed_missing() >= 0
    assert _sizes(memory) == [32]
    model.width = 12
    _talk(memory, "second")
    embedder = memory.context.embedder
    assert embedder is not None
    embedder.queue.drain()  # the background worker logs the refusal
    with pytest.raises(EmbeddingFailed, match="12 numbers, not 8"):
        memory.embed_missing()
    assert _sizes(memory) == [32]
    _searches_work(memory)


def test_stored_vectors_of_mixed_sizes_never_break_a_search(make_memory: MemoryFactory) -> None:
    """Vectors of two sizes under one model id (written by two processes whose model
    answered differently) leave every search working, by words and by meaning."""
    first = make_memory(embeddings=ShiftingEmbeddings(width=8))
    _talk(first, "first")
    first.embed_missing()
    second = make_memory(embeddings=ShiftingEmbeddings(width=12))
    second.add_user_message("s", "We adopted a beagle last spring (second).")
    second.layers("x").append("episodic", "Cooked supper for six (second)")
    second.embed_missing()
    assert _sizes(first) == [32, 48]
    for memory in (first, second):
        _searches_work(memory)
        hits = memory.search("which dog? a beagle", session_id="s")
        assert {hit.entry.content for hit in hits} >= {
            "We adopted a beagle last spring (first).",
            "We adopted a beagle last spring (second).",
        }
