"""Compression failures leave every entry active, are typed and signalled, and back off."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, SessionState
from tiermem._storage.schema import session_table
from tiermem.errors import (
    CompressionConflict,
    CompressionInProgress,
    SummarizerFailed,
    SummarizerOutputInvalid,
    SummarizerTimeout,
    TiermemError,
)
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder, SummarizerMode

from ..conftest import MemoryFactory
from .helpers import canonical_dump, dump_but_failure

MANUAL = MemoryConfig(auto_compress=False, recent_window=2, min_entries_to_compress=2)
_IDS = itertools.count()


def fill(memory: ConversationMemory, sid: str = "s", turns: int = 5) -> None:
    """A conversation of ``turns`` exchanges, one of them with a tool call."""
    for turn in range(turns):
        memory.add_user_message(sid, f"Turn {turn}: could you explain step {turn} in detail?")
        if turn == 2:
            call_id = f"c{next(_IDS)}"
            memory.add_tool_call(sid, "lookup", {"step": turn}, call_id=call_id)
            memory.add_tool_result(sid, "lookup", f"step {turn} facts", call_id=call_id)
        memory.add_assistant_message(sid, f"Step {turn} means doing the thing carefully.")


def session_row(engine: Engine, sid: str = "s") -> dict[str, Any]:
    """The raw session row (claim and backoff bookkeeping included)."""
    with engine.connect() as conn:
        row = conn.execute(
            sa.select(session_table).where(session_table.c.session_id == sid)
        ).mappings()
        return dict(row.one())


def assert_unchanged_after(
    engine: Engine, memory: ConversationMemory, error: type[BaseException], **kwargs: Any
) -> BaseException:
    """Run a failing compress; check the data is untouched, the claim released and
    only compression_failed (for tiermem errors) was signalled."""
    before = dump_but_failure(engine)
    failures = session_row(engine)["failures"]
    with SignalRecorder(memory).recording() as recorder:
        with pytest.raises(error) as info:
            memory.compress("s", force=True, **kwargs)
    assert dump_but_failure(engine) == before
    row = session_row(engine)
    assert row["claim_token"] is None and row["claim_expires_at"] is None
    assert row["failures"] == failures + 1 and row["backoff_until"] is not None
    expected = ["compression_failed"] if isinstance(info.value, TiermemError) else []
    assert recorder.names() == expected
    if expected:
        assert recorder.of("compression_failed") == [{"session_id": "s", "error": info.value}]
    return info.value


def test_raising_summarizer(engine: Engine, make_memory: MemoryFactory) -> None:
    """Exceptions become SummarizerFailed with __cause__, KeyboardInterrupt propagates
    unchanged; nothing changes, the claim is released, and a retry then works."""
    summarizer = FakeSummarizer(mode="raise")
    memory = make_memory(config=MANUAL, summarizer=summarizer)
    fill(memory)
    for exception in (ConnectionError("reset by peer"), RuntimeError("bug"), TimeoutError()):
        summarizer.error = exception
        error = assert_unchanged_after(engine, memory, SummarizerFailed)
        assert error.__cause__ is exception
    summarizer.error = KeyboardInterrupt()
    assert_unchanged_after(engine, memory, KeyboardInterrupt)
    summarizer.mode = "ok"
    assert memory.compress("s", force=True) is not None


async def test_cancelled_error_propagates(engine: Engine, make_memory: MemoryFactory) -> None:
    """CancelledError from an async summarizer propagates unchanged and changes nothing."""

    async def cancelled(prompt: str) -> str:
        raise asyncio.CancelledError()

    memory = make_memory(config=MANUAL, summarizer=cancelled)
    fill(memory)
    before = dump_but_failure(engine)
    with pytest.raises(asyncio.CancelledError):
        await memory.acompress("s", force=True)
    assert dump_but_failure(engine) == before
    assert session_row(engine)["claim_token"] is None


INVALID_MODES: list[SummarizerMode] = [
    "empty",
    "whitespace",
    "none",
    "tool_call",
    "error_stub",
    "echo_x2",
]


def test_invalid_output(engine: Engine, make_memory: MemoryFactory) -> None:
    """Unusable answers raise SummarizerOutputInvalid and leave the data byte-identical."""
    summarizer = FakeSummarizer()
    memory = make_memory(config=MANUAL, summarizer=summarizer)
    fill(memory)
    for mode in INVALID_MODES:
        summarizer.mode = mode
        assert_unchanged_after(engine, memory, SummarizerOutputInvalid)
    assert len(summarizer.calls) == len(INVALID_MODES)


def test_summary_not_shorter_is_invalid(engine: Engine, make_memory: MemoryFactory) -> None:
    """A summary with as many tokens as its input is refused as not shorter."""
    memory = make_memory(config=MANUAL, summarizer=lambda prompt: "long summary " * 500)
    fill(memory)
    error = assert_unchanged_after(engine, memory, SummarizerOutputInvalid)
    assert "not shorter" in str(error)


async def test_invalid_output_async(engine: Engine, make_memory: MemoryFactory) -> None:
    """The async path validates the same way."""
    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer(mode="error_stub"))
    fill(memory)
    before = dump_but_failure(engine)
    with pytest.raises(SummarizerOutputInvalid):
        await memory.acompress("s", force=True)
    assert dump_but_failure(engine) == before


def test_list_blocks_are_normalized_to_text(make_memory: MemoryFactory) -> None:
    """A list of text blocks is joined into the summary text (documented normalization)."""
    summarizer = FakeSummarizer(mode="list_blocks")
    memory = make_memory(config=MANUAL, summarizer=summarizer)
    fill(memory)
    result = memory.compress("s", force=True)
    assert result is not None
    assert result.summary.content.startswith("Digest of ")
    assert memory.get_summaries("s")[0].content == result.summary.content


@pytest.mark.parametrize("mode", ["special_tokens", "nul"])
def test_special_summaries_round_trip(make_memory: MemoryFactory, mode: SummarizerMode) -> None:
    """Summaries holding <|endoftext|>, RTL, emoji or NUL are stored and read back exactly."""
    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer(mode=mode))
    fill(memory)
    result = memory.compress("s", force=True)
    assert result is not None
    content = result.summary.content
    assert ("<|endoftext|>" in content and "\u202e" in content) or "\x00" in content
    assert result.summary.token_count == memory.counter.count_text(content)
    fresh = make_memory(config=MANUAL)
    assert fresh.get_summaries("s")[0].content == content
    assert content in fresh.get_context_for_llm("s")
    exported = fresh.export_session("s").to_json()
    fresh.import_session(SessionState.from_json(exported), session_id="copy")
    assert fresh.export_session("copy").to_json() == exported.replace('"s"', '"copy"', 1)
    assert fresh.get_summaries("copy")[0].content == content


def test_timeout_discards_the_late_result(engine: Engine, make_memory: MemoryFactory) -> None:
    """A summarizer slower than summarizer_timeout raises SummarizerTimeout within timeout
    + 1 s; when it answers later, its result is discarded."""
    release, answered = threading.Event(), threading.Event()
    summarizer = FakeSummarizer(mode="sleep", release=release, delay=30)

    def late(prompt: str) -> Any:
        try:
            return summarizer.invoke(prompt)
        finally:
            answered.set()

    memory = make_memory(config=MANUAL.replace(summarizer_timeout=0.5), summarizer=late)
    fill(memory)
    started = time.monotonic()
    try:
        assert_unchanged_after(engine, memory, SummarizerTimeout)
        assert time.monotonic() - started < 1.5
        assert not answered.is_set()
        memory.add_user_message("s", "written while the model was still thinking")
        before = canonical_dump(engine)
    finally:
        release.set()
    assert answered.wait(5), "the summarizer never answered"
    time.sleep(0.05)  # let the worker hand its late answer back (to nobody)
    assert len(summarizer.calls) == 1
    assert canonical_dump(engine) == before
    assert memory.get_summaries("s") == []


async def test_async_timeout(engine: Engine, make_memory: MemoryFactory) -> None:
    """acompress times out the same way and leaves nothing behind."""
    release = threading.Event()
    summarizer = FakeSummarizer(mode="sleep", release=release, delay=30)
    memory = make_memory(config=MANUAL.replace(summarizer_timeout=0.3), summarizer=summarizer)
    fill(memory)
    before = dump_but_failure(engine)
    started = time.monotonic()
    try:
        with pytest.raises(SummarizerTimeout):
            await memory.acompress("s", force=True)
        assert time.monotonic() - started < 1.3
    finally:
        release.set()
    await asyncio.sleep(0.05)
    assert dump_but_failure(engine) == before


def test_failing_auto_compression_never_fails_add_and_backs_off(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """Automatic compression failures are signalled, never raised by add_*, and retried
    only after an exponentially growing pause."""
    summarizer = FakeSummarizer(mode="raise", error=ConnectionError("down"))
    config = MemoryConfig(
        max_entries=6, recent_window=2, min_entries_to_compress=2, backoff_base=5, backoff_max=60
    )
    memory = make_memory(config=config, summarizer=summarizer)
    with SignalRecorder(memory).recording() as recorder:
        for i in range(7):
            memory.add_user_message("s", f"message {i}")
        assert len(summarizer.calls) == 1
        for i in range(20):
            memory.add_user_message("s", f"more {i}")
        assert len(summarizer.calls) == 1  # the backoff holds: no futile retries
        clock.advance(seconds=6)
        memory.add_user_message("s", "after the first pause")
        assert len(summarizer.calls) == 2
        clock.advance(seconds=6)  # the second pause is 10 s
        memory.add_user_message("s", "too early")
        assert len(summarizer.calls) == 2
        clock.advance(seconds=5)
        summarizer.mode = "ok"
        memory.add_user_message("s", "recovered")
    assert len(summarizer.calls) == 3
    assert recorder.names().count("compression_failed") == 2
    assert recorder.names().count("compressed") >= 1
    assert memory.get_stats("s").active_entries <= 6
    assert len(memory.get_entries("s")) == 30


def test_heuristic_fallback(make_memory: MemoryFactory) -> None:
    """With heuristic_fallback, a failing model yields the heuristic summary instead."""
    summarizer = FakeSummarizer(mode="raise", error=ConnectionError("down"))
    memory = make_memory(config=MANUAL.replace(heuristic_fallback=True), summarizer=summarizer)
    fill(memory)
    with SignalRecorder(memory).recording() as recorder:
        result = memory.compress("s", force=True)
    assert result is not None and len(summarizer.calls) == 1
    assert "Tool result (lookup): step 2 facts" in result.summary.content
    assert recorder.names() == ["compressed"]
    summarizer.mode = "empty"
    fill(memory, "t")
    fallback = memory.compress("t", force=True)
    assert fallback is not None and "Tool result (lookup): step 2 facts" in fallback.summary.content


def test_expired_claim_loses_to_a_second_compress(
    engine: Engine, make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """If the claim expires while the model runs and another worker compresses, the
    late commit raises CompressionConflict and nothing is written twice."""
    winner = make_memory(config=MANUAL, summarizer=FakeSummarizer())
    outcome: list[Any] = []

    def slow_then_overtaken(prompt: str) -> str:
        clock.advance(seconds=MANUAL.claim_ttl + 1)
        outcome.append(winner.compress("s", force=True))
        return "the loser's summary"

    loser = make_memory(config=MANUAL, summarizer=slow_then_overtaken)
    fill(loser)
    before = dump_but_failure(engine)
    with pytest.raises(CompressionConflict):
        loser.compress("s", force=True)
    assert outcome and outcome[0] is not None
    summaries = loser.get_summaries("s")
    assert [s.content for s in summaries] == [outcome[0].summary.content]
    assert "the loser's summary" not in canonical_dump(engine)
    covered = [e for e in loser.get_entries("s") if e.compressed]
    assert {e.summary_id for e in covered} == {summaries[0].id}
    assert dump_but_failure(engine) != before


def test_live_claim_blocks_and_expired_claim_is_reclaimed(
    engine: Engine, make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """A live claim makes compress raise CompressionInProgress (auto compression waits);
    once its lease expires the session can be compressed."""
    memory = make_memory(config=MANUAL.replace(claim_ttl=60), summarizer=FakeSummarizer())
    fill(memory)
    # A worker that died after claiming: its claim is still in the row.
    with engine.begin() as conn:
        conn.execute(
            sa.update(session_table)
            .where(session_table.c.session_id == "s")
            .values(claim_token="dead-worker", claim_expires_at=clock.now + timedelta(seconds=60))
        )
    with pytest.raises(CompressionInProgress):
        memory.compress("s", force=True)
    auto = make_memory(
        config=MemoryConfig(max_entries=3, recent_window=1, min_entries_to_compress=1),
        summarizer=FakeSummarizer(),
    )
    auto.add_user_message("s", "an automatic trigger waits for the claim")
    assert auto.get_summaries("s") == []
    clock.advance(seconds=59)
    with pytest.raises(CompressionInProgress):
        memory.compress("s", force=True)
    clock.advance(seconds=2)
    assert memory.compress("s", force=True) is not None
    assert session_row(engine)["claim_token"] is None


def test_compress_during_compress_is_refused(make_memory: MemoryFactory) -> None:
    """While the model runs, a second compress of the same session gets CompressionInProgress."""
    attempts: list[BaseException] = []
    memory: ConversationMemory

    def reentrant(prompt: str) -> str:
        try:
            memory.compress("s", force=True)
        except CompressionInProgress as exc:
            attempts.append(exc)
        return "summary of the first worker"

    memory = make_memory(config=MANUAL, summarizer=reentrant)
    fill(memory)
    result = memory.compress("s", force=True)
    assert result is not None and result.summary.content == "summary of the first worker"
    assert len(attempts) == 1 and isinstance(attempts[0], CompressionInProgress)
    assert len(memory.get_summaries("s")) == 1
