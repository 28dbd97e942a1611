"""Regressions for core bugs the reliability suite found (one test per fix)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage

from tiermem import ConversationMemory, MemoryConfig
from tiermem.errors import StorageError
from tiermem.testing import FakeSummarizer, check_invariants

from ..conftest import MemoryFactory


def test_failed_summary_commit_releases_the_claim(make_memory: MemoryFactory) -> None:
    """When the summary commit fails, the claim is released, so an immediate retry
    compresses instead of raising CompressionInProgress until the lease runs out."""
    memory = make_memory(
        config=MemoryConfig(auto_compress=False, claim_ttl=3600, recent_window=2),
        summarizer=FakeSummarizer(),
    )
    for index in range(6):
        memory.add_user_message("s", f"message {index} with a handful of words")

    def fail_summary(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("INSERT INTO tiermem_summary"):
            raise sa.exc.OperationalError(statement, None, Exception("disk I/O error"))

    sa.event.listen(memory.engine, "before_cursor_execute", fail_summary)
    try:
        with pytest.raises(StorageError):
            memory.compress("s", force=True)
    finally:
        sa.event.remove(memory.engine, "before_cursor_execute", fail_summary)
    result = memory.compress("s", force=True)
    assert result is not None and memory.get_stats("s").summaries == 1


def test_first_connection_waits_for_another_writer_before_switching_to_wal(
    tmp_path: Path,
) -> None:
    """Switching a fresh file to WAL while another process holds its write lock makes
    SQLite answer ``database is locked`` at once, without calling the busy handler
    (several processes starting on one new file at once hit it). The connection must
    wait the writer out, not fail."""
    path = tmp_path / "fresh.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE other_app (a INTEGER)")
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO other_app VALUES (1)")
    released = threading.Event()

    def release() -> None:
        time.sleep(0.3)
        other.execute("COMMIT")
        released.set()

    releaser = threading.Thread(target=release)
    releaser.start()
    try:
        memory = ConversationMemory(url=f"sqlite:///{path}")
        memory.add_user_message("s", "hello")
        assert released.is_set()
        assert [e.content for e in memory.get_entries("s")] == ["hello"]
        memory.close()
    finally:
        releaser.join()
        other.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    check.close()


def test_editing_a_returned_message_never_changes_later_reads(
    make_memory: MemoryFactory,
) -> None:
    """Returned messages share no container with the parse cache: editing
    ``additional_kwargs``, content blocks or tool-call arguments of one read
    leaves the next read (and the stored entry) as it was added."""
    memory = make_memory()
    memory.add_messages(
        "s",
        [
            HumanMessage([{"type": "text", "text": "look"}], additional_kwargs={"k": [1]}),
            AIMessage(
                "",
                tool_calls=[{"name": "lookup", "args": {"q": "x"}, "id": "c1"}],
                response_metadata={"model": "m"},
            ),
        ],
    )
    first = memory.get_messages("s")
    human, call = first[0], first[1]
    assert isinstance(human.content, list) and isinstance(call, AIMessage)
    human.additional_kwargs["k"].append(2)
    human.additional_kwargs["new"] = True
    human.content[0]["text"] = "edited"  # type: ignore[index]
    call.tool_calls[0]["args"]["q"] = "edited"
    call.response_metadata["model"] = "edited"
    memory.get_entries("s")[0].message.additional_kwargs["k"].append(3)

    again = memory.get_messages("s")
    assert again[0].additional_kwargs == {"k": [1]}
    assert again[0].content == [{"type": "text", "text": "look"}]
    assert isinstance(again[1], AIMessage)
    assert again[1].tool_calls[0]["args"] == {"q": "x"}
    assert again[1].response_metadata == {"model": "m"}


def test_merges_read_no_entry_ids_and_summaries_still_list_them(
    make_memory: MemoryFactory,
) -> None:
    """A merge neither plans nor commits with the ids of the entries under it (they are
    the whole conversation so far: reading them made every merge dearer as it grew), so
    its result carries none; get_summaries and expand_summary still list every entry a
    merged summary covers, and its recorded entry count is its children's."""
    config = MemoryConfig(
        max_tokens=300, recent_window=2, min_entries_to_compress=2, summary_share=0.05
    )
    memory = make_memory(config=config, summarizer=FakeSummarizer())
    merged = []
    memory.on("compressed", lambda _sender, **kw: merged.append(kw["result"]))
    selects: list[str] = []
    sa.event.listen(
        memory.engine,
        "before_cursor_execute",
        lambda _c, _cur, statement, *_a: selects.append(statement),
    )
    for turn in range(25):
        memory.add_and_get_messages(
            "s",
            [
                HumanMessage(f"question {turn} about the weather in town {turn}"),
                AIMessage(f"answer {turn}: sunny in town {turn}, light wind from the west"),
            ],
        )
    results = [r for r in merged if r.merged_summaries]
    assert results, "the budget was meant to force merges"
    assert all(r.summary.original_entry_ids == () for r in results)
    # No statement of the run read compressed entries' ids (the old per-merge range read).
    assert not [q for q in selects if "tiermem_entry.summary_id IS NOT NULL" in q]
    last = results[-1].summary
    assert last.level >= 2
    expanded = [e.id for e in memory.expand_summary(last.id)]
    compressed = [e.id for e in memory.get_entries("s") if e.compressed and e.seq <= last.last_seq]
    assert expanded == compressed
    stored = {s.id: s for s in memory.get_summaries("s")}
    assert last.id in stored  # nothing merged it since
    assert list(stored[last.id].original_entry_ids) == compressed
    check_invariants(memory.engine)  # raises on any broken invariant


