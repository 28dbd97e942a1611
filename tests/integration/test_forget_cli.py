"""``tiermem forget`` through typer's CliRunner: one line, ``--dry-run`` lists what
would go, exit codes as the other commands (0, 1 for an error, 2 for bad usage)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tiermem import ConversationMemory, cli

from ..conftest import store_url

runner = CliRunner()


def _stored(url: str) -> None:
    with ConversationMemory(url) as memory:
        memory.add_user_message("user-ada", "my passport is X93817264")
        memory.add_user_message("user-bob", "hello")
        memory.layers("user-ada").learn("passport", "X93817264")


def test_dry_run_lists_then_forget_erases(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = store_url(backend, tmp_path, request)
    _stored(url)
    args = ["forget", "--url", url, "--session", "user-ada", "--scope", "user-ada"]
    dry = runner.invoke(cli.app, [*args, "--namespace", "users.ada", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert dry.output.splitlines() == [
        "would forget sessions 'user-ada'; scopes 'user-ada' of project 'default': "
        "1 entry, 0 summaries, 0 entry vectors, 1 layer item, 0 item vectors, "
        "0 documents, 2 events"
    ]
    with ConversationMemory(url) as memory:
        assert len(memory.get_entries("user-ada")) == 1
    done = runner.invoke(cli.app, args)
    assert done.exit_code == 0, done.output
    assert done.output.startswith("forgot sessions 'user-ada'; scopes 'user-ada'")
    assert len(done.output.splitlines()) == 1
    with ConversationMemory(url) as memory:
        assert [info.session_id for info in memory.list_sessions()] == ["user-bob"]
        assert memory.layers("user-ada").recall("passport") is None
    quiet = runner.invoke(cli.app, [*args, "--quiet"])
    assert (quiet.exit_code, quiet.output) == (0, "")


def test_nothing_named_is_bad_usage(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    _stored(url)
    result = runner.invoke(cli.app, ["forget", "--url", url])
    assert result.exit_code == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--session", "x"], "no database at"),
        (["--namespace", "a..b"], "namespace labels"),
        (["--session", " padded "], "session id"),
    ],
)
def test_errors_are_one_line_and_exit_1(tmp_path: Path, args: list[str], message: str) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    if message != "no database at":
        _stored(url)
    result = runner.invoke(cli.app, ["forget", "--url", url, *args])
    assert result.exit_code == 1
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output
