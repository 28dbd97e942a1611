"""``tiermem prune`` says what pruning deletes by default (expired conversations and
episodes, documents past their time to live, old events) and what it keeps (learned facts
and rules); ``--dry-run`` lists the expired sessions and counts the rest."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tiermem import ConversationMemory, MemoryConfig, TierPolicy, cli
from tiermem.retention import prune_rule
from tiermem.testing import ManualClock

from ..conftest import store_url

runner = CliRunner()


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL on a fresh SQLite file or PostgreSQL schema."""
    yield store_url(backend, tmp_path, request)


def seed(url: str) -> None:
    """Two conversations, a fact, a rule and an episode untouched for 400 days; a fresh
    conversation."""
    clock = ManualClock(datetime.now(UTC) - timedelta(days=400))
    with ConversationMemory(url, clock=clock) as memory:
        memory.add_user_message("trip-2024", "book the ferry")
        memory.add_user_message("trip-2023", "book the train")
        layers = memory.layers("agent")
        layers.learn("home city", "Lisbon")
        layers.add_rule("user asks for a ferry", "suggest Cacilhas")
        layers.append("episodic", "booked the 9:10 ferry")
    with ConversationMemory(url) as memory:
        memory.add_user_message("today", "hello")


def test_a_dry_run_lists_what_would_go_and_says_what_stays(url: str) -> None:
    """The expired sessions by name, the counts, and the rule; nothing is deleted."""
    seed(url)
    result = runner.invoke(cli.app, ["prune", "--url", url, "--dry-run"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "would delete 3 expired sessions, layer items and documents" in out
    assert "  session trip-2024 (last accessed " in out
    assert "  session trip-2023 (last accessed " in out
    assert "today" not in out
    assert "  1 expired layer items\n" in out and "  0 documents past their time to live" in out
    assert "prune deletes sessions not accessed for over 30 days" in out
    assert "it keeps learned facts (semantic) and rules (procedural)" in out
    with ConversationMemory(url) as memory:
        assert len(memory.list_sessions()) == 3


def test_a_prune_says_what_it_deleted_and_kept(url: str) -> None:
    """The conversations and the episode go; the fact and the rule stay, as it says."""
    seed(url)
    result = runner.invoke(cli.app, ["prune", "--url", url])
    assert result.exit_code == 0, result.output
    assert "deleted 3 expired sessions, layer items and documents" in result.stdout
    assert "it keeps learned facts (semantic) and rules (procedural)" in result.stdout
    with ConversationMemory(url) as memory:
        assert [s.session_id for s in memory.list_sessions()] == ["today"]
        layers = memory.layers("agent")
        fact = layers.recall("home city")
        assert fact is not None and fact.value == "Lisbon"
        assert [rule.action for rule in layers.match_rules("ferry")] == ["suggest Cacilhas"]
    quiet = runner.invoke(cli.app, ["prune", "--url", url, "-q"])
    assert quiet.exit_code == 0 and quiet.stdout == ""


def test_the_rule_follows_the_policy() -> None:
    """Another expiry age and other expiring layers are said as configured."""
    policy = TierPolicy(expired_after=timedelta(days=90), expiring_layers={"semantic"})
    config = MemoryConfig(tier_policy=policy, event_retention=timedelta(hours=12))
    rule = prune_rule(config)
    assert "sessions not accessed for over 90 days" in rule
    assert "learned facts (semantic) not accessed for over 90 days" in rule
    assert "change-feed events older than 12 hours" in rule
    assert rule.endswith(
        "it keeps episodes (episodic) and rules (procedural), which do not expire by age"
    )
