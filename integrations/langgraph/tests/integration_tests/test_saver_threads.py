"""A thread on ``TieredSaver`` is a tiermem session: its messages are entries
(searched, exported, announced), pruning checkpoints keeps every message, deleting
the thread or the session deletes the checkpoints, a copy is a thread of its own,
``DeltaChannel`` threads are pruned safely, a renamed session is the thread under
its new id, and an encrypting ``serde`` keeps every message out of clear text; on
SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from test_saver_history import THREAD, _ask, _comparable, delta_graph, tool_graph
from tiermem import ConversationMemory
from tiermem._storage.checkpoint_schema import blob_table, checkpoint_table, write_table
from tiermem.errors import InvalidArgument, InvalidSessionId
from tiermem.testing import check_invariants

from tiermem_langgraph import TieredSaver


@pytest.fixture(name="memory")
def fixture_memory(url: str) -> Iterator[ConversationMemory]:
    """A memory on the test's database; its invariants hold after the test."""
    memory = ConversationMemory(url)
    yield memory
    check_invariants(memory.engine)
    memory.close()


def _rows(memory: ConversationMemory) -> dict[str, int]:
    """Rows of each checkpoint table."""
    with memory.engine.connect() as conn:
        return {
            table.name: int(
                conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
            )
            for table in (checkpoint_table, blob_table, write_table)
        }


def _texts(memory: ConversationMemory, thread_id: str) -> list[str]:
    return [str(entry.to_message().content) for entry in memory.get_entries(thread_id)]


def _run(saver: TieredSaver, turns: int, thread: RunnableConfig = THREAD) -> None:
    graph = tool_graph(saver)
    for turn in range(turns):
        graph.invoke(_ask(turn), thread)


def test_messages_are_entries_of_the_threads_session(memory: ConversationMemory) -> None:
    """The thread is a session: listed, its messages stored in order, announced as
    ``entry:added`` once each, and exported."""
    added: list[str] = []
    memory.on(
        "entry:added", lambda sender, **kw: added.append(str(kw["entry"].to_message().content))
    )
    _run(TieredSaver(memory), 3)
    assert [s.session_id for s in memory.list_sessions()] == ["t-1"]
    texts = _texts(memory, "t-1")
    assert texts[:4] == ["question 0", "", "found question 0", "answer 1: found question 0"]
    assert len(texts) == 12 and added == texts
    exported = [e.message["data"]["content"] for e in memory.export_session("t-1").entries]
    assert exported == texts


def test_keep_latest_keeps_every_message(memory: ConversationMemory) -> None:
    """``prune(keep_latest)`` removes all checkpoints but the newest (and the values
    only they held); the state reads back the same, every message stays searchable
    and exported, and the thread goes on."""
    saver = TieredSaver(memory)
    _run(saver, 10)
    graph = tool_graph(saver)
    before = graph.get_state(THREAD).values
    checkpoints = _rows(memory)["tiermem_checkpoint"]
    texts = _texts(memory, "t-1")
    saver.prune(["t-1"], strategy="keep_latest")
    assert _rows(memory)["tiermem_checkpoint"] == 1 and checkpoints == 50
    assert graph.get_state(THREAD).values == before
    assert _texts(memory, "t-1") == texts
    assert [h.entry.content for h in memory.search("question 3", session_id="t-1", limit=1)] == [
        "question 3"
    ]
    assert len(memory.export_session("t-1").entries) == len(texts)
    graph.invoke(_ask(10), THREAD)
    assert graph.get_state(THREAD).values["messages"][:-4] == before["messages"]


def test_prune_delete_keeps_the_conversation(memory: ConversationMemory) -> None:
    """``prune(strategy="delete")`` removes every checkpoint, write and value of the
    thread, not its messages."""
    saver = TieredSaver(memory)
    _run(saver, 2)
    texts = _texts(memory, "t-1")
    saver.prune(["t-1"], strategy="delete")
    assert _rows(memory) == dict.fromkeys(_rows(memory), 0)
    assert saver.get_tuple(THREAD) is None
    assert _texts(memory, "t-1") == texts
    with pytest.raises(InvalidArgument):
        saver.prune(["t-1"], strategy="everything")


def test_delta_channel_thread_is_pruned_safely(memory: ConversationMemory) -> None:
    """Keeping the newest checkpoint of a ``DeltaChannel`` thread keeps the ancestors
    its value is rebuilt from: the state reads back the same, and the thread goes on
    as one never pruned."""
    saver, reference = TieredSaver(memory), InMemorySaver()
    for checkpointer in (saver, reference):
        graph = delta_graph(checkpointer)
        for _ in range(4):
            graph.invoke({"items": [], "count": 0}, THREAD)
    before = delta_graph(saver).get_state(THREAD).values
    assert len(before["items"]) == 8
    saver.prune(["t-1"])
    assert delta_graph(saver).get_state(THREAD).values == before
    kept = _rows(memory)["tiermem_checkpoint"]
    assert 1 < kept < len(list(reference.list(THREAD)))
    for checkpointer in (saver, reference):
        delta_graph(checkpointer).invoke({"items": [], "count": 0}, THREAD)
    assert delta_graph(saver).get_state(THREAD).values == (
        delta_graph(reference).get_state(THREAD).values
    )


