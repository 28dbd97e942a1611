"""``tiermem events tail`` and ``tiermem events prune`` through typer's CliRunner."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tiermem import ConversationMemory, cli, cli_common
from tiermem.testing import ManualClock, wait_for_feed

from ..conftest import store_url

runner = CliRunner()


def _settle(url: str) -> None:
    """Wait until the events written so far are deliverable (on PostgreSQL, once
    other clients' older transactions have ended)."""
    with ConversationMemory(url) as memory:
        wait_for_feed(memory)


def test_tail_prints_json_lines_and_resumes_a_consumer(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``tail`` prints one JSON object per event; with ``--consumer`` it acknowledges
    what it printed, so the next ``tail`` of that consumer prints only what is new."""
    url = store_url(backend, tmp_path, request)
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "one")
        memory.add_user_message("s", "two")
    _settle(url)
    result = runner.invoke(cli.app, ["events", "tail", "--url", url, "--consumer", "ops"])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert [line["kind"] for line in lines] == ["entry:added", "entry:added"]
    assert [line["payload"]["seq"] for line in lines] == [1, 2]
    assert set(lines[0]) == {
        "position",
        "kind",
        "project",
        "session_id",
        "created_at",
        "version",
        "payload",
    }
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "three")
    _settle(url)
    again = runner.invoke(cli.app, ["events", "tail", "--url", url, "--consumer", "ops"])
    assert [json.loads(line)["payload"]["seq"] for line in again.output.splitlines()] == [3]
    limited = runner.invoke(cli.app, ["events", "tail", "--url", url, "--limit", "1"])
    assert len(limited.output.splitlines()) == 1


def test_tail_follow_prints_new_events(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tail --follow`` keeps printing events as other writers commit them."""
    url = store_url(backend, tmp_path, request)
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "before")

    def write_later() -> None:
        time.sleep(0.5)
        with ConversationMemory(url) as memory:
            memory.add_user_message("s", "after")

    writer = threading.Thread(target=write_later)
    writer.start()
    printed: list[str] = []

    def capture(text: str, **_: object) -> None:
        printed.append(text)
        if len(printed) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli_common.console, "print", capture)
    try:
        result = runner.invoke(cli.app, ["events", "tail", "--url", url, "--follow"])
    finally:
        writer.join()
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["payload"]["seq"] for line in printed] == [1, 2]


def test_prune_deletes_old_events(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``events prune`` deletes events older than the retention, or than
    ``--older-than-days``, and says how many."""
    url = store_url(backend, tmp_path, request)
    with ConversationMemory(url, clock=ManualClock(datetime.now(UTC) - timedelta(days=10))) as old:
        old.add_user_message("s", "old")
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "new")
    result = runner.invoke(cli.app, ["events", "prune", "--url", url])
    assert result.exit_code == 0, result.output
    assert "deleted 1 events" in result.output
    quiet = runner.invoke(
        cli.app, ["events", "prune", "--url", url, "--older-than-days", "0", "--quiet"]
    )
    assert quiet.exit_code == 0 and quiet.output == ""
    _settle(url)
    with ConversationMemory(url) as memory:
        assert memory.feed.changes() == []


def test_tail_of_a_missing_database_is_one_error_line(tmp_path: Path) -> None:
    """A read-only ``tail`` never creates a database."""
    missing = tmp_path / "none.db"
    result = runner.invoke(cli.app, ["events", "tail", "--url", f"sqlite:///{missing}"])
    assert result.exit_code == 1
    assert not missing.exists()
