"""T25 (limit), T28-T31, T36: bad input is refused with a typed error before any SQL."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import tiktoken
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, TierPolicy, calculate_tier
from tiermem.errors import (
    EntryTooLarge,
    InvalidArgument,
    InvalidContent,
    InvalidSessionId,
    TokenizerUnavailable,
)
from tiermem.testing import FakeSummarizer, ManualClock
from tiermem.tokens import load_encoding

from ..conftest import MemoryFactory
from .dump import canonical_dump, tiermem_table_names


@contextmanager
def no_sql(engine: Engine) -> Iterator[list[str]]:
    """Fail if any statement reaches ``engine`` inside the block."""
    statements: list[str] = []

    def spy(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", spy)
    try:
        yield statements
    finally:
        sa.event.remove(engine, "before_cursor_execute", spy)
    assert statements == [], f"SQL ran before the argument was refused: {statements[:2]}"


def refused(memory: ConversationMemory, call: Callable[[], object], error: type[Exception]) -> None:
    """``call`` raises ``error`` without sending SQL and without changing the store."""
    before = canonical_dump(memory.engine)
    with no_sql(memory.engine), pytest.raises(error):
        call()
    assert canonical_dump(memory.engine) == before


# --------------------------------------------------------------------------- T28 ids

HOSTILE_IDS = [
    "'; DROP TABLE tiermem_entry; --",
    "a' OR '1'='1",
    "\\",
    "%",
    "_",
    "a_c",
    "abc",
    "a%c",
    "ab\\c",
    "Ａdmin",  # fullwidth A
    "аdmin",  # Cyrillic a
    "admin",
    "x" * 255,
]


def test_hostile_ids_are_isolated(make_memory: MemoryFactory) -> None:
    """Ids full of SQL metacharacters and LIKE wildcards are stored as plain values: each
    session sees only its own entry, clearing one leaves the others, and no table changes."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    memory.add_user_message("seed", "seed")
    tables = tiermem_table_names(memory.engine)
    for session_id in HOSTILE_IDS:
        memory.add_user_message(session_id, f"content of {session_id}")
    for session_id in HOSTILE_IDS:
        assert [e.content for e in memory.get_entries(session_id)] == [f"content of {session_id}"]
        state = memory.export_session(session_id)
        assert state.session_id == session_id and len(state.entries) == 1
        hits = memory.search("content", session_id=session_id, limit=50)
        assert {hit.entry.session_id for hit in hits} <= {session_id}
    assert sorted(info.session_id for info in memory.list_sessions()) == sorted(
        [*HOSTILE_IDS, "seed"]
    )
    assert memory.clear_session("a_c") == 1 and memory.clear_session("%") == 1
    remaining = {info.session_id for info in memory.list_sessions()}
    assert remaining == set(HOSTILE_IDS) - {"a_c", "%"} | {"seed"}
    assert memory.get_entries("abc")[0].content == "content of abc"
    assert tiermem_table_names(memory.engine) == tables


BAD_IDS: list[object] = [
    "x\n",
    " x",
    "x ",
    "",
    "\x00",
    "a\x00b",
    "tab\tid",
    "x" * 256,
    "x" * 10_000,
    "\ud800",
    5,
    None,
]


def _id_calls(memory: ConversationMemory, bad: object) -> list[Callable[[], object]]:
    """Every public call that takes a session id, given ``bad``."""
    state = memory.export_session("s")
    calls: list[Callable[[], object]] = [
        lambda: memory.add_user_message(bad, "x"),  # type: ignore[arg-type]
        lambda: memory.get_messages(bad),  # type: ignore[arg-type]
        lambda: memory.compress(bad, force=True),  # type: ignore[arg-type]
        lambda: memory.clear_session(bad),  # type: ignore[arg-type]
        lambda: memory.export_session(bad),  # type: ignore[arg-type]
        lambda: memory.track_access(bad),  # type: ignore[arg-type]
    ]
    if bad is not None:  # session_id=None imports under the exported id
        calls.append(lambda: memory.import_session(state, session_id=bad))  # type: ignore[arg-type]
    return calls