def test_deleting_the_thread_or_its_session_deletes_its_checkpoints(
    memory: ConversationMemory,
) -> None:
    """``delete_thread`` deletes the session and everything of the thread; clearing
    the session (or any deletion of it) deletes its checkpoints with it."""
    saver = TieredSaver(memory)
    other: RunnableConfig = {"configurable": {"thread_id": "t-2"}}
    _run(saver, 2)
    _run(saver, 1, other)
    saver.delete_thread("t-1")
    assert [s.session_id for s in memory.list_sessions()] == ["t-2"]
    assert saver.get_tuple(THREAD) is None and saver.get_tuple(other) is not None
    memory.clear_session("t-2")
    assert _rows(memory) == dict.fromkeys(_rows(memory), 0)


def test_copy_is_a_thread_of_its_own(memory: ConversationMemory) -> None:
    """A copied thread has the source's history, and its own session holding the
    conversation: deleting the source leaves it whole."""
    saver = TieredSaver(memory)
    _run(saver, 3)
    copy: RunnableConfig = {"configurable": {"thread_id": "copy"}}
    saver.copy_thread("t-1", "copy")
    expected = _comparable(tool_graph(saver), THREAD)
    saver.delete_thread("t-1")
    assert _comparable(tool_graph(saver), copy) == expected
    assert _texts(memory, "copy")[:2] == ["question 0", ""]
    tool_graph(saver).invoke(_ask(5), copy)
    with pytest.raises(InvalidArgument):
        saver.copy_thread("copy", "copy")


def test_a_renamed_session_is_the_thread_under_its_new_id(memory: ConversationMemory) -> None:
    """``rename_session`` moves the thread with its checkpoints: its history reads back
    the same under the new id, the old id has none, and the thread goes on (also in a
    saver that wrote it under the old id)."""
    saver = TieredSaver(memory)
    _run(saver, 3)
    expected = _comparable(tool_graph(saver), THREAD)
    memory.rename_session("t-1", "user-42")
    renamed: RunnableConfig = {"configurable": {"thread_id": "user-42"}}
    assert _comparable(tool_graph(saver), renamed) == expected
    assert saver.get_tuple(THREAD) is None
    tool_graph(saver).invoke(_ask(3), renamed)
    assert _texts(memory, "user-42")[-2:] == ["found question 3", "answer 4: found question 3"]
    _run(saver, 1)  # the old id starts a thread of its own
    assert _texts(memory, "t-1")[0] == "question 0"


def test_delete_for_runs_keeps_the_conversation(memory: ConversationMemory) -> None:
    """The runs' checkpoints and writes go; their messages stay."""
    saver = TieredSaver(memory)
    graph = tool_graph(saver)
    graph.invoke(_ask(0), {"configurable": {"thread_id": "t-1"}, "metadata": {"run_id": "r1"}})
    graph.invoke(_ask(1), {"configurable": {"thread_id": "t-1"}, "metadata": {"run_id": "r2"}})
    texts = _texts(memory, "t-1")
    saver.delete_for_runs(["r1"])
    assert {t.metadata.get("run_id") for t in saver.list(THREAD)} == {"r2"}
    assert _texts(memory, "t-1") == texts


