"""Committed means reported: an operation whose transaction committed returns normally,
no exception leaves a compression claim held, and configuration or input that would
overflow later is refused up front with a typed error."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, HumanMessage

from tiermem import ConversationMemory, MemoryConfig, TierPolicy
from tiermem._core.clock import as_utc
from tiermem._core.context import EARLIEST_TIME, LATEST_TIME
from tiermem._core.messages import MAX_NESTING
from tiermem._storage import summaries
from tiermem._storage.schema import session_table
from tiermem.errors import (
    InvalidArgument,
    InvalidContent,
    SummarizerFailed,
    SummarizerOutputInvalid,
)
from tiermem.testing import FakeSummarizer, ManualClock, SignalRecorder
from tiermem.tiers import MAX_TIER_AGE
from tiermem.types import MAX_DURATION_SECONDS

from ..conftest import MemoryFactory
from ..reliability.test_bad_inputs import refused

#: Compress by hand; a claim would outlive the test if a failure left it held.
MANUAL = MemoryConfig(auto_compress=False, recent_window=2, claim_ttl=3600)
#: Compress automatically once the sixth entry is stored.
AUTO = MemoryConfig(max_entries=5, recent_window=2, min_entries_to_compress=2, claim_ttl=3600)


def surrogate_summary(_prompt: str) -> str:
    """A model answer Python holds but no database can store (a lone surrogate)."""
    return "Short summary \ud800 of the talk"


def fill(memory: ConversationMemory, count: int, session_id: str = "s") -> None:
    for index in range(count):
        memory.add_user_message(session_id, f"message {index} with a handful of words in it")


# --------------------------------------------------------------------------- claims


def test_a_surrogate_summary_is_refused_and_the_claim_released(
    make_memory: MemoryFactory,
) -> None:
    """A model answer with a lone surrogate is a typed SummarizerOutputInvalid, signalled,
    and the claim is released: the next compress() works instead of raising
    CompressionInProgress until claim_ttl runs out."""
    memory = make_memory(config=MANUAL, summarizer=surrogate_summary)
    fill(memory, 6)
    with SignalRecorder(memory).recording() as recorder, pytest.raises(SummarizerOutputInvalid):
        memory.compress("s", force=True)
    assert recorder.names() == ["compression_failed"]
    assert memory.get_stats("s").summaries == 0
    memory.set_summarizer(FakeSummarizer())
    assert memory.compress("s", force=True) is not None


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_surrogate_summary_does_not_fail_the_append(
    make_memory: MemoryFactory, use_async: bool
) -> None:
    """The append that triggers an automatic compression committed: a surrogate answer
    is signalled, never raised from add_*, the message is stored and the claim released."""
    memory = make_memory(config=AUTO, summarizer=surrogate_summary)
    fill(memory, 5)
    with SignalRecorder(memory).recording() as recorder:
        if use_async:
            entry = await memory.aadd_user_message("s", "the sixth message")
        else:
            entry = memory.add_user_message("s", "the sixth message")
    assert entry.content == "the sixth message"
    assert [e.content for e in memory.get_entries("s")][-1] == "the sixth message"
    failed = recorder.of("compression_failed")
    assert len(failed) == 1 and isinstance(failed[0]["error"], SummarizerOutputInvalid)
    memory.set_summarizer(FakeSummarizer())
    assert memory.compress("s", force=True) is not None


def test_an_untyped_commit_error_releases_the_claim(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the summary commit raises, typed or not, the claim is released."""
    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer())
    fill(memory, 6)
    real = summaries.commit_summary

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("a bug in the commit")

    monkeypatch.setattr(summaries, "commit_summary", broken)
    with pytest.raises(RuntimeError):
        memory.compress("s", force=True)
    monkeypatch.setattr(summaries, "commit_summary", real)
    assert memory.compress("s", force=True) is not None


