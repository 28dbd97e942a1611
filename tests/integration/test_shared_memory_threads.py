"""One ``ConversationMemory`` shared by many threads, as the README advises (one memory
per process): every append is stored once, in order, and the storage stays consistent."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tiermem import MemoryConfig
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory

THREADS = 6
TURNS = 15


def test_threads_share_one_memory(make_memory: MemoryFactory) -> None:
    """Six threads append to their own sessions and to one shared session, reading and
    compressing as they go; nothing is lost or doubled."""
    config = MemoryConfig(max_tokens=300, recent_window=4, min_entries_to_compress=2)
    memory = make_memory(config=config, summarizer=FakeSummarizer())

    def converse(worker: int) -> None:
        for turn in range(TURNS):
            memory.add_user_message(f"own-{worker}", f"worker {worker} asks {turn}")
            memory.add_assistant_message(f"own-{worker}", f"worker {worker} answers {turn}")
            memory.add_user_message("shared", f"w{worker}.{turn}")
            assert memory.counter.count_messages(memory.get_messages(f"own-{worker}")) <= 300

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(converse, range(THREADS)))
    for worker in range(THREADS):
        entries = memory.get_entries(f"own-{worker}")
        assert [e.seq for e in entries] == list(range(1, 2 * TURNS + 1))
        assert entries[-1].content == f"worker {worker} answers {TURNS - 1}"
    shared = [e.content for e in memory.get_entries("shared")]
    assert sorted(shared) == sorted(f"w{w}.{t}" for w in range(THREADS) for t in range(TURNS))
    for worker in range(THREADS):  # each thread's order survives
        mine = [c for c in shared if c.startswith(f"w{worker}.")]
        assert mine == [f"w{worker}.{t}" for t in range(TURNS)]
