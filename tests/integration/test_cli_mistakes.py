"""The command line answers every operator mistake with one line on stderr and a
non-zero exit, never a traceback; read-only commands create nothing and record no
access; text from the data is never read as rich markup."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import typer
from rich.console import Console
from typer.testing import CliRunner, Result

from tiermem import ConversationMemory, cli
from tiermem.errors import InvalidArgument

from ..conftest import store_url

runner = CliRunner()

READ_ONLY = [
    ["sessions"],
    ["show", "s"],
    ["stats"],
    ["export", "s"],
    ["doctor"],
]


@pytest.fixture(name="wide", autouse=True)
def fixture_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Print tables wide enough that no cell wraps."""
    monkeypatch.setattr(cli, "console", Console(width=200))


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL on a fresh SQLite file or PostgreSQL schema holding session ``s``."""
    url = store_url(backend, tmp_path, request)
    with ConversationMemory(url) as memory:
        memory.add_user_message("s", "hello")
    yield url


def assert_one_line_error(result: Result, *expected: str) -> str:
    """The command exited non-zero by itself (no exception escaped) with one line
    on stderr that contains each of ``expected``."""
    assert result.exit_code != 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [*READ_ONLY, ["recalc"], ["prune"], ["import", "x.json"], ["db", "upgrade"]],
    ids=lambda args: "-".join(args),
)
def test_a_url_that_does_not_parse(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every command with a URL that does not parse says so in one line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.json").write_text("{}")
    result = runner.invoke(cli.app, [*args, "--url", "notaurl"])
    assert_one_line_error(result, "error: bad database url 'notaurl'")


def test_the_api_rejects_a_url_that_does_not_parse() -> None:
    """The constructor raises InvalidArgument, not SQLAlchemy's ArgumentError."""
    with pytest.raises(InvalidArgument, match="bad database url"):
        ConversationMemory("notaurl")


def test_mysql_is_unsupported_not_a_missing_postgres_extra() -> None:
    """A MySQL URL is refused as unsupported; the hint is not the PostgreSQL extra."""
    result = runner.invoke(cli.app, ["sessions", "--url", "mysql://nobody@nowhere/db"])
    line = assert_one_line_error(result, "unsupported database 'mysql'")
    assert "tiermem[postgres]" not in line and "postgresql://" in line