def test_bad_session_ids_are_refused(make_memory: MemoryFactory) -> None:
    """Ids breaking the documented rule (outer whitespace, control characters, NUL, over
    255 characters, lone surrogates, not a str) raise InvalidSessionId before any SQL."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    memory.add_user_message("s", "existing")
    for bad in BAD_IDS:
        calls = _id_calls(memory, bad)
        refused(memory, calls[0], InvalidSessionId)
        for call in calls[1:]:  # import reports it as ImportValidationError at $.session_id
            refused(memory, call, InvalidArgument)


def test_bad_project_is_refused(engine: Engine) -> None:
    """A project name breaking the id rule is refused at construction."""
    for bad in ("", " p", "p\n", "\x00"):
        with pytest.raises(InvalidSessionId):
            ConversationMemory(engine=engine, project=bad)


# --------------------------------------------------------------------------- T29 limits

BAD_COUNTS: list[object] = [-1, True, 1.5, "5", None, math.nan]


def _count_calls(memory: ConversationMemory, value: Any) -> list[Callable[[], object]]:
    """Every public call that takes a count, limit, offset, window or id, given ``value``."""
    calls: list[Callable[[], object]] = [
        lambda: memory.search("message", limit=value),
        lambda: memory.expand_summary(value),
        lambda: memory.least_recently_used("active", limit=value),
    ]
    if value is not None:  # None means "no limit" or "the default window" there
        calls += [
            lambda: memory.list_sessions(limit=value),
            lambda: memory.list_sessions(offset=value),
            lambda: memory.prune_expired(limit=value),
            lambda: memory.compress("s", True, keep=value),
        ]
    return calls


def test_odd_limits_are_refused_before_sql(make_memory: MemoryFactory) -> None:
    """Negative, boolean, fractional and textual limits, offsets, ids and windows raise
    InvalidArgument before any statement runs (no "negative LIMIT = no limit")."""
    memory = make_memory(config=MemoryConfig(auto_compress=False), summarizer=FakeSummarizer())
    for index in range(6):
        memory.add_user_message("s", f"message {index}")
    for value in BAD_COUNTS:
        for call in _count_calls(memory, value):
            refused(memory, call, InvalidArgument)
    refused(memory, lambda: memory.search("message", limit=0), InvalidArgument)
    refused(memory, lambda: memory.expand_summary(-1), InvalidArgument)
    # Not over budget, so nothing to do, yet the bad window is still refused.
    refused(memory, lambda: memory.compress("s", keep=-1), InvalidArgument)
    refused(memory, lambda: memory.least_recently_used("frozen"), InvalidArgument)
    refused(memory, lambda: memory.prune_expired(dry_run="yes"), InvalidArgument)  # type: ignore[arg-type]


def test_huge_limits_never_overflow(make_memory: MemoryFactory) -> None:
    """2**63 as a limit, offset or id is clamped or refused, never a driver overflow."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    memory.add_user_message("s", "message")
    huge = 2**63
    assert len(memory.list_sessions(limit=huge)) == 1
    assert memory.list_sessions(offset=huge) == []
    assert len(memory.search("message", limit=huge)) == 1
    assert memory.prune_expired(limit=huge) == 0
    assert len(memory.least_recently_used("active", limit=huge)) == 1
    for bad_id in (huge, -huge - 1):
        with pytest.raises(InvalidArgument):
            memory.expand_summary(bad_id)


BAD_CONFIGS: list[dict[str, Any]] = [
    {"max_tokens": 0},
    {"max_tokens": -5},
    {"max_entries": 0},
    {"recent_window": -1},
    {"min_entries_to_compress": 0},
    {"compression_ratio": 0},
    {"compression_ratio": 1.5},
    {"summarizer_timeout": -1},
    {"claim_ttl": 0},
    {"max_entry_chars": 0},
    {"max_tokens": True},
    {"max_tokens": "100"},
    {"tier_policy": "30d"},
]


def test_bad_config_is_refused(make_memory: MemoryFactory) -> None:
    """Invalid configuration raises InvalidArgument, through the constructor and through
    update_config, and leaves the old config in force."""
    memory = make_memory()
    before = memory.config
    for changes in BAD_CONFIGS:
        with pytest.raises(InvalidArgument):
            MemoryConfig(**changes)
        with no_sql(memory.engine), pytest.raises(InvalidArgument):
            memory.update_config(**changes)
        assert memory.config == before
    with pytest.raises(InvalidArgument):
        memory.update_config(no_such_field=1)


@pytest.mark.parametrize(
    "policy",
    [
        {"expired_after": timedelta(0)},
        {"expired_after": timedelta(days=-1)},
        {"active_within": timedelta(0)},
        {"active_within": timedelta(days=2), "recent_within": timedelta(days=1)},
    ],
    ids=repr,
)
def test_bad_tier_policy_is_refused(policy: dict[str, Any]) -> None:
    """Zero, negative or inverted tier thresholds raise InvalidArgument."""
    with pytest.raises(InvalidArgument):
        TierPolicy(**policy)


# --------------------------------------------------------------------------- T30 clocks


