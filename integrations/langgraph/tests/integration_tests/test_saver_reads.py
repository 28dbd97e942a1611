"""How ``TieredSaver`` reads a checkpoint on SQLite: each value by its whole key and a
message list's chain of deltas through the chains' index, so a read looks at none of
the thread's other versions however long the thread grows."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, MessagesState, StateGraph

from tiermem_langgraph import TieredSaver

CONFIG: RunnableConfig = {"configurable": {"thread_id": "t"}}


def _answer(state: MessagesState) -> dict[str, Any]:
    turn = len(state["messages"])
    return {"messages": [AIMessage(f"answer {turn}", id=f"a{turn}")]}


def _graph(saver: TieredSaver) -> Any:
    """One node answering each question, on ``saver``."""
    builder = StateGraph(MessagesState)
    builder.add_node("answer", _answer)
    builder.add_edge(START, "answer")
    return builder.compile(checkpointer=saver)


def test_a_read_looks_values_up_by_their_whole_key(tmp_path: Path) -> None:
    """Every statement of a checkpoint read that reads channel values searches them by
    (session, namespace, channel, version), or a chain by its root through the
    chains' index: none reads the channel's every version by a prefix of the key."""
    path = tmp_path / "reads.db"
    with TieredSaver.from_url(f"sqlite:///{path}") as saver:
        graph = _graph(saver)
        for turn in range(6):  # the list is a chain of deltas by now
            graph.invoke({"messages": [HumanMessage(f"question {turn}", id=f"q{turn}")]}, CONFIG)
        statements: list[tuple[str, Any]] = []

        def seen(conn: Any, cursor: Any, sql: str, args: Any, *rest: Any) -> None:
            statements.append((sql, args))

        sa.event.listen(saver.memory.engine, "before_cursor_execute", seen)
        found = saver.get_tuple(CONFIG)
        sa.event.remove(saver.memory.engine, "before_cursor_execute", seen)
    assert found is not None and len(found.checkpoint["channel_values"]["messages"]) == 12
    reads = [(sql, args) for sql, args in statements if "tiermem_checkpoint_blob" in sql]
    assert reads
    with sqlite3.connect(path) as conn:
        plans = [
            str(row[3])
            for sql, args in reads
            for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args)
            if "tiermem_checkpoint_blob" in str(row[3])
        ]
    key = "(session_pk=? AND checkpoint_ns=? AND channel=? AND version=?)"
    chain = "ix_tiermem_checkpoint_blob_root " + key.replace("version", "root")
    assert plans and all(plan.endswith((key, chain)) for plan in plans), plans
    assert any(plan.endswith(chain) for plan in plans)


def test_the_newest_checkpoint_is_read_without_sorting_the_thread(url: str) -> None:
    """A thread's newest checkpoint is read from the checkpoints' unique index,
    newest first, where a LIMIT stops: the database sorts none of the thread's
    checkpoints, so a read's cost does not grow with the thread. (PostgreSQL is
    told not to sort where it can avoid it: a table this small would otherwise be
    sorted by choice.)"""
    with TieredSaver.from_url(url) as saver:
        graph = _graph(saver)
        for turn in range(3):
            graph.invoke({"messages": [HumanMessage(f"question {turn}", id=f"q{turn}")]}, CONFIG)
        statements: list[tuple[str, Any]] = []

        def seen(conn: Any, cursor: Any, sql: str, args: Any, *rest: Any) -> None:
            statements.append((sql, args))

        engine = saver.memory.engine
        sa.event.listen(engine, "before_cursor_execute", seen)
        found = saver.get_tuple(CONFIG)
        sa.event.remove(engine, "before_cursor_execute", seen)
        assert found is not None
        sql, args = next(s for s in statements if "FROM tiermem_checkpoint " in s[0])
        with engine.connect() as conn:
            if engine.dialect.name == "postgresql":
                conn.exec_driver_sql("SET LOCAL enable_sort = off")
                plan = [str(row[0]) for row in conn.exec_driver_sql(f"EXPLAIN {sql}", args)]
            else:
                explain = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", args)
                plan = [str(row[3]) for row in explain]
    assert not any("Sort" in line or "TEMP B-TREE" in line for line in plan), plan


def test_a_checkpoint_keeps_its_id_once(tmp_path: Path) -> None:
    """The id is the row's ``checkpoint_id`` and no longer also inside the serialized
    checkpoint (40 bytes a checkpoint); a read gives it back, and a row stored with
    the id inside reads the same."""
    path = tmp_path / "ids.db"
    with TieredSaver.from_url(f"sqlite:///{path}") as saver:
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage("question", id="q0")]}, CONFIG)
        newest = saver.get_tuple(CONFIG)
        assert newest is not None
        checkpoint_id = newest.checkpoint["id"]
        assert checkpoint_id == newest.config["configurable"]["checkpoint_id"]
        with sqlite3.connect(path) as conn:
            (blob,) = conn.execute(
                "SELECT checkpoint FROM tiermem_checkpoint WHERE checkpoint_id = ?",
                (checkpoint_id,),
            ).fetchone()
            assert checkpoint_id.encode() not in blob
            _, old = saver.serde.dumps_typed(
                {**saver.serde.loads_typed(("msgpack", blob)), "id": checkpoint_id}
            )
            conn.execute(
                "UPDATE tiermem_checkpoint SET checkpoint = ? WHERE checkpoint_id = ?",
                (old, checkpoint_id),
            )
        assert saver.get_tuple(CONFIG) == newest
