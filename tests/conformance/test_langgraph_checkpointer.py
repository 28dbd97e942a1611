"""LangGraph's checkpoint saver conformance suite (``langgraph-checkpoint-conformance``)
on ``TieredSaver``, on SQLite and PostgreSQL: one test item per conformance test, of
every capability (the base ones and ``delete_for_runs``, ``copy_thread``, ``prune``),
through the async methods and, with :class:`SyncCalls`, through the sync ones.

The suite's tests are async functions of a saver; each runs here on a saver over this
module's fresh database (one SQLite file, one PostgreSQL schema), whose threads never
meet another test's (the suite names threads with fresh uuids). tiermem's invariants
are checked over everything the module left in the database.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.conformance.capabilities import (
    BASE_CAPABILITIES,
    Capability,
    DetectedCapabilities,
)
from langgraph.checkpoint.conformance.spec import (
    test_copy_thread,
    test_delete_for_runs,
    test_delete_thread,
    test_get_tuple,
    test_list,
    test_prune,
    test_put,
    test_put_writes,
)
from sqlalchemy.engine import Engine
from tiermem_langgraph import TieredSaver

from tiermem import ConversationMemory

from ._langgraph import fixture_store_engine

SuiteTest = Callable[[BaseCheckpointSaver[Any]], Coroutine[Any, Any, None]]

#: Each capability's tests, as the suite lists them.
SUITE: dict[Capability, Sequence[SuiteTest]] = {
    Capability.PUT: test_put.ALL_PUT_TESTS,
    Capability.PUT_WRITES: test_put_writes.ALL_PUT_WRITES_TESTS,
    Capability.GET_TUPLE: test_get_tuple.ALL_GET_TUPLE_TESTS,
    Capability.LIST: test_list.ALL_LIST_TESTS,
    Capability.DELETE_THREAD: test_delete_thread.ALL_DELETE_THREAD_TESTS,
    Capability.DELETE_FOR_RUNS: test_delete_for_runs.ALL_DELETE_FOR_RUNS_TESTS,
    Capability.COPY_THREAD: test_copy_thread.ALL_COPY_THREAD_TESTS,
    Capability.PRUNE: test_prune.ALL_PRUNE_TESTS,
}

CASES = [
    pytest.param(capability, test, id=f"{capability.value}-{test.__name__}")
    for capability, tests in SUITE.items()
    for test in tests
]

__all__ = ["fixture_store_engine"]


class SyncCalls(TieredSaver):
    """``TieredSaver`` whose async methods call its sync ones: the suite, written
    against the async API, then checks the sync API."""

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self, config: RunnableConfig | None, **options: Any
    ) -> AsyncIterator[CheckpointTuple]:
        for found in self.list(config, **options):
            yield found

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.delete_for_runs(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.copy_thread(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.prune(thread_ids, strategy=strategy)


@pytest.fixture(name="saver", params=["async", "sync"])
def fixture_saver(store_engine: Engine, request: pytest.FixtureRequest) -> Iterator[TieredSaver]:
    """A saver on the module's database, called through its async or sync methods."""
    memory = ConversationMemory(engine=store_engine)
    yield (TieredSaver if request.param == "async" else SyncCalls)(memory)
    memory.close()


def test_every_capability_is_detected(saver: TieredSaver) -> None:
    """The suite detects every capability, base and extended, so none is skipped."""
    detected = DetectedCapabilities.from_instance(saver)
    assert detected.detected == frozenset(Capability)
    assert BASE_CAPABILITIES <= detected.detected


@pytest.mark.parametrize(("capability", "test"), CASES)
async def test_conformance(saver: TieredSaver, capability: Capability, test: SuiteTest) -> None:
    """One test of the suite, on ``TieredSaver``."""
    await test(saver)
