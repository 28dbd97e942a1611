"""``tiermem stats``, ``recalc`` and ``prune`` through typer's CliRunner, on both backends."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tiermem import ConversationMemory, cli
from tiermem.testing import ManualClock, check_invariants

from ..conftest import store_url

runner = CliRunner()


#: What recalc and prune count in their reports.
WHAT = "sessions, layer items and documents"


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL on a fresh SQLite file or PostgreSQL schema; invariants checked afterwards."""
    url = store_url(backend, tmp_path, request)
    yield url
    with ConversationMemory(url) as memory:
        check_invariants(memory)


def seed(url: str, expired: int = 3, fresh: int = 1) -> None:
    """``expired`` sessions last used 40 days ago and ``fresh`` used just now."""
    clock = ManualClock(datetime.now(UTC) - timedelta(days=40))
    with ConversationMemory(url, clock=clock) as memory:
        for index in range(expired):
            memory.add_user_message(f"old{index}", "hello")
    with ConversationMemory(url) as memory:
        for index in range(fresh):
            memory.add_user_message(f"new{index}", "hello")


def session_ids(url: str) -> set[str]:
    """The session ids of the default project."""
    with ConversationMemory(url) as memory:
        return {info.session_id for info in memory.list_sessions()}


def test_stats_prints_the_distribution_and_hints(url: str) -> None:
    """stats shows each tier's count and share and suggests a prune when many expired."""
    seed(url, expired=3, fresh=1)
    result = runner.invoke(cli.app, ["stats", "--url", url])
    assert result.exit_code == 0, result.output
    lines = {line.split()[1]: line for line in result.stdout.splitlines() if "│" in line}
    assert "1" in lines["active"].split() and "25.0%" in lines["active"]
    assert "3" in lines["expired"].split() and "75.0%" in lines["expired"]
    assert "run `tiermem prune`" in result.stdout
    assert "no active sessions" not in result.stdout


def test_stats_says_when_nothing_is_active(url: str) -> None:
    """With only expired sessions stats says there are no active sessions."""
    seed(url, expired=2, fresh=0)
    result = runner.invoke(cli.app, ["stats", "--url", url])
    assert result.exit_code == 0
    assert "no active sessions" in result.stdout


def test_stats_json_and_other_project(url: str) -> None:
    """stats --json prints the counts; another project is counted on its own."""
    seed(url, expired=1, fresh=2)
    result = runner.invoke(cli.app, ["stats", "--url", url, "--json"])
    assert json.loads(result.stdout) == {
        "total": 3,
        "active": 2,
        "recent": 0,
        "archived": 0,
        "expired": 1,
        "items": 0,
        "active_items": 0,
        "recent_items": 0,
        "archived_items": 0,
        "expired_items": 0,
        "documents": 0,
        "active_documents": 0,
        "recent_documents": 0,
        "archived_documents": 0,
        "expired_documents": 0,
    }
    other = runner.invoke(cli.app, ["stats", "--url", url, "--project", "other"])
    assert other.exit_code == 0 and "no sessions in this project yet" in other.stdout


def test_recalc_reports_and_stays_quiet(url: str) -> None:
    """recalc prints how many rows changed tier; --quiet prints nothing."""
    seed(url, expired=2, fresh=1)
    result = runner.invoke(cli.app, ["recalc", "--url", url])
    assert result.exit_code == 0
    assert f"2 {WHAT} of project 'default' changed tier" in result.stdout
    quiet = runner.invoke(cli.app, ["recalc", "--url", url, "--quiet", "--batch-size", "1"])
    assert quiet.exit_code == 0 and quiet.output == ""


def test_prune_dry_run_then_quiet_prune(url: str) -> None:
    """prune --dry-run only counts (within --limit); prune -q deletes and prints nothing."""
    seed(url, expired=3, fresh=1)
    dry = runner.invoke(cli.app, ["prune", "--url", url, "--dry-run", "--limit", "2"])
    assert dry.exit_code == 0 and f"would delete 2 expired {WHAT}" in dry.stdout
    assert len(session_ids(url)) == 4
    real = runner.invoke(cli.app, ["prune", "--url", url, "-q"])
    assert real.exit_code == 0 and real.output == ""
    assert session_ids(url) == {"new0"}
    again = runner.invoke(cli.app, ["prune", "--url", url, "--limit", "5"])
    assert f"deleted 0 expired {WHAT}" in again.stdout


@pytest.mark.parametrize("args", [["--limit", "-1"], ["--limit", "x"], ["--batch-size", "0"]])
def test_bad_usage_exits_2(url: str, args: list[str]) -> None:
    """A negative or non-numeric limit or a zero batch size is bad usage (exit code 2)."""
    seed(url, expired=1, fresh=0)
    result = runner.invoke(cli.app, ["prune", "--url", url, *args])
    assert result.exit_code == 2
    assert len(session_ids(url)) == 1


def test_store_errors_exit_1(url: str) -> None:
    """A store that cannot be opened is reported with exit code 1."""
    for command in ("stats", "recalc", "prune"):
        result = runner.invoke(cli.app, [command, "--url", "mysql://nobody@nowhere/db"])
        assert result.exit_code == 1, command
        assert "error" in result.output


def test_progress_bar_on_a_terminal(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal a run of several batches draws a progress bar on stderr."""
    seed(url, expired=3, fresh=0)
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=100)
    monkeypatch.setattr(cli, "err_console", terminal)
    result = runner.invoke(cli.app, ["prune", "--url", url, "--batch-size", "1"])
    assert result.exit_code == 0 and f"deleted 3 expired {WHAT}" in result.stdout
    assert "pruning" in screen.getvalue()
    result = runner.invoke(cli.app, ["recalc", "--url", url, "--quiet"])
    assert result.output == ""


def test_prune_and_recalc_handle_layer_items(url: str) -> None:
    """An episode untouched for 400 days: recalc stores it EXPIRED, stats counts it,
    prune deletes it; the fresh one stays."""
    clock = ManualClock(datetime.now(UTC) - timedelta(days=400))
    with ConversationMemory(url, clock=clock) as memory:
        memory.layers("agent").append("episodic", "forgotten long ago")
    with ConversationMemory(url) as memory:
        memory.layers("agent").append("episodic", "remembered")
    result = runner.invoke(cli.app, ["recalc", "--url", url])
    assert f"1 {WHAT} of project 'default' changed tier" in result.stdout
    stats = json.loads(runner.invoke(cli.app, ["stats", "--url", url, "--json"]).stdout)
    assert (stats["items"], stats["expired_items"], stats["active_items"]) == (2, 1, 1)
    result = runner.invoke(cli.app, ["prune", "--url", url])
    assert result.exit_code == 0
    assert f"deleted 1 expired {WHAT}" in result.stdout
    with ConversationMemory(url) as memory:
        layers = memory.layers("agent")
        assert [item.content for item in layers.recent("episodic")] == ["remembered"]
        assert memory.get_tier_stats().items == 1
