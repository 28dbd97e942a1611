"""MemoryConfig defaults and validation, update_config, and the default database URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tiermem import ConversationMemory, MemoryConfig, TierPolicy
from tiermem.errors import InvalidArgument
from tiermem.testing import FakeSummarizer, SignalRecorder


def test_seed_defaults() -> None:
    """The configuration defaults are the seed's, but for the limits that keep the
    budget used: only tokens trigger compression, down to 60 % of the budget."""
    config = MemoryConfig()
    assert config.max_tokens == 50_000
    assert config.max_entries is None and MemoryConfig(max_entries=100).max_entries == 100
    assert config.compress_to == 0.6
    assert config.recent_window == 10
    assert config.min_entries_to_compress == 5
    assert config.auto_compress is True
    assert config.compression_ratio == 0.3
    assert config.summary_prompt is None
    assert config.background is False
    assert config.heuristic_fallback is False
    assert config.tier_policy == TierPolicy()


@pytest.mark.parametrize(
    "changes",
    [
        {"max_tokens": 0},
        {"max_tokens": -5},
        {"max_tokens": True},
        {"max_tokens": 1.5},
        {"max_entries": 0},
        {"recent_window": -1},
        {"min_entries_to_compress": 0},
        {"compression_ratio": 0},
        {"compression_ratio": 1},
        {"compression_ratio": 1.5},
        {"summary_share": 0},
        {"compress_to": 0},
        {"compress_to": 1},
        {"summarizer_timeout": 0},
        {"summarizer_timeout": -1.0},
        {"claim_ttl": 0},
        {"backoff_base": -1},
        {"max_entry_chars": 0},
        {"max_summarizer_input_tokens": 0},
        {"summary_prompt": "no placeholder"},
        {"tier_policy": "fast"},
        {"no_such_field": 1},
    ],
    ids=lambda changes: next(iter(changes)),
)
def test_invalid_config_is_refused(changes: dict[str, Any], tmp_path: Path) -> None:
    """Invalid values raise InvalidArgument in the constructor and in update_config."""
    if "no_such_field" not in changes:
        with pytest.raises(InvalidArgument):
            MemoryConfig(**changes)
    with pytest.raises(InvalidArgument):
        MemoryConfig().replace(**changes)
    memory = ConversationMemory(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        before = memory.config
        with pytest.raises(InvalidArgument):
            memory.update_config(**changes)
        assert memory.config is before
    finally:
        memory.close()


def test_update_config_applies(tmp_path: Path) -> None:
    """update_config returns the new configuration and the memory uses it."""
    memory = ConversationMemory(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        updated = memory.update_config(max_entries=3, recent_window=1, min_entries_to_compress=1)
        assert memory.config is updated
        assert (updated.max_entries, updated.recent_window) == (3, 1)
        assert updated.max_tokens == 50_000  # untouched fields keep their values
        for i in range(5):
            memory.add_user_message("s", f"message {i} with a handful of words")
        stats = memory.get_stats("s")
        assert stats.active_entries <= 3 and stats.summaries >= 1
    finally:
        memory.close()


def test_with_config_budgets_one_conversation_apart(tmp_path: Path) -> None:
    """with_config gives a memory on the same database with its own config and
    summarizer; the original keeps its own, and the copy's signals are the original's."""
    memory = ConversationMemory(f"sqlite:///{tmp_path / 'm.db'}")
    try:
        before = memory.config
        small = memory.with_config(max_tokens=60, recent_window=1, min_entries_to_compress=1)
        small.set_summarizer(FakeSummarizer())
        small.update_config(compress_to=0.5)
        assert memory.config is before and small.config.max_tokens == 60
        assert small.config.compress_to == 0.5
        with SignalRecorder(sender=memory).recording() as recorder:
            for i in range(6):
                small.add_user_message("s", f"message {i} with a handful of words in it")
        assert recorder.of("compressed")
        assert memory.get_stats("s").summaries >= 1  # one database
        assert small.counter.count_messages(small.get_messages("s")) <= 60
        assert memory.context.summarizer is None and small.context.summarizer is not None
        with pytest.raises(InvalidArgument, match="no field 'max_token'"):
            memory.with_config(max_token=5)
    finally:
        memory.close()


def test_summary_prompt_accepts_placeholders() -> None:
    """A custom prompt needs {conversation} and may use {target_tokens}."""
    assert MemoryConfig(summary_prompt="{conversation}").summary_prompt == "{conversation}"
    config = MemoryConfig(summary_prompt="In {target_tokens} tokens: {conversation}")
    assert config.summary_prompt is not None


def test_default_url_creates_a_file_in_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without url or engine, the memory is ./tiermem.db, created on first use."""
    monkeypatch.chdir(tmp_path)
    memory = ConversationMemory()
    try:
        assert memory.engine.url.database == "tiermem.db"
        memory.add_user_message("s", "stored on disk")
    finally:
        memory.close()
    assert (tmp_path / "tiermem.db").is_file()
    reopened = ConversationMemory()
    try:
        assert [e.content for e in reopened.get_entries("s")] == ["stored on disk"]
    finally:
        reopened.close()


def test_unsupported_database_is_refused() -> None:
    """Only SQLite and PostgreSQL URLs are accepted."""
    with pytest.raises(InvalidArgument):
        ConversationMemory("mysql+nosuchdriver://u@h/db")


@pytest.mark.parametrize("url", ["not a url", "postgresql://u@h:no-port/db", 5])
def test_a_url_that_does_not_parse_is_an_invalid_argument(url: Any) -> None:
    """A URL SQLAlchemy cannot parse is bad input like any other: InvalidArgument."""
    with pytest.raises(InvalidArgument, match="bad database url"):
        ConversationMemory(url)


@pytest.mark.parametrize("lock_timeout", [float("inf"), float("nan"), 0, -1, 1e20, True, "5"])
def test_a_lock_timeout_that_cannot_be_used_is_refused(tmp_path: Path, lock_timeout: Any) -> None:
    """A lock_timeout the databases cannot take (their millisecond settings are 32-bit)
    is an InvalidArgument at construction, never an OverflowError or a silent wrap."""
    with pytest.raises(InvalidArgument, match="lock_timeout"):
        ConversationMemory(f"sqlite:///{tmp_path}/x.db", lock_timeout=lock_timeout)
    assert not (tmp_path / "x.db").exists()


def test_the_longest_lock_timeout_is_accepted(tmp_path: Path) -> None:
    """A day is accepted and reaches SQLite's busy timeout."""
    with ConversationMemory(f"sqlite:///{tmp_path}/x.db", lock_timeout=86_400) as memory:
        memory.add_user_message("s", "hello")
        assert memory.database.lock_timeout_ms == 86_400_000
