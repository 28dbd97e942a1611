"""T11-T15, T17, T18: many processes on one store, each joined with a watchdog."""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tiermem import create_tables
from tiermem._storage.migrations import upgrade
from tiermem._storage.schema import session_table
from tiermem.errors import SummarizerTimeout
from tiermem.testing import FakeSummarizer

from ..conftest import _create_schema, _drop_schema
from .harness import (
    CTX,
    StoreSpec,
    join_all,
    kill,
    read_log,
    spawn,
    store_dump,
    store_healthy,
    wait_backends_gone,
    wait_for,
    wait_for_hit,
)
from .workers import (
    NO_AUTO,
    WHOLE,
    append_one,
    append_timed,
    compress_at_barrier,
    compress_loop,
    concurrent_appender,
    first_start,
    gated_compress,
    op_messages,
    opened,
    prefix_reader,
    tag_of,
    tool_group,
)

pytestmark = pytest.mark.slow

WRITERS = 8
OPS = 200


def _errors(logs: list[Path]) -> list[object]:
    return [r for log in logs for r in read_log(log) if "error" in r or "fatal" in r]


def test_eight_writers_one_session(store: StoreSpec, tmp_path: Path) -> None:
    """8 processes x 200 appends (10% atomic tool groups) to one session while a reader
    polls: seqs are dense, each writer's order and every group survive, totals match, and
    the reader only ever saw prefixes of the final order (T11 SQLite, T12 PostgreSQL)."""
    with opened(store) as memory:
        memory.list_sessions()  # the schema exists before the race starts
    barrier = CTX.Barrier(WRITERS + 2)
    stop = CTX.Event()
    logs = [tmp_path / f"w{k}.jsonl" for k in range(WRITERS)]
    writers = [
        spawn(concurrent_appender, store, "s", k, OPS, str(logs[k]), barrier)
        for k in range(WRITERS)
    ]
    reader_log = tmp_path / "reader.jsonl"
    reader = spawn(prefix_reader, store, "s", str(reader_log), barrier, stop)
    try:
        barrier.wait(120)
        started = time.monotonic()
        join_all(writers, 180)
        elapsed = time.monotonic() - started
        stop.set()
        join_all([reader], 30)
    finally:
        for process in [*writers, reader]:
            kill(process)
    assert elapsed < 120, f"lock convoy: {elapsed:.1f} s for {WRITERS * OPS} appends"
    assert _errors([*logs, reader_log]) == []
    wait_backends_gone(store)
    store_healthy(store)
    with opened(store, config=WHOLE) as memory:  # every active message, not a budget's tail
        entries = memory.get_entries("s")
        final = [tag_of(m) for m in memory.get_messages("s")]
    tags = [tag_of(e.message) for e in entries]
    assert [e.seq for e in entries] == list(range(1, len(entries) + 1))
    assert len(entries) == WRITERS * (OPS + 2 * (OPS // 10))
    assert final == tags
    for k, log in enumerate(logs):
        records = read_log(log)
        assert [r["i"] for r in records] == list(range(OPS))
        firsts = [r["seqs"][0] for r in records]
        assert firsts == sorted(firsts), f"writer {k}'s appends are out of order"
        for record in records:
            seqs = record["seqs"]
            assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), "a group was interleaved"
            expected = (
                [tag_of(m) for m in tool_group(f"w{k}.{record['i']}")]
                if len(seqs) == 3
                else [f"w{k}.{record['i']}"]
            )
            assert tags[seqs[0] - 1 : seqs[-1]] == expected
    snapshots = read_log(reader_log)
    assert len(snapshots) > 3
    prefixes = {
        n: hashlib.sha256("\n".join(final[:n]).encode()).hexdigest() for n in range(len(final) + 1)
    }
    assert all(prefixes[s["n"]] == s["sha"] for s in snapshots), "a reader saw a non-prefix"


def test_sessions_are_independent(store: StoreSpec, tmp_path: Path) -> None:
    """8 writers on 8 sessions while one process compresses and prunes all of them: each
    session holds exactly its writer's entries, in order, and every invariant holds (T13)."""
    sessions = [f"s{k}" for k in range(WRITERS)]
    with opened(store) as memory:
        memory.list_sessions()
    barrier = CTX.Barrier(WRITERS + 2)
    stop = CTX.Event()
    logs = [tmp_path / f"w{k}.jsonl" for k in range(WRITERS)]
    writers = [
        spawn(concurrent_appender, store, sessions[k], k, 60, str(logs[k]), barrier)
        for k in range(WRITERS)
    ]
    compress_log = tmp_path / "compress.jsonl"
    compressor = spawn(compress_loop, store, sessions, str(compress_log), barrier, stop)
    try:
        barrier.wait(120)
        join_all(writers, 120)
        stop.set()
        join_all([compressor], 60)
    finally:
        for process in [*writers, compressor]:
            kill(process)
    assert _errors([*logs, compress_log]) == []
    assert any(r["outcome"] == "ok" for r in read_log(compress_log)), "nothing was compressed"
    wait_backends_gone(store)
    store_healthy(store)
    with opened(store) as memory:
        for k, session_id in enumerate(sessions):
            tags = [tag_of(e.message) for e in memory.get_entries(session_id)]
            expected = [
                tag_of(m)
                for i in range(60)
                for m in (tool_group(f"w{k}.{i}") if i % 10 == 4 else [HumanMessage(f"w{k}.{i}")])
            ]
            assert tags == expected


@pytest.mark.parametrize("backend", ["postgres"])  # SQLite has one writer by design
def test_locks_are_per_session_on_postgres(store: StoreSpec, fp_dir: Path) -> None:
    """On PostgreSQL a writer paused inside its transaction on session A does not delay an
    append to session B: the lock is the session row, not a global one (T13)."""
    with opened(store) as memory:
        memory.add_user_message("A", "a")
        memory.add_user_message("B", "b")
    holder = spawn(
        append_one, store, "A", "held", failpoints="append.before_commit=pause", fp_dir=fp_dir
    )
    try:
        wait_for_hit(fp_dir, "append.before_commit", holder)
        with opened(store, lock_timeout=5.0) as memory:
            started = time.monotonic()
            memory.add_user_message("B", "not blocked")
            assert time.monotonic() - started < 2.0
    finally:
        kill(holder)
    wait_backends_gone(store)
    store_healthy(store)


def test_two_compressors_one_session(store: StoreSpec, tmp_path: Path) -> None:
    """Two processes compress one session at once: one summary covers each entry, and the
    summarizer ran once, or twice with the loser raising CompressionConflict (T14)."""
    with opened(store) as memory:
        for index in range(12):
            memory.add_messages("s", op_messages("seed", index))
    barrier = CTX.Barrier(2)
    calls = tmp_path / "calls.jsonl"
    logs = [tmp_path / f"c{k}.jsonl" for k in range(2)]
    workers = [
        spawn(compress_at_barrier, store, "s", str(log), str(calls), barrier) for log in logs
    ]
    join_all(workers, 60)
    outcomes = sorted(read_log(log)[0]["outcome"] for log in logs)
    summarizer_calls = len(read_log(calls))
    assert outcomes in (
        ["CompressionInProgress", "ok"],
        ["none", "ok"],
        ["CompressionConflict", "ok"],
    )
    assert summarizer_calls == (2 if outcomes[0] == "CompressionConflict" else 1)
    store_healthy(store)
    with opened(store) as memory:
        assert len(memory.get_summaries("s")) == 1


def test_append_during_model_call(store: StoreSpec, tmp_path: Path) -> None:
    """A tool result for the call at the boundary, plus 4 more entries, arrive while the
    model runs: the call was never in the snapshot, and every new entry stays active (T15)."""
    with opened(store) as memory:
        for index in range(10):
            memory.add_user_message("s", f"turn {index}")
        call = memory.add_message(
            "s",
            AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": "edge"}]),
        )
    calls, gate = tmp_path / "calls.jsonl", tmp_path / "gate"
    log = tmp_path / "log.jsonl"
    worker = spawn(gated_compress, store, "s", str(log), str(calls), str(gate))
    try:
        wait_for(lambda: bool(read_log(calls)), 60, "the model call")
        with opened(store) as memory:
            memory.add_message("s", ToolMessage(content="late", tool_call_id="edge", name="f"))
            for index in range(4):
                memory.add_user_message("s", f"late {index}")
        gate.touch()
        join_all([worker], 60)
    finally:
        kill(worker)
    assert read_log(log) == [{"outcome": "ok"}]
    store_healthy(store)
    with opened(store) as memory:
        (summary,) = memory.get_summaries("s")
        active = [e.seq for e in memory.get_active_entries("s")]
        stats = memory.get_stats("s")
    assert (summary.first_seq, summary.last_seq) == (1, call.seq - 1)
    assert active == list(range(call.seq, call.seq + 6))
    assert stats.active_entries == 6 and stats.compressed_entries == 10


def test_timed_out_model_call_holds_no_lock(store: StoreSpec, tmp_path: Path) -> None:
    """While the summarizer sleeps past summarizer_timeout (0.5 s), another process appends
    to the same session in under 1 s and before the timeout fires: no transaction or lock
    is held during the model call. compress raises SummarizerTimeout within 1.5 s, and the
    answer that arrives once the model is released is discarded: no summary, and the only
    change is the new append (T02)."""
    with opened(store) as memory:
        for index in range(8):
            memory.add_user_message("s", f"turn {index}: a question worth summarizing")
        before = [(e.seq, e.message, e.token_count, e.summary_id) for e in memory.get_entries("s")]
        tokens_before = memory.get_stats("s").total_tokens
    ready, go = CTX.Event(), CTX.Event()
    log = tmp_path / "append.jsonl"
    contender = spawn(append_timed, store, "s", str(log), 10.0, ready, go)
    release, answered = threading.Event(), threading.Event()
    fake = FakeSummarizer(mode="sleep", delay=60, release=release)
    called: list[float] = []

    def model(prompt: str) -> Any:
        called.append(time.time())
        go.set()  # the other process appends while this call is in flight
        try:
            return fake.invoke(prompt)
        finally:
            answered.set()

    try:
        wait_for(ready.is_set, 60, "the appender to warm up")
        config = NO_AUTO.replace(summarizer_timeout=0.5)
        with opened(store, config=config, summarizer=model) as memory:
            started = time.monotonic()
            with pytest.raises(SummarizerTimeout):
                memory.compress("s", force=True)
            elapsed = time.monotonic() - started
            join_all([contender], 30)
            after_timeout = store_dump(store)
            release.set()
            assert answered.wait(10), "the summarizer never answered"
            time.sleep(0.1)  # the late answer is handed back to nobody
            after_answer = store_dump(store)
    finally:
        release.set()
        kill(contender)
    assert elapsed < 1.5, f"SummarizerTimeout after {elapsed:.2f} s"
    start, end = read_log(log)
    assert end["outcome"] == "ok" and end["seq"] == len(before) + 1
    assert end["t"] - start["t"] < 1.0, f"append took {end['t'] - start['t']:.2f} s"
    # A lock held across the call could only be released once the call timed out.
    (call_started,) = called
    assert end["t"] < call_started + 0.5, "the append waited for the model call"
    assert len(fake.calls) == 1
    assert after_answer == after_timeout
    wait_backends_gone(store)
    store_healthy(store)
    with opened(store) as memory:
        entries = memory.get_entries("s")
        stats = memory.get_stats("s")
        assert memory.get_summaries("s") == []
    assert [(e.seq, e.message, e.token_count, e.summary_id) for e in entries[:-1]] == before
    assert str(entries[-1].message.content) == "contender" and not entries[-1].compressed
    assert stats.summaries == 0 and stats.compressed_entries == 0
    assert stats.total_tokens == tokens_before + entries[-1].token_count


def _schema_objects(store: StoreSpec) -> tuple[list[str], list[str]]:
    """The tiermem tables of the store (sorted, duplicates kept) and every row of the
    version table, read with plain SQL."""
    engine = store.engine()
    try:
        with engine.connect() as conn:
            if store.backend == "sqlite":
                query = sa.text(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name LIKE 'tiermem!_%' ESCAPE '!'"
                )
                tables = sorted(str(name) for name in conn.execute(query).scalars())
            else:
                query = sa.text(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = :schema"
                )
                tables = sorted(
                    str(name) for name in conn.execute(query, {"schema": store.target}).scalars()
                )
            versions: list[str] = []
            if "tiermem_alembic_version" in tables:
                versions = [
                    str(row)
                    for row in conn.execute(
                        sa.text("SELECT version_num FROM tiermem_alembic_version")
                    ).scalars()
                ]
    finally:
        engine.dispose()
    return tables, versions


def _reference_tables(store: StoreSpec, tmp_path: Path) -> list[str]:
    """The tables one process makes on a fresh store of the same backend by taking every
    path of the race in turn (migrations, create_tables, first use)."""
    if store.backend == "sqlite":
        reference = StoreSpec("sqlite", str(tmp_path / "reference.db"))
    else:
        reference = StoreSpec("postgres", _create_schema())
    try:
        upgrade(reference.url)
        engine = reference.engine()
        create_tables(engine)
        engine.dispose()
        with opened(reference) as memory:
            memory.list_sessions()
        tables, versions = _schema_objects(reference)
    finally:
        if store.backend == "postgres":
            _drop_schema(reference.target)
    assert len(versions) == 1
    return tables


def _head_revision() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(Path(upgrade.__code__.co_filename).parent))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head


