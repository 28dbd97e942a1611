"""What a new user of the command line meets first: ``--version``; ``search`` and
``projects``; a hint naming the projects with data when a listing is empty because of
its project; help paragraphs that wrap at the terminal's width, not mid-sentence;
tables that fit 80 columns without splitting an id; progress on ``embed``; usage
errors on one line with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from rich.console import Console
from typer.testing import CliRunner

import tiermem
from tiermem import ConversationMemory, cli, cli_browse

from ..conftest import store_url

runner = CliRunner()


@pytest.fixture(name="wide", autouse=True)
def fixture_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Print in-process tables wide enough that no cell is cut short."""
    wide = Console(width=200)
    monkeypatch.setattr(cli, "console", wide)
    monkeypatch.setattr(cli_browse, "console", wide)


UUID = "3f2a9c4e-1b7d-4e8a-9f00-6c5d4b3a2e1f"


def small_model() -> DeterministicFakeEmbedding:
    """The embeddings ``embed`` is pointed at."""
    return DeterministicFakeEmbedding(size=16)


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A store whose project 'trips' holds two sessions; 'default' holds nothing."""
    url = store_url(backend, tmp_path, request)
    with ConversationMemory(url, project="trips") as memory:
        memory.add_user_message(UUID, "We fly to Paris on May 1")
        memory.add_assistant_message(UUID, "Paris in May is lovely")
        memory.add_user_message("oslo", "Then the train to Oslo")
    yield url


def tiermem_cli(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    """``tiermem args`` as a process in a terminal ``columns`` wide."""
    return subprocess.run(
        [sys.executable, "-m", "tiermem.cli", *args],
        env={**os.environ, "COLUMNS": str(columns)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_version() -> None:
    """--version prints the package's version and exits 0."""
    result = runner.invoke(cli.app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"tiermem {tiermem.__version__}"


def test_search_finds_entries_without_an_access(url: str) -> None:
    """search ranks a project's (or one session's) entries; --json prints one object a
    line; the sessions' access counts do not change."""
    with ConversationMemory(url, project="trips") as memory:
        before = memory.get_stats(UUID).access_count
    found = runner.invoke(cli.app, ["search", "Paris", "--url", url, "--project", "trips"])
    assert found.exit_code == 0, found.output
    assert "We fly to Paris on May 1" in found.stdout and UUID in found.stdout
    assert found.stdout.rstrip().endswith("2 hits")
    lines = runner.invoke(
        cli.app,
        ["search", "Oslo", "--url", url, "--project", "trips", "--session", "oslo", "--json"],
    ).stdout.splitlines()
    assert [json.loads(line)["content"] for line in lines] == ["Then the train to Oslo"]
    one = runner.invoke(cli.app, ["search", "train", "--url", url, "--project", "trips"])
    assert one.stdout.rstrip().endswith("1 hit")
    with ConversationMemory(url, project="trips") as memory:
        assert memory.get_stats(UUID).access_count == before


def test_projects_lists_what_each_holds(url: str) -> None:
    """projects lists every project with data and its sessions, layer items and
    documents."""
    from tiermem_langgraph import TieredStore

    with ConversationMemory(url, project="notes") as memory:
        memory.layers("me").learn("home", "Oslo")
    with ConversationMemory(url, project="docs") as memory:
        TieredStore(memory).put(("user", "ada"), "prefs", {"city": "Oslo"})
    result = runner.invoke(cli.app, ["projects", "--url", url])
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()[2:]}
    assert rows["trips"][:3] == ["2", "0", "0"] and rows["notes"][:3] == ["0", "1", "0"]
    assert rows["docs"][:3] == ["0", "0", "1"]


@pytest.mark.parametrize("command", [["sessions"], ["events", "tail"], ["search", "Paris"]])
def test_an_empty_listing_names_the_projects_with_data(url: str, command: list[str]) -> None:
    """A listing empty because of --project says so on stderr, naming the projects
    that have data; with the right project there is no hint."""
    empty = runner.invoke(cli.app, [*command, "--url", url])
    assert empty.exit_code == 0, empty.output
    assert "in project 'default'" in empty.stderr
    assert "projects with data: 'trips' (2 sessions" in empty.stderr
    full = runner.invoke(cli.app, [*command, "--url", url, "--project", "trips"])
    assert full.exit_code == 0 and full.stderr == ""


def test_help_paragraphs_wrap_at_the_terminal_width() -> None:
    """The command list of --help shows each command's docstring with its paragraphs
    joined, so a wide terminal shows a sentence unbroken (the docstring's own line
    breaks, which split "Records no / access", are gone)."""
    listing = runner.invoke(cli.app, ["--help"], env={"COLUMNS": "250"}).stdout
    for sentence in (
        "Print a session's context as the model sees it, and its counters. Records no "
        "access: looking at a session does not change its tier.",
        "Check the storage invariants; exit code 3 when any is broken. Never creates a database.",
        "Delete expired sessions with their entries and summaries, then expired episodes "
        "(learned facts and rules are kept), oldest first,",
    ):
        assert sentence in listing
    shown = runner.invoke(cli.app, ["show", "--help"], env={"COLUMNS": "250"}).stdout
    assert "Records no access: looking at a session" in shown


def test_tables_fit_80_columns_and_never_split_an_id(url: str) -> None:
    """In 80 columns the sessions and search tables fit, and each id is whole on one
    line."""
    for args in (["sessions"], ["search", "Paris"]):
        done = tiermem_cli(*args, "--url", url, "--project", "trips")
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, done.stdout
        assert any(UUID in line for line in lines), done.stdout
        assert "active" in done.stdout or "Paris" in done.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "--limit", "many"],
        ["sessions", "--no-such-option"],
        ["no-such-command"],
        ["show"],
        ["search"],
    ],
)
def test_usage_errors_are_one_line_with_exit_code_2(args: list[str]) -> None:
    """A usage mistake is one line on stderr ('error: ...', naming the help to read)
    and exit code 2, never a box or a traceback."""
    done = tiermem_cli(*args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and "--help" in lines[0]
    assert "╭" not in done.stderr and "Traceback" not in done.stderr


def test_embed_reports_progress_when_asked(url: str) -> None:
    """embed --progress reports the stored count on stderr; without it (stderr not a
    terminal) nothing is reported."""
    spec = f"{__name__}:small_model"
    base = ["embed", "--url", url, "--project", "trips", "--embeddings", spec]
    quiet = runner.invoke(cli.app, base)
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.output
    with ConversationMemory(url, project="trips") as memory:
        memory.add_user_message("later", "One more message")
    shown = runner.invoke(cli.app, [*base, "--progress"])
    assert shown.exit_code == 0, shown.output
    assert shown.stderr == "embedding: 1 stored\n"
