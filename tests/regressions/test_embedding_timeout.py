"""An embedding model that never answers: searches fall back to words and close()
returns (issue 29, item 20). Each blocking call runs on a thread joined with a
generous bound, so a regression fails instead of hanging the suite."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings

from tiermem import MemoryConfig
from tiermem.errors import EmbeddingTimeout

from ..conftest import MemoryFactory

QUICK = MemoryConfig(embedding_timeout=0.2)
#: How long a call may take before the test calls it hung (it should take about
#: ``embedding_timeout``); a bound against hanging, not a measurement.
HUNG = 60.0


class HangingEmbeddings(Embeddings):
    """Never answers until ``release`` is set (at the end of the test)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.release.wait()
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        self.release.wait()
        return [1.0, 0.0]


class HangingAsyncEmbeddings(HangingEmbeddings):
    """Its own async methods never answer either."""

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        await asyncio.Event().wait()
        return []

    async def aembed_query(self, text: str) -> list[float]:
        await asyncio.Event().wait()
        return []


@pytest.fixture(name="hanging")
def fixture_hanging() -> Iterator[HangingEmbeddings]:
    """A hanging model, released after the test so its threads end."""
    model = HangingEmbeddings()
    yield model
    model.release.set()


def _returns(call: Callable[[], object]) -> object:
    """What ``call`` returns, run on a thread; fails if it is still running after HUNG."""
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    thread.start()
    thread.join(HUNG)
    assert not thread.is_alive(), "the call never returned"
    return outcome[0]


def test_search_and_close_return_when_the_model_never_answers(
    make_memory: MemoryFactory, hanging: HangingEmbeddings, caplog: pytest.LogCaptureFixture
) -> None:
    """Searches (conversation and layers) rank by words, with a warning in the log;
    the backfill raises EmbeddingTimeout; close() returns."""
    memory = make_memory(config=QUICK, embeddings=hanging)
    memory.add_user_message("s", "We adopted a beagle last spring.")
    memory.layers("x").append("episodic", "Adopted a beagle")
    with caplog.at_level(logging.WARNING):
        hits = _returns(lambda: memory.search("beagle", session_id="s"))
        assert [hit.entry.content for hit in hits] == ["We adopted a beagle last spring."]  # type: ignore[attr-defined]
        found = _returns(lambda: memory.layers("x").search("episodic", "beagle"))
        assert len(found) == 1  # type: ignore[arg-type]
    assert "searching by words only" in caplog.text
    with pytest.raises(EmbeddingTimeout):
        memory.embed_missing()
    _returns(memory.close)


async def test_async_search_returns_when_the_model_never_answers(
    make_memory: MemoryFactory, hanging: HangingEmbeddings
) -> None:
    """asearch falls back to words for a sync model and for one whose own async
    methods never answer."""
    for session, model in (("sync", hanging), ("async", HangingAsyncEmbeddings())):
        memory = make_memory(config=QUICK, embeddings=model)
        await memory.aadd_user_message(session, "We adopted a beagle last spring.")
        hits = await asyncio.wait_for(memory.asearch("beagle", session_id=session), HUNG)
        assert [hit.entry.content for hit in hits] == ["We adopted a beagle last spring."]


def test_the_process_exits_with_a_model_that_never_answers(tmp_path: Path) -> None:
    """A process that searched and closed with a hung model exits (its calls hold
    daemon threads only)."""
    script = textwrap.dedent(
        f"""
        import threading
        from langchain_core.embeddings import Embeddings
        from tiermem import ConversationMemory, MemoryConfig

        class Hanging(Embeddings):
            def embed_documents(self, texts):
                threading.Event().wait()
            def embed_query(self, text):
                threading.Event().wait()

        memory = ConversationMemory(
            "sqlite:///{tmp_path / "exit.db"}",
            config=MemoryConfig(embedding_timeout=0.2),
            embeddings=Hanging(),
        )
        memory.add_user_message("s", "We adopted a beagle last spring.")
        print(len(memory.search("beagle", session_id="s")))
        memory.close()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=HUNG
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


def test_a_bad_embedding_timeout_is_refused() -> None:
    """embedding_timeout must be a positive number or None."""
    assert MemoryConfig(embedding_timeout=None).embedding_timeout is None
    for bad in (0, -1.0, "5", True):
        with pytest.raises(ValueError, match="embedding_timeout"):
            MemoryConfig(embedding_timeout=bad)  # type: ignore[arg-type]