class _Xor:
    """A toy cipher (tests only): XOR with one byte."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return "xor", bytes(b ^ 0x5A for b in plaintext)

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        assert ciphername == "xor"
        return bytes(b ^ 0x5A for b in ciphertext)


def test_an_encrypting_serde_keeps_messages_out_of_clear_text(memory: ConversationMemory) -> None:
    """With an ``EncryptedSerializer`` no message becomes an entry and no row holds
    a message's text; the history reads back as InMemorySaver's."""
    saver = TieredSaver(memory, serde=EncryptedSerializer(_Xor()))
    reference = InMemorySaver()
    for checkpointer in (saver, reference):
        graph = tool_graph(checkpointer)
        for turn in range(2):
            graph.invoke(_ask(turn), THREAD)
    assert _comparable(tool_graph(saver), THREAD) == _comparable(tool_graph(reference), THREAD)
    assert memory.get_entries("t-1") == []
    with memory.engine.connect() as conn:
        for table in (checkpoint_table, blob_table, write_table):
            for row in conn.execute(sa.select(table)):
                assert b"question" not in b"".join(v for v in row if isinstance(v, bytes))


def test_from_url_and_setup(url: str) -> None:
    """``from_url`` makes a saver on its own memory of a project, closed with it;
    ``setup`` may run again."""
    with TieredSaver.from_url(url, project="agents") as saver:
        saver.setup()
        _run(saver, 1)
        assert saver.memory.project == "agents"
        assert saver.get_tuple(THREAD) is not None


def test_bad_thread_id_writes_nothing(memory: ConversationMemory) -> None:
    """A thread id that is no valid session id is refused with a typed error."""
    saver = TieredSaver(memory)
    with pytest.raises(InvalidSessionId):
        tool_graph(saver).invoke(_ask(0), {"configurable": {"thread_id": " padded "}})
    assert memory.list_sessions() == [] and _rows(memory) == dict.fromkeys(_rows(memory), 0)


def test_concurrent_threads(memory: ConversationMemory) -> None:
    """Graphs of several threads run at once on one saver: every thread ends with
    its own messages, each stored once."""
    saver = TieredSaver(memory)
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            graph = tool_graph(saver)
            for turn in range(3):
                graph.invoke(
                    {"messages": [HumanMessage(f"{name} {turn}", id=f"{name}-h{turn}")]},
                    {"configurable": {"thread_id": name}},
                )
        except BaseException as error:  # reported below
            errors.append(error)

    workers = [threading.Thread(target=work, args=(f"w{n}",)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    for n in range(4):
        state = tool_graph(saver).get_state({"configurable": {"thread_id": f"w{n}"}})
        assert [m.content for m in state.values["messages"]][::4] == [f"w{n} {t}" for t in range(3)]
        assert len(_texts(memory, f"w{n}")) == 12


def _put_list(saver: TieredSaver, messages: list[BaseMessage], step: int, parent: Any) -> Any:
    """Put a checkpoint whose ``messages`` channel holds ``messages`` (a new version)."""
    version = saver.get_next_version(None if step == 0 else f"{step:032}.0", None)
    config: RunnableConfig = {"configurable": {"thread_id": "t-1", "checkpoint_ns": ""}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=step))
    checkpoint["channel_values"] = {"messages": list(messages)}
    checkpoint["channel_versions"] = {"messages": version}
    return saver.put(config, checkpoint, {"source": "loop", "step": step}, {"messages": version})


def test_message_lists_are_deltas_with_a_full_list_every_32(memory: ConversationMemory) -> None:
    """A growing list is stored as the ids appended since the previous version, with a
    full list every 32 versions; every version reads back its own list."""
    saver = TieredSaver(memory)
    messages: list[BaseMessage] = []
    configs = []
    for step in range(70):
        messages.append(HumanMessage(f"message {step}", id=f"m{step}"))
        configs.append(_put_list(saver, messages, step, configs[-1] if configs else None))
    with memory.engine.connect() as conn:
        values = conn.execute(sa.select(blob_table.c.value)).scalars().all()
    full = [json.loads(v) for v in values if "refs" in json.loads(v)]
    assert len(values) == 70 and len(full) == 3
    for step in (0, 31, 32, 45, 69):
        found = saver.get_tuple(configs[step])
        assert found is not None
        assert [m.content for m in found.checkpoint["channel_values"]["messages"]] == [
            f"message {n}" for n in range(step + 1)
        ]
    assert len(memory.get_entries("t-1")) == 70


def test_a_message_edited_in_place_is_a_revision(memory: ConversationMemory) -> None:
    """Assigning a message's content in place between two checkpoints stores a
    revision: the old checkpoint keeps the old text, the new one has the new text."""
    saver = TieredSaver(memory)
    messages: list[BaseMessage] = [HumanMessage("first", id="m0")]
    first = _put_list(saver, messages, 0, None)
    messages[0].content = "first, edited"
    messages.append(HumanMessage("second", id="m1"))
    second = _put_list(saver, messages, 1, first)
    texts = [
        [m.content for m in saver.get_tuple(c).checkpoint["channel_values"]["messages"]]  # type: ignore[union-attr]
        for c in (first, second)
    ]
    assert texts == [["first"], ["first, edited", "second"]]


def test_concurrent_puts_of_one_thread_store_a_message_once(memory: ConversationMemory) -> None:
    """Puts of one thread's namespaces at once (parallel subgraphs), whose lists share
    new messages: each message is stored once, and every namespace reads back its list."""
    saver = TieredSaver(memory)
    _put_list(saver, [HumanMessage("start", id="m0")], 0, None)  # the session exists
    shared = [HumanMessage(f"shared {n}", id=f"s{n}") for n in range(5)]
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def work(worker: int) -> None:
        try:
            config: RunnableConfig = {
                "configurable": {"thread_id": "t-1", "checkpoint_ns": f"sub:{worker}"}
            }
            checkpoint = empty_checkpoint()
            own = HumanMessage(f"own {worker}", id=f"o{worker}")
            checkpoint["channel_values"] = {"messages": [*shared, own]}
            checkpoint["channel_versions"] = {"messages": "1"}
            start.wait()
            saver.put(config, checkpoint, {"source": "loop", "step": 1}, {"messages": "1"})
        except BaseException as error:  # reported below
            errors.append(error)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    contents = [str(e.to_message().content) for e in memory.get_entries("t-1")]
    assert sorted(contents) == sorted(
        ["start", *(f"shared {n}" for n in range(5)), *(f"own {n}" for n in range(4))]
    )
    for n in range(4):
        config: RunnableConfig = {"configurable": {"thread_id": "t-1", "checkpoint_ns": f"sub:{n}"}}
        found = saver.get_tuple(config)
        assert found is not None
        messages = found.checkpoint["channel_values"]["messages"]
        assert [m.content for m in messages] == [*(f"shared {i}" for i in range(5)), f"own {n}"]