def test_concurrent_first_start(store: StoreSpec, tmp_path: Path) -> None:
    """8 processes start on a fresh store at once: they create the schema (by first use,
    create_tables and the migrations), then append to one new session id at once (T17,
    T18). Read right after the race, before anything else touches the schema: every
    expected table exists once, the version table holds exactly one row (Alembic keeps
    one row per head, so two upgrades that both recorded themselves would leave two) and
    it names the newest migration; one session row and 8 entries for the new id."""
    hows = ["memory", "create_tables", "upgrade"] * 3
    barrier = CTX.Barrier(WRITERS)
    log = tmp_path / "log.jsonl"
    workers = [spawn(first_start, store, hows[k], k, str(log), barrier) for k in range(WRITERS)]
    join_all(workers, 180)
    outcomes = sorted(r["outcome"] for r in read_log(log))
    assert outcomes == ["appended"] * WRITERS + ["ok"] * WRITERS
    head = _head_revision()
    tables, versions = _schema_objects(store)
    assert versions == [head], f"version rows after the race: {versions}"
    assert len(tables) == len(set(tables)), f"duplicate tables: {tables}"
    expected = _reference_tables(store, tmp_path)
    assert {"tiermem_session", "tiermem_entry", "tiermem_summary"} < set(expected)
    assert "tiermem_alembic_version" in expected
    assert tables == expected
    engine = store.engine()
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(sa.func.count()).where(session_table.c.session_id == "new-id")
            ).scalar_one()
            sessions = set(conn.execute(sa.select(session_table.c.session_id)).scalars())
    finally:
        engine.dispose()
    assert rows == 1
    assert sessions == {"new-id", *(f"s{k}" for k in range(WRITERS) if hows[k] == "memory")}
    store_healthy(store)
    with opened(store, config=NO_AUTO) as memory:
        texts = sorted(str(e.message.content) for e in memory.get_entries("new-id"))
    assert texts == sorted(f"w{k}" for k in range(WRITERS))
    upgrade(store.url)  # idempotent on top of whatever won the race
    assert _schema_objects(store) == (tables, [head])