def test_an_untyped_error_in_automatic_compression_does_not_fail_the_append(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An automatic compression runs after the append committed: even an untyped error
    there (a bug) is logged with its traceback, and add_* returns the stored entry."""
    memory = make_memory(config=AUTO, summarizer=FakeSummarizer())
    fill(memory, 5)

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("a bug in the commit")

    monkeypatch.setattr(summaries, "commit_summary", broken)
    with caplog.at_level(logging.ERROR, logger="tiermem"):
        entry = memory.add_user_message("s", "the sixth message")
    assert entry.seq == 6 and memory.get_stats("s").total_entries == 6
    assert any(record.exc_info for record in caplog.records), caplog.text


def test_a_later_round_failing_does_not_fail_a_committed_compression(
    make_memory: MemoryFactory,
) -> None:
    """compress() goes on while the context is over budget; when a later round's model
    call fails after the first round committed, the call returns what committed (the
    failure is signalled, its claim released) instead of reporting it as failed."""
    calls: list[str] = []

    def flaky(prompt: str) -> str:
        calls.append(prompt)
        if len(calls) > 1:
            raise RuntimeError("rate limited")
        return "short summary"

    config = MANUAL.replace(max_tokens=60, recent_window=4, min_entries_to_compress=2)
    memory = make_memory(config=config, summarizer=flaky)
    for index in range(12):
        memory.add_user_message("s", f"message {index} " + "word " * 10)
    with SignalRecorder(memory).recording() as recorder:
        result = memory.compress("s")
    assert result is not None and result.entries_compressed == 8
    assert len(calls) == 2 and recorder.names() == ["compressed", "compression_failed"]
    stats = memory.get_stats("s")
    assert stats.summaries == 1 and stats.active_entries == 4
    with pytest.raises(SummarizerFailed):  # not CompressionInProgress: the claim is free
        memory.compress("s", force=True)


def test_an_untyped_merge_error_does_not_fail_a_committed_compression(
    make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The summary merge after a committed compression fails with an untyped error (a
    bug): compress() returns the compression, the error is logged with its traceback and
    the merge's claim is released."""
    config = MANUAL.replace(max_tokens=1_000, summary_share=0.01)
    memory = make_memory(config=config, summarizer=FakeSummarizer())
    fill(memory, 6)
    assert memory.compress("s", force=True) is not None
    fill(memory, 6)
    real = summaries.commit_merge

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("a bug in the merge")

    monkeypatch.setattr(summaries, "commit_merge", broken)
    with caplog.at_level(logging.ERROR, logger="tiermem"):
        result = memory.compress("s", force=True)
    assert result is not None and result.entries_compressed > 0
    assert memory.get_stats("s").summaries == 2
    assert any(record.exc_info for record in caplog.records), caplog.text
    monkeypatch.setattr(summaries, "commit_merge", real)
    fill(memory, 6)
    assert memory.compress("s", force=True) is not None
    assert memory.get_stats("s").summaries == 1  # merged at last


# --------------------------------------------------------------------------- prompt


def test_a_prompt_with_literal_braces_reaches_the_model_intact(
    make_memory: MemoryFactory,
) -> None:
    """A summary_prompt holding a JSON example keeps its braces; only {conversation} and
    {target_tokens} are filled, and a placeholder inside the conversation stays text."""
    template = (
        'Answer as JSON, like {"summary": "...", "topics": ["a"]}, in {target_tokens} '
        "tokens.\n{conversation}"
    )
    summarizer = FakeSummarizer()
    memory = make_memory(config=MANUAL.replace(summary_prompt=template), summarizer=summarizer)
    memory.add_user_message("s", "please keep {target_tokens} and {conversation} as typed")
    fill(memory, 5)
    assert memory.compress("s", force=True) is not None
    head, conversation = summarizer.calls[0].split("\n", 1)
    assert re.fullmatch(
        r'Answer as JSON, like \{"summary": "\.\.\.", "topics": \["a"\]\}, '
        r"in \d+ tokens\.",
        head,
    ), head
    assert conversation.startswith(
        "User: please keep {target_tokens} and {conversation} as typed\nUser: message 0"
    )


# --------------------------------------------------------------------------- backoff


def test_backoff_after_thousands_of_failures_does_not_overflow(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """After 1,024+ consecutive failures (a revoked key over a weekend) the backoff is
    backoff_max: compress() raises the model's typed error and add_* still returns."""
    summarizer = FakeSummarizer(mode="raise")
    memory = make_memory(config=AUTO.replace(backoff_max=60), summarizer=summarizer)
    fill(memory, 5)
    with memory.engine.begin() as conn:
        conn.execute(sa.update(session_table).values(failures=5_000))
    with pytest.raises(SummarizerFailed):
        memory.compress("s", force=True)
    with memory.engine.connect() as conn:
        failures, until = conn.execute(
            sa.select(session_table.c.failures, session_table.c.backoff_until)
        ).one()
    assert failures >= 1024
    assert as_utc(until) == clock.now + timedelta(seconds=60)
    clock.advance(seconds=61)  # past the backoff: the next append compresses and fails
    calls = len(summarizer.calls)
    assert memory.add_user_message("s", "after the weekend").seq == 6
    assert len(summarizer.calls) == calls + 1
    summarizer.mode = "ok"
    assert memory.compress("s", force=True) is not None


# --------------------------------------------------------------------------- limits


def test_the_extreme_accepted_settings_never_overflow(
    make_memory: MemoryFactory, clock: ManualClock
) -> None:
    """The longest claim, backoff and tier thresholds accepted, at the earliest and the
    latest time a clock may return: appends, compression, failures and pruning work."""
    policy = TierPolicy(
        active_within=MAX_TIER_AGE, recent_within=MAX_TIER_AGE, expired_after=MAX_TIER_AGE
    )
    config = AUTO.replace(
        claim_ttl=MAX_DURATION_SECONDS,
        backoff_base=MAX_DURATION_SECONDS,
        backoff_max=MAX_DURATION_SECONDS,
        tier_policy=policy,
    )
    summarizer = FakeSummarizer()
    memory = make_memory(config=config, summarizer=summarizer)
    for moment in (EARLIEST_TIME, LATEST_TIME - timedelta(microseconds=1)):
        clock.set(moment)
        session_id = f"s{moment.year}"
        summarizer.mode = "ok"
        fill(memory, 6, session_id)
        assert memory.get_stats(session_id).summaries == 1
        summarizer.mode = "raise"
        with pytest.raises(SummarizerFailed):
            memory.compress(session_id, force=True, keep=0)
        # At the latest time the session of the earliest is long expired.
        assert memory.prune_expired() == (0 if moment == EARLIEST_TIME else 1)
        assert memory.recalculate_tiers() >= 0
        assert memory.get_tier_stats().total >= 1


def test_prune_with_a_huge_batch_size(make_memory: MemoryFactory, clock: ManualClock) -> None:
    """A batch_size or limit beyond SQL's 64-bit integers is clamped, not an OverflowError."""
    memory = make_memory(config=MANUAL)
    memory.add_user_message("old", "hello")
    clock.advance(days=31)
    assert memory.prune_expired(batch_size=2**63, dry_run=True) == 1
    assert memory.prune_expired(limit=2**64, batch_size=2**63) == 1
    assert memory.list_sessions() == []


@pytest.mark.parametrize(
    "moment",
    [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(999, 12, 31, 23, 59, tzinfo=UTC),
        datetime(9000, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, tzinfo=UTC),
        datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))),
        datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5))),
    ],
    ids=["year-1", "year-999", "year-9000", "year-9999", "before-year-1-utc", "after-9999-utc"],
)
def test_a_clock_out_of_range_is_refused(make_memory: MemoryFactory, moment: datetime) -> None:
    """A clock returning a time near the ends of datetime (year 1, an offset that moves it
    past them, ...) makes every operation raise InvalidArgument before any SQL, instead of
    an OverflowError once a threshold or a lease is applied to it."""
    good = make_memory(config=MANUAL)
    good.add_user_message("s", "existing")
    memory = make_memory(clock=lambda: moment, config=MANUAL, summarizer=FakeSummarizer())
    calls: list[Callable[[], object]] = [
        lambda: memory.add_user_message("s", "x"),
        lambda: memory.get_messages("s"),
        lambda: memory.compress("s", force=True),
        lambda: memory.track_access("s"),
        lambda: memory.prune_expired(),
        lambda: memory.recalculate_tiers(),
        lambda: memory.get_tier_stats(),
    ]
    for call in calls:
        refused(memory, call, InvalidArgument)