@pytest.mark.parametrize("timeout", [float("inf"), 1e300])
def test_an_unbounded_summarizer_timeout_compresses(
    make_memory: MemoryFactory, timeout: float
) -> None:
    """A summarizer_timeout too large for a lock wait (infinity passes validation) waits
    as long as it can instead of raising OverflowError from the timed call."""
    memory = make_memory(
        config=MemoryConfig(auto_compress=False, summarizer_timeout=timeout),
        summarizer=FakeSummarizer(),
    )
    for index in range(8):
        memory.add_user_message("s", f"message {index} with a handful of words")
    assert memory.compress("s", force=True, keep=2) is not None


def test_an_applications_autocommit_connection_stays_outside_a_transaction(
    tmp_path: Path,
) -> None:
    """tiermem opens its own SQLite transactions with BEGIN IMMEDIATE through the
    engine's ``begin`` event; on an engine the application passed in, its own
    AUTOCOMMIT connections must stay out of any transaction, so VACUUM and a WAL
    checkpoint (which SQLite refuses inside one) still work, while tiermem's writes
    and the application's ordinary transactions are still atomic."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    memory = ConversationMemory(engine=engine)
    memory.add_user_message("s", "stored before maintenance")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM")
        busy, _log, _done = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
        assert busy == 0
        assert conn.exec_driver_sql("SELECT count(*) FROM tiermem_entry").scalar() == 1
    # The application's ordinary transaction still rolls back as a whole.
    with pytest.raises(RuntimeError), engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM tiermem_entry")
        raise RuntimeError("abort")
    assert [m.text for m in memory.get_messages("s")] == ["stored before maintenance"]
    memory.add_assistant_message("s", "stored after maintenance")
    assert len(memory.get_messages("s")) == 2
    memory.close()
    engine.dispose()


def test_a_failed_merge_commit_leaves_the_committed_compression_reported(
    make_memory: MemoryFactory,
) -> None:
    """compress() commits its summary, then merges the summaries when they pass their
    share; when only the merge's commit fails, the call returns the compression it
    committed (raising StorageError would tell the caller nothing was written), the
    summaries stay unmerged and valid, and the claim is released for the next call."""
    memory = make_memory(
        config=MemoryConfig(auto_compress=False, max_tokens=120, summary_share=0.025),
        summarizer=FakeSummarizer(),
    )
    for index in range(8):
        memory.add_user_message("s", f"first part, message {index} with a few words")
    assert memory.compress("s", force=True, keep=2) is not None
    for index in range(8):
        memory.add_user_message("s", f"second part, message {index} with a few words")
    inserts: list[str] = []

    def fail_merge(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.startswith("INSERT INTO tiermem_summary"):
            inserts.append(statement)
            if len(inserts) == 2:  # the first is the compression's own summary
                raise sa.exc.OperationalError(statement, None, Exception("disk I/O error"))

    sa.event.listen(memory.engine, "before_cursor_execute", fail_merge)
    try:
        result = memory.compress("s", force=True, keep=2)
    finally:
        sa.event.remove(memory.engine, "before_cursor_execute", fail_merge)
    assert len(inserts) == 2  # the merge was attempted and failed
    assert result is not None and result.merged_summaries == 0
    summaries = memory.get_summaries("s")
    assert [s.level for s in summaries] == [1, 1]
    assert result.summary == summaries[-1]
    assert [e.compressed for e in memory.get_entries("s")] == [True] * 14 + [False] * 2
    check_invariants(memory.engine)
    # The claim is gone: the merge goes through now.
    merged = memory.compress("s", force=True, keep=2)
    assert merged is not None and merged.merged_summaries == 2
    assert [s.level for s in memory.get_summaries("s")] == [2]
    check_invariants(memory.engine)
