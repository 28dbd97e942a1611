"""``TieredSaver`` keeps the pending writes of messages and a graph's input as
references to the entries of their messages, once the next checkpoint holds them:
no write or value row repeats a message's text, and every write and input reads
back as LangGraph handed it over (a message written before the reducer gave it an
id, without one); through the sync and the async API, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from test_saver_history import THREAD, tool_graph
from tiermem import ConversationMemory
from tiermem._storage.checkpoint_schema import blob_table, write_table
from tiermem.testing import check_invariants

from tiermem_langgraph import TieredSaver


@pytest.fixture(name="memory")
def fixture_memory(url: str) -> Iterator[ConversationMemory]:
    """A memory on the test's database; its invariants hold after the test."""
    memory = ConversationMemory(url)
    yield memory
    check_invariants(memory.engine)
    memory.close()


class RecordingSaver(TieredSaver):
    """A ``TieredSaver`` that keeps what LangGraph handed it, as a serializing saver
    reads it back: each write and each checkpoint's ``__start__`` value."""

    def __init__(self, memory: ConversationMemory) -> None:
        super().__init__(memory)
        self.written: dict[tuple[str, str, str], Any] = {}
        self.inputs: dict[str, Any] = {}

    def _copy(self, value: Any) -> Any:
        return self.serde.loads_typed(self.serde.dumps_typed(value))

    def _note_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str
    ) -> None:
        checkpoint_id = config["configurable"]["checkpoint_id"]
        for channel, value in writes:
            self.written[(checkpoint_id, task_id, channel)] = self._copy(value)

    def _note_input(self, checkpoint: Checkpoint) -> None:
        if "__start__" in checkpoint["channel_values"]:
            self.inputs[checkpoint["id"]] = self._copy(checkpoint["channel_values"]["__start__"])

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._note_input(checkpoint)
        return super().put(config, checkpoint, metadata, new_versions)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._note_input(checkpoint)
        return await super().aput(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._note_writes(config, writes, task_id)
        super().put_writes(config, writes, task_id, task_path)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._note_writes(config, writes, task_id)
        await super().aput_writes(config, writes, task_id, task_path)


def _question(turn: int) -> dict[str, Any]:
    """An input whose message has no id (the reducer gives it one)."""
    return {"messages": [HumanMessage(f"question {turn}")]}


@pytest.mark.parametrize("api", ["sync", "async"])
def test_writes_and_inputs_are_references(memory: ConversationMemory, api: str) -> None:
    """Four tool-calling turns: every message write and input is references, and
    a saver of a fresh process reads each back as it was handed over."""
    saver = RecordingSaver(memory)
    graph = tool_graph(saver)
    for turn in range(4):
        if api == "sync":
            graph.invoke(_question(turn), THREAD)
        else:
            asyncio.run(graph.ainvoke(_question(turn), THREAD))
    with memory.engine.connect() as conn:
        writes = conn.execute(
            sa.select(write_table.c.type, write_table.c.value).where(
                write_table.c.channel == "messages"
            )
        ).all()
        inputs = conn.execute(
            sa.select(blob_table.c.type).where(blob_table.c.channel == "__start__")
        ).all()
        rows = [bytes(v or b"") for (v,) in conn.execute(sa.select(write_table.c.value))]
        rows += [bytes(v or b"") for (v,) in conn.execute(sa.select(blob_table.c.value))]
    assert len(writes) == 4 * 4 and {kind for kind, _ in writes} == {"tiermem:write-refs"}
    assert len(inputs) == 4 and {kind for (kind,) in inputs} == {"tiermem:value-refs"}
    texts = [str(e.to_message().content) for e in memory.get_entries("t-1")]
    assert len(texts) == 4 * 4
    assert not [t for t in texts if t and any(t.encode() in row for row in rows)]
    fresh = TieredSaver(memory)  # reads the rows, with no cache of this process
    read = {}
    inputs_read = {}
    for found in fresh.list(THREAD):
        checkpoint_id = found.config["configurable"]["checkpoint_id"]
        for task_id, channel, value in found.pending_writes or []:
            read[(checkpoint_id, task_id, channel)] = value
        if "__start__" in found.checkpoint["channel_values"]:
            inputs_read[checkpoint_id] = found.checkpoint["channel_values"]["__start__"]
    assert read == saver.written
    assert inputs_read == saver.inputs