def test_import_mistakes(tmp_path: Path) -> None:
    """A missing file, a directory and an empty stdin are one-line errors."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    missing = runner.invoke(cli.app, ["import", str(tmp_path / "nosuchfile.json"), "--url", url])
    assert_one_line_error(missing, "nosuchfile.json", "No such file")
    directory = runner.invoke(cli.app, ["import", str(tmp_path), "--url", url])
    assert_one_line_error(directory, str(tmp_path))
    empty = runner.invoke(cli.app, ["import", "-", "--url", url], input="")
    assert_one_line_error(empty, "nothing to import on stdin")
    assert not (tmp_path / "cli.db").exists()


def test_import_from_stdin_and_the_overwrite_hint(url: str) -> None:
    """``import -`` reads stdin; an existing session names the --overwrite flag."""
    exported = runner.invoke(cli.app, ["export", "s", "--url", url])
    assert exported.exit_code == 0
    again = runner.invoke(cli.app, ["import", "-", "--url", url], input=exported.stdout)
    line = assert_one_line_error(again, "pass --overwrite")
    assert "overwrite=True" not in line
    replaced = runner.invoke(
        cli.app, ["import", "-", "--url", url, "--overwrite"], input=exported.stdout
    )
    assert replaced.exit_code == 0 and "imported session 's'" in replaced.stdout


def test_export_to_a_missing_directory(url: str, tmp_path: Path) -> None:
    """An output file that cannot be written is a one-line error."""
    target = tmp_path / "nonexistent" / "dir" / "x.json"
    result = runner.invoke(cli.app, ["export", "s", "--url", url, "-o", str(target)])
    assert_one_line_error(result, str(target))
    assert not target.parent.exists()


@pytest.mark.parametrize("args", [["doctor"], ["db", "upgrade"], *READ_ONLY[:3]])
def test_a_file_that_is_not_a_database(tmp_path: Path, args: list[str]) -> None:
    """doctor and db upgrade say the file is damaged, as the other commands do."""
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are notes, not a database\n" * 200)
    result = runner.invoke(cli.app, [*args, "--url", f"sqlite:///{path}"])
    assert_one_line_error(result, "database damaged")


def test_an_unknown_revision(url: str) -> None:
    """db upgrade --revision bogus names the revision."""
    result = runner.invoke(cli.app, ["db", "upgrade", "--url", url, "--revision", "bogus"])
    assert_one_line_error(result, "'bogus'")


def test_an_empty_project_is_not_called_a_session_id(url: str) -> None:
    """--project '' is reported as a project."""
    result = runner.invoke(cli.app, ["sessions", "--url", url, "--project", ""])
    line = assert_one_line_error(result, "project must have 1-255 characters")
    assert "session id" not in line


def test_demo_names_the_provider_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chat model whose provider package is missing: the package to install."""
    monkeypatch.setitem(sys.modules, "langchain_openai", None)  # not installed
    monkeypatch.setenv("TIERMEM_CHAT_MODEL", "openai:gpt-4o-mini")
    result = runner.invoke(cli.app, ["demo", "--db", str(tmp_path / "demo.db")])
    assert_one_line_error(result, "langchain-openai")


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda args: args[0])
def test_read_only_commands_create_no_database(tmp_path: Path, args: list[str]) -> None:
    """A mistyped SQLite path is an error, not a new empty and healthy database."""
    path = tmp_path / "missing.db"
    result = runner.invoke(cli.app, [*args, "--url", f"sqlite:///{path}"])
    assert_one_line_error(result, f"no database at {path}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda args: args[0])
def test_read_only_commands_create_no_tables(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, args: list[str]
) -> None:
    """On a database without tiermem's tables (an empty SQLite file, an empty
    PostgreSQL schema) a read-only command says so and creates none."""
    url = store_url(backend, tmp_path, request)
    if backend == "sqlite":
        (tmp_path / "cli.db").touch()
    result = runner.invoke(cli.app, [*args, "--url", url])
    assert_one_line_error(result, "no tiermem tables in", "nothing stored yet")
    engine = sa.create_engine(url)
    try:
        assert sa.inspect(engine).get_table_names() == []
    finally:
        engine.dispose()


def test_data_is_never_read_as_markup(url: str) -> None:
    """Session ids that look like rich markup are listed and shown as they are."""
    with ConversationMemory(url) as memory:
        memory.add_user_message("[prod] user-1", "[red]hi[/red]")
        memory.add_user_message("[bold]x[/bold]", "hello")
    listed = runner.invoke(cli.app, ["sessions", "--url", url])
    assert listed.exit_code == 0
    assert "[prod] user-1" in listed.stdout and "[bold]x[/bold]" in listed.stdout
    shown = runner.invoke(cli.app, ["show", "[bold]x[/bold]", "--url", url])
    assert shown.exit_code == 0 and "user: hello" in shown.stdout
    shown = runner.invoke(cli.app, ["show", "[prod] user-1", "--url", url])
    assert shown.exit_code == 0 and "user: [red]hi[/red]" in shown.stdout


def test_sessions_shows_the_tier_as_of_now(url: str) -> None:
    """A session untouched for 40 days is listed as expired, not as its stored tier."""
    then = datetime.now(UTC) - timedelta(days=40)
    with ConversationMemory(url, clock=lambda: then) as memory:
        memory.add_user_message("old", "hello")
    rows = {row[0]: row[1] for row in result_rows(url)}
    assert rows == {"old": "expired", "s": "active"}


def test_looking_is_not_using(url: str) -> None:
    """The read-only commands record no access: a 40-day-old session keeps its last
    access and count, and the next prune deletes it."""
    then = datetime.now(UTC) - timedelta(days=40)
    with ConversationMemory(url, clock=lambda: then) as memory:
        memory.add_user_message("old", "hello")
    for args in (["show", "old"], ["export", "old"], ["sessions"], ["stats"], ["doctor"]):
        result = runner.invoke(cli.app, [*args, "--url", url])
        assert result.exit_code == 0, result.output
    with ConversationMemory(url) as memory:
        info = {info.session_id: info for info in memory.list_sessions()}
        assert info["old"].access_count == 1 and info["old"].last_accessed == then
    pruned = runner.invoke(cli.app, ["prune", "--url", url])
    assert "deleted 1 expired" in pruned.stdout


def table_rows(text: str) -> list[list[str]]:
    """The cells of the rows of the first listing in ``text``: the lines after its
    header's rule, up to the first blank line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line and set(line) <= {"─", " "})
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def result_rows(url: str) -> list[list[str]]:
    """The table rows ``tiermem sessions`` prints."""
    return table_rows(runner.invoke(cli.app, ["sessions", "--url", url]).stdout)


def test_the_demo_says_where_its_data_went(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo prints its file, project, budget, more than one tier and the next
    commands, and those commands find its sessions."""
    monkeypatch.delenv("TIERMEM_CHAT_MODEL", raising=False)
    path = tmp_path / "demo.db"
    result = runner.invoke(cli.app, ["demo", "--db", str(path), "--turns", "8"])
    assert result.exit_code == 0, result.output
    url = f"sqlite:///{path}"
    assert f"to {path}" in result.stdout and "budget 700 tokens" in result.stdout
    assert f"tiermem sessions --url {url} --project demo" in result.stdout
    tiers = {row[1] for row in table_rows(result.stdout)}
    assert {"active", "recent"} <= tiers
    listed = runner.invoke(cli.app, ["sessions", "--url", url, "--project", "demo"])
    assert "trip-planning" in listed.stdout


def test_help_texts() -> None:
    """Every command and option has a help line, with no RST backticks."""
    root = typer.main.get_command(cli.app)
    commands: list[Any] = []
    for command in getattr(root, "commands", {}).values():
        commands.extend(getattr(command, "commands", {}).values())
        commands.append(command)
    assert len(commands) > 10
    for command in commands:
        assert command.help and "``" not in command.help, command.name
        for param in command.params:
            if param.param_type_name == "option":
                text = getattr(param, "help", None)
                assert text and "``" not in text, (command.name, param.name)
