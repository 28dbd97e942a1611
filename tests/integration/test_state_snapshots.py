"""Reads of several statements see one snapshot: an export taken while a compression
commits imports back, and the doctor never reports a commit it saw half of."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.engine import Connection, Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem._storage import checks as invariants
from tiermem._storage import sessions, store, structure_checks, summaries
from tiermem.testing import FakeSummarizer, check_invariants

from ..conftest import MemoryFactory

CONFIG = MemoryConfig(auto_compress=False, summary_share=0.01, max_tokens=1_000)


def _in_thread(work: Callable[[], object]) -> None:
    """Run ``work`` to completion on another thread (another connection), re-raising."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # handed back to the test
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the concurrent commit hung"
    if errors:
        raise errors[0]


def _conversation(memory: ConversationMemory, sid: str, turns: int) -> None:
    for turn in range(turns):
        memory.add_user_message(sid, f"question {turn} about the old harbour and its ships")
        memory.add_assistant_message(sid, f"answer {turn}: the ships sailed north in spring")


def test_export_is_one_snapshot_while_a_compression_commits(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compression committing after the export read the entries and before it read
    the summaries does not show up in that export: it imports back, byte for byte, and
    the imported session passes the checker."""
    memory = make_memory(config=CONFIG, summarizer=FakeSummarizer())
    worker = make_memory(config=CONFIG, summarizer=FakeSummarizer())
    _conversation(memory, "s", 6)
    memory.compress("s", force=True, keep=6)
    before = memory.export_session("s").to_json()
    read_summaries = summaries.read_summaries
    exporter = threading.current_thread()
    fired: list[bool] = []

    def summaries_after_a_commit(conn: Connection, session: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is exporter and not fired:
            fired.append(True)
            _in_thread(lambda: worker.compress("s", force=True, keep=2))
        return read_summaries(conn, session, **kwargs)

    monkeypatch.setattr(summaries, "read_summaries", summaries_after_a_commit)
    exported = memory.export_session("s")
    monkeypatch.undo()
    assert fired, "the export did not read its summaries"
    assert exported.to_json() == before, "the export saw the compression half"
    assert memory.import_session(exported, session_id="copy") == "copy"
    copied = exported.model_copy(update={"session_id": "copy"})
    assert memory.export_session("copy").to_json() == copied.to_json()
    assert len(memory.export_session("s").summaries) > len(exported.summaries)
    check_invariants(memory.engine)


def test_exports_under_concurrent_compression_all_import(make_memory: MemoryFactory) -> None:
    """While one thread appends and compresses a session over and over, every export
    taken meanwhile imports back into a fresh session (the store then passes the
    checker, at teardown)."""
    config = MemoryConfig(auto_compress=False, summary_share=0.01, max_tokens=1_000)
    writer = make_memory(config=config, summarizer=FakeSummarizer())
    reader = make_memory(config=config)
    _conversation(writer, "s", 2)
    stop = threading.Event()
    failures: list[BaseException] = []

    def churn() -> None:
        turn = 0
        try:
            while not stop.is_set():
                _conversation(writer, "s", 1)
                writer.compress("s", force=True, keep=1)
                turn += 1
        except BaseException as exc:  # handed back to the test
            failures.append(exc)

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        for attempt in range(25):
            state = reader.export_session("s")
            reader.import_session(state, session_id=f"copy-{attempt}")
    finally:
        stop.set()
        thread.join(60)
    assert not failures, failures


def test_checker_reads_one_snapshot(
    engine: Engine, make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compression committing while the checker runs (after it read the summaries,
    before it read the entries) is not reported as damage."""
    memory = make_memory(config=CONFIG, summarizer=FakeSummarizer())
    worker = make_memory(config=CONFIG, summarizer=FakeSummarizer())
    _conversation(memory, "s", 6)
    summary_rows = structure_checks._summary_rows
    fired: list[bool] = []

    def rows_then_a_commit(conn: Connection) -> Any:
        rows = summary_rows(conn)
        if not fired:
            fired.append(True)
            _in_thread(lambda: worker.compress("s", force=True, keep=2))
        return rows

    monkeypatch.setattr(structure_checks, "_summary_rows", rows_then_a_commit)
    assert invariants.find_violations(engine) == []
    assert fired
    assert memory.get_stats("s").summaries == 1


def test_a_snapshot_transaction_sees_one_state(make_memory: MemoryFactory) -> None:
    """``Database.run(..., snapshot=True)`` reads one state however many statements it
    runs: an append committed between two of its reads is not seen by the second."""
    memory = make_memory(config=CONFIG)
    writer = make_memory(config=CONFIG)
    memory.add_user_message("s", "first")

    def count(conn: Connection) -> int:
        return len(
            store.read_entries(
                conn, sessions.get_session(conn, memory.project, "s", lock=False), active_only=False
            )
        )

    def twice(conn: Connection) -> tuple[int, int]:
        before = count(conn)
        _in_thread(lambda: writer.add_user_message("s", "second"))
        return before, count(conn)

    assert memory.database.run(twice, write=False, snapshot=True) == (1, 1)
    assert len(memory.get_entries("s")) == 2