@pytest.mark.parametrize(
    "bad_clock",
    [lambda: datetime(2026, 1, 1, 12), lambda: "2026-01-01T12:00:00Z", lambda: 1767268800],
    ids=["naive", "text", "epoch"],
)
def test_bad_clock_is_refused(make_memory: MemoryFactory, bad_clock: Callable[[], Any]) -> None:
    """A clock returning naive datetimes (or not datetimes at all) makes every operation
    raise InvalidArgument before any SQL."""
    good = make_memory(config=MemoryConfig(auto_compress=False))
    good.add_user_message("s", "existing")
    memory = make_memory(clock=bad_clock, config=MemoryConfig(auto_compress=False))
    for call in (
        lambda: memory.add_user_message("s", "x"),
        lambda: memory.get_messages("s"),
        lambda: memory.compress("s", force=True),
        lambda: memory.track_access("s"),
        lambda: memory.prune_expired(),
    ):
        refused(memory, call, InvalidArgument)


def test_calculate_tier_refuses_naive_datetimes() -> None:
    """calculate_tier raises InvalidArgument for a naive datetime on either side."""
    aware = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(InvalidArgument):
        calculate_tier(datetime(2026, 1, 1), aware)
    with pytest.raises(InvalidArgument):
        calculate_tier(aware, datetime(2026, 1, 1))


def test_clock_in_another_zone_stores_the_same_instant(make_memory: MemoryFactory) -> None:
    """An aware clock in UTC+05:30 (or across a DST change) stores the same instants as UTC."""
    zone = timezone(timedelta(hours=5, minutes=30))
    moment = datetime(2026, 3, 29, 7, 30, tzinfo=zone)
    memory = make_memory(clock=lambda: moment, config=MemoryConfig(auto_compress=False))
    entry = memory.add_user_message("s", "x")
    assert entry.timestamp == moment
    stored = memory.get_entries("s")[0]
    assert stored.timestamp == moment and stored.timestamp.utcoffset() == timedelta(0)
    assert memory.get_stats("s").last_accessed == moment
    utc = make_memory(clock=ManualClock(moment.astimezone(UTC)))
    utc.add_user_message("t", "y")
    assert utc.get_entries("t")[0].timestamp == stored.timestamp


# --------------------------------------------------------------------------- T31 batches


class _Opaque:
    """A value JSON cannot hold."""


@pytest.mark.parametrize(
    "bad_kwargs",
    [
        {"t": datetime.now(UTC)},
        {"b": b"bytes"},
        {"o": _Opaque()},
        {"n": math.nan},
        {"s": "\ud800"},
    ],
    ids=["datetime", "bytes", "object", "nan", "surrogate"],
)
def test_bad_message_in_batch_writes_nothing(
    make_memory: MemoryFactory, bad_kwargs: dict[str, Any]
) -> None:
    """A batch of 5 whose 4th message cannot be stored raises InvalidContent before any
    SQL; messages 1-3 are not stored either."""
    memory = make_memory(config=MemoryConfig(auto_compress=False))
    memory.add_user_message("s", "existing")
    batch: list[BaseMessage] = [HumanMessage(f"m{i}") for i in range(3)]
    batch.append(AIMessage("bad", additional_kwargs=bad_kwargs))
    batch.append(HumanMessage("m4"))
    refused(memory, lambda: memory.add_messages("s", batch), InvalidContent)
    refused(memory, lambda: memory.add_messages("new", batch), InvalidContent)
    assert [e.content for e in memory.get_entries("s")] == ["existing"]


def test_entry_over_the_limit_is_refused(make_memory: MemoryFactory) -> None:
    """Above max_entry_chars (1 MB here) an entry raises EntryTooLarge before any SQL (T25)."""
    memory = make_memory(config=MemoryConfig(auto_compress=False, max_entry_chars=1_000_000))
    memory.add_user_message("s", "existing")
    big = "a" * 1_100_000
    refused(memory, lambda: memory.add_user_message("s", big), EntryTooLarge)
    with pytest.raises(EntryTooLarge) as caught:
        memory.add_user_message("s", big)
    assert caught.value.limit == 1_000_000 and caught.value.size > 1_000_000
    assert memory.add_user_message("s", "a" * 900_000).seq == 2


# --------------------------------------------------------------------------- T36 tokenizer


def test_tokenizer_unavailable_fails_at_construction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no encoding loadable (offline, empty cache, no offline extra) construction raises
    TokenizerUnavailable naming the fix, and nothing is written."""

    def offline(name: str) -> tiktoken.Encoding:
        raise ConnectionError(f"cannot download {name}")

    path = tmp_path / "never.db"
    load_encoding.cache_clear()
    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    try:
        with pytest.raises(TokenizerUnavailable) as caught:
            ConversationMemory(f"sqlite:///{path}")
        with pytest.raises(TokenizerUnavailable):
            ConversationMemory(f"sqlite:///{path}", encoding="o200k_base")
    finally:
        monkeypatch.undo()
        load_encoding.cache_clear()
    message = str(caught.value)
    assert "cl100k_base" in message and "tiermem[offline]" in message
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert not path.exists()