# --------------------------------------------------------------------------- nesting


def nested(levels: int) -> Any:
    """``levels`` dicts, each inside the one before."""
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_deep_nesting_is_refused_before_any_sql(make_memory: MemoryFactory) -> None:
    """5,000 levels in metadata, additional_kwargs, response_metadata, content blocks or
    tool arguments: InvalidContent and nothing written (not a RecursionError)."""
    memory = make_memory(config=MANUAL)
    memory.add_user_message("s", "existing")
    deep = nested(5_000)
    for call in (
        lambda: memory.add_user_message("s", "x", deep=deep),
        lambda: memory.add_message("s", HumanMessage("x"), metadata={"deep": deep}),
        lambda: memory.add_message("s", HumanMessage("x", additional_kwargs={"deep": deep})),
        lambda: memory.add_message("s", AIMessage("x", response_metadata={"deep": deep})),
        lambda: memory.add_message("s", HumanMessage([{"type": "text", "text": "x", "d": deep}])),
        lambda: memory.add_tool_call("s", "lookup", {"deep": deep}),
        lambda: memory.add_messages("s", [HumanMessage("fine"), HumanMessage("x", bad=deep)]),
    ):
        refused(memory, call, InvalidContent)
    assert [e.content for e in memory.get_entries("s")] == ["existing"]


def test_nesting_up_to_the_limit_round_trips(make_memory: MemoryFactory) -> None:
    """MAX_NESTING levels are accepted (metadata values and message fields are the first
    level) and read back unchanged; one more is refused."""
    memory = make_memory(config=MANUAL)
    message = HumanMessage("x", additional_kwargs=nested(MAX_NESTING))
    entry = memory.add_message("s", message, metadata={"k": nested(MAX_NESTING)})
    stored = memory.get_entries("s")[0]
    assert stored.message == message and stored.metadata == entry.metadata
    assert stored.metadata == {"k": nested(MAX_NESTING)}
    with pytest.raises(InvalidContent):
        memory.add_user_message("s", "y", k=nested(MAX_NESTING + 1))
    with pytest.raises(InvalidContent):
        memory.add_message("s", HumanMessage("y", additional_kwargs=nested(MAX_NESTING + 1)))
