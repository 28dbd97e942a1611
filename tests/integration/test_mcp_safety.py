"""``tiermem mcp`` safety: one project unless --all-projects, read-only mode, failing
databases and malformed requests never kill the server, loopback-only HTTP."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tiermem import ConversationMemory
from tiermem.mcp import READING_TOOLS

from ..conftest import PG_URL, store_url
from .mcp_client import (
    TIMEOUT,
    HttpServer,
    McpClient,
    free_port,
    ok,
    server_command,
    server_env,
    stdio,
    text,
)


def session_ids(url: str, project: str) -> list[str]:
    """The sessions of ``project`` (read through the Python API)."""
    with ConversationMemory(url, project=project) as memory:
        return [info.session_id for info in memory.list_sessions()]


def table_names(url: str) -> list[str]:
    """The tables of the database at ``url``."""
    engine = sa.create_engine(url)
    try:
        return sorted(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``tiermem mcp args`` with nothing on stdin, to its end."""
    return subprocess.run(
        server_command(*args),
        env=server_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A database URL on a fresh SQLite file or a fresh PostgreSQL schema."""
    return store_url(backend, tmp_path, request)


@pytest.fixture(name="client_of")
def fixture_client_of() -> Iterator[list[McpClient]]:
    """Clients a test opens, closed after it."""
    clients: list[McpClient] = []
    yield clients
    for client in clients:
        client.close()


def test_serves_only_its_project(url: str, client_of: list[McpClient]) -> None:
    """Without --all-projects a tool naming another project is a tool error and reaches
    nothing there; the server's own project works."""
    client = McpClient(stdio("--url", url, "--project", "mine"))
    client_of.append(client)
    refused = client.call("add_message", {"session_id": "s", "content": "x", "project": "theirs"})
    assert refused.is_error
    assert text(refused).startswith("InvalidArgument: this server serves project 'mine' only")
    assert client.call("get_memory_stats", {"project": "theirs"}).is_error
    assert ok(client.call("add_message", {"session_id": "s", "content": "x"}))
    assert ok(client.call("get_memory_stats", {"project": "mine"}))["total"] == 1
    assert session_ids(url, "mine") == ["s"]
    assert session_ids(url, "theirs") == []


def test_all_projects_reaches_every_project(url: str, client_of: list[McpClient]) -> None:
    """With --all-projects a tool may name any project."""
    client = McpClient(stdio("--url", url, "--project", "mine", "--all-projects"))
    client_of.append(client)
    ok(client.call("add_message", {"session_id": "t", "content": "x", "project": "theirs"}))
    assert session_ids(url, "theirs") == ["t"]
    assert session_ids(url, "mine") == []


def test_read_only_serves_only_reading_tools(url: str, client_of: list[McpClient]) -> None:
    """--read-only lists only the reading tools; a writing tool is unknown there; reads
    work (and load_context still records its accesses)."""
    with ConversationMemory(url, project="default") as memory:
        memory.add_user_message("s", "hello")
    client = McpClient(stdio("--url", url, "--read-only"))
    client_of.append(client)
    assert sorted(tool.name for tool in client.tools()) == sorted(READING_TOOLS)
    refused = client.call("add_message", {"session_id": "s", "content": "x"})
    assert refused.is_error and "Unknown tool" in text(refused)
    assert client.call("prune_expired_contexts", {}).is_error
    loaded = ok(client.call("load_context", {}))
    assert [s["session_id"] for s in loaded["sessions"]] == ["s"]
    with ConversationMemory(url, project="default") as memory:
        assert memory.get_stats("s").access_count == 2
        assert memory.get_stats("s").total_entries == 1


def test_read_only_never_creates_tables(
    backend: str, url: str, tmp_path: Path, client_of: list[McpClient]
) -> None:
    """A read-only server on a database without tiermem's tables answers with a tool
    error and creates none."""
    if backend == "sqlite":
        sqlite3.connect(tmp_path / "cli.db").close()  # an empty database file
    client = McpClient(stdio("--url", url, "--read-only"))
    client_of.append(client)
    for name in ("get_memory_stats", "load_context", "layer_stats"):
        result = client.call(name, {})
        assert result.is_error and "no tiermem tables" in text(result), name
    assert table_names(url) == []


def test_read_only_refuses_a_missing_sqlite_file(tmp_path: Path) -> None:
    """--read-only on a SQLite file that does not exist exits with code 1 and one line,
    creating no file."""
    missing = tmp_path / "missing.db"
    done = run_cli("--url", f"sqlite:///{missing}", "--read-only")
    assert done.returncode == 1
    assert "no database at" in done.stderr and "Traceback" not in done.stderr
    assert not missing.exists()


def failing_url(backend: str, tmp_path: Path) -> str:
    """A database URL that cannot be opened: PostgreSQL on a port nothing listens on,
    or a SQLite file in a directory that does not exist."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'no-such-dir' / 'x.db'}"
    return PG_URL.replace("127.0.0.1:5432", f"127.0.0.1:{free_port()}")


def test_unreachable_database_is_a_tool_error(
    backend: str, tmp_path: Path, client_of: list[McpClient]
) -> None:
    """Every call on an unreachable database is a storage tool error; the server keeps
    serving."""
    client = McpClient(stdio("--url", failing_url(backend, tmp_path)))
    client_of.append(client)
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_memory_stats", {}),
        ("add_message", {"session_id": "s", "content": "x"}),
        ("load_context", {"limit": 3}),
        ("get_memory_stats", {}),
    ]
    for name, arguments in calls:
        result = client.call(name, arguments)
        assert result.is_error and text(result).startswith("Storage"), (name, text(result))
    assert len(client.tools()) > 0


def drop_everything(backend: str, url: str, request: pytest.FixtureRequest) -> None:
    """Take tiermem's tables away under the server: the schema (PostgreSQL) or every
    table (SQLite)."""
    if backend == "postgres":
        schema = request.getfixturevalue("pg_schema")
        engine = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        engine.dispose()
        return
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        metadata = sa.MetaData()
        metadata.reflect(conn)
        metadata.drop_all(conn)
    engine.dispose()


def test_dropped_tables_are_a_tool_error(
    backend: str, url: str, request: pytest.FixtureRequest, client_of: list[McpClient]
) -> None:
    """Once the tables are gone under a running server, calls are tool errors and the
    server keeps serving."""
    client = McpClient(stdio("--url", url))
    client_of.append(client)
    ok(client.call("add_message", {"session_id": "s", "content": "x"}))
    drop_everything(backend, url, request)
    for name, arguments in [
        ("get_context", {"session_id": "s"}),
        ("get_memory_stats", {}),
        ("search_memory", {"query": "x"}),
    ]:
        result = client.call(name, arguments)
        assert result.is_error and text(result).startswith("Storage"), (name, text(result))
    assert len(client.tools()) > 0


def _message(payload: object) -> bytes:
    return (json.dumps(payload) + "\n").encode()


def test_malformed_stdio_requests_do_not_kill_the_server(url: str) -> None:
    """Lines that are not JSON, or not JSON-RPC, are answered or ignored; the server then
    initializes and lists its tools."""
    process = subprocess.Popen(
        server_command("--url", url),
        env=server_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(b"this is not json\n")
        process.stdin.write(_message({"jsonrpc": "2.0", "id": 7}))
        process.stdin.write(_message([1, 2, 3]))
        process.stdin.write(_message({"jsonrpc": "2.0", "id": 8, "method": "no/such/method"}))
        process.stdin.write(
            _message(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": LATEST_HANDSHAKE_VERSION,
                        "capabilities": {},
                        "clientInfo": {"name": "raw", "version": "0"},
                    },
                }
            )
        )
        process.stdin.write(_message({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        process.stdin.write(_message({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        process.stdin.flush()
        answers: dict[object, dict[str, object]] = {}
        while 2 not in answers:
            line = process.stdout.readline()
            assert line, "the server closed its output"
            answer = json.loads(line)
            answers[answer.get("id")] = answer
        assert "result" in answers[1]
        tools = answers[2]["result"]
        assert isinstance(tools, dict) and len(tools["tools"]) > 0
        assert process.poll() is None
    finally:
        process.stdin.close()
        process.wait(timeout=TIMEOUT)
        process.stdout.close()
    assert process.returncode == 0


def test_malformed_http_requests_do_not_kill_the_server(url: str) -> None:
    """Bodies that are not JSON-RPC get an HTTP error; the server then serves a client."""
    server = HttpServer("--url", url)
    try:
        for body, content_type in [
            (b"this is not json", "application/json"),
            (b'{"jsonrpc": "2.0", "id": 1}', "application/json"),
            (b"<xml/>", "text/xml"),
        ]:
            request = urllib.request.Request(
                server.url,
                data=body,
                method="POST",
                headers={
                    "Content-Type": content_type,
                    "Accept": "application/json, text/event-stream",
                },
            )
            with pytest.raises(urllib.error.HTTPError) as raised:
                urllib.request.urlopen(request, timeout=TIMEOUT)
            assert 400 <= raised.value.code < 500
            raised.value.close()
        client = McpClient(server.connect)
        try:
            assert ok(client.call("get_memory_stats", {}))["total"] == 0
        finally:
            client.close()
        assert server.alive()
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("address", "message"),
    [
        ("0.0.0.0:8765", "not a loopback address"),
        ("example.org:8765", "not a loopback address"),
        ("127.0.0.1", "HOST:PORT"),
        ("127.0.0.1:99999", "HOST:PORT"),
        (":8765", "HOST:PORT"),
    ],
)
def test_http_refuses_bad_or_remote_addresses(address: str, message: str, tmp_path: Path) -> None:
    """--http takes HOST:PORT on a loopback host unless --allow-remote; anything else
    exits with code 1 and one line, before any database is opened."""
    done = run_cli("--http", address, "--url", f"sqlite:///{tmp_path / 'x.db'}")
    assert done.returncode == 1
    assert message in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x.db").exists()
