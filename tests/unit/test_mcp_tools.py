"""The MCP tool layer in-process, without a database: addresses, health hints, error
results, the read-only tool set and the project guard."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tiermem import ConversationMemory, TierStats
from tiermem.cli import app
from tiermem.errors import InvalidArgument, SessionNotFound, StorageBusy
from tiermem.mcp import READING_TOOLS, WRITING_TOOLS, MemoryTools, build_server
from tiermem.mcp.access import tool_error
from tiermem.mcp.results import memory_stats
from tiermem.mcp.transport import is_loopback_host, parse_http_address


@pytest.fixture(name="memory")
def fixture_memory(tmp_path: Path) -> Iterator[ConversationMemory]:
    """A memory on a SQLite file that no test here opens."""
    memory = ConversationMemory(f"sqlite:///{tmp_path / 'unused.db'}", project="mine")
    yield memory
    memory.close()


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1:8765", ("127.0.0.1", 8765)),
        ("localhost:1", ("localhost", 1)),
        ("[::1]:65535", ("::1", 65535)),
        ("127.9.9.9:80", ("127.9.9.9", 80)),
    ],
)
def test_parses_loopback_addresses(address: str, expected: tuple[str, int]) -> None:
    """HOST:PORT on a loopback host (IPv6 in brackets) parses to host and port."""
    assert parse_http_address(address) == expected


@pytest.mark.parametrize("address", ["0.0.0.0:80", "10.1.2.3:80", "[::]:80", "host.lan:80"])
def test_remote_addresses_need_allow_remote(address: str) -> None:
    """A host that is not a loopback address is refused unless allow_remote."""
    with pytest.raises(InvalidArgument, match="not a loopback address"):
        parse_http_address(address)
    host, port = parse_http_address(address, allow_remote=True)
    assert port == 80 and not is_loopback_host(host)


@pytest.mark.parametrize("address", ["", "8765", "host:", ":80", "h:0", "h:70000", "h:8o"])
def test_malformed_addresses(address: str) -> None:
    """Anything but HOST:PORT with a port in 1..65535 is InvalidArgument."""
    with pytest.raises(InvalidArgument, match="HOST:PORT"):
        parse_http_address(address, allow_remote=True)


def test_memory_stats_health_hints() -> None:
    """A project with over 10% expired sessions recommends a prune; one without active
    sessions says so; an empty one says it is empty."""
    crowded = memory_stats("p", TierStats(total=10, active=0, recent=2, archived=6, expired=2))
    assert crowded.prune_recommended and crowded.expired_share == pytest.approx(0.2)
    assert any("prune_expired_contexts" in hint for hint in crowded.hints)
    assert any("no active sessions" in hint for hint in crowded.hints)
    healthy = memory_stats("p", TierStats(total=20, active=5, recent=5, archived=9, expired=1))
    assert not healthy.prune_recommended and healthy.hints == []
    empty = memory_stats("p", TierStats(total=0, active=0, recent=0, archived=0, expired=0))
    assert empty.hints == ["no sessions in this project yet"] and empty.expired_share == 0


def test_tool_errors_carry_the_typed_message() -> None:
    """A tiermem error becomes isError with 'Class: message' (a KeyError subclass is not
    quoted). Database failures arrive as tiermem's storage errors (the public API
    translates them), so they are presented the same way."""
    result = tool_error(SessionNotFound("no summary 5 in project 'p'"))
    assert result.is_error and result.structured_content is None
    assert result.content[0].text == "SessionNotFound: no summary 5 in project 'p'"  # type: ignore[union-attr]
    busy = tool_error(StorageBusy("database busy, retry later"))
    assert busy.content[0].text == "StorageBusy: database busy, retry later"  # type: ignore[union-attr]


def test_tool_sets_are_disjoint() -> None:
    """No tool is both a reading and a writing tool."""
    assert not set(READING_TOOLS) & set(WRITING_TOOLS)
    assert len(READING_TOOLS + WRITING_TOOLS) == 16


@pytest.mark.parametrize("read_only", [False, True])
async def test_read_only_lists_only_reading_tools(
    memory: ConversationMemory, read_only: bool
) -> None:
    """A read-only server lists the reading tools; the other one lists every tool."""
    server = build_server(MemoryTools(memory, read_only=read_only))
    names = sorted(tool.name for tool in await server.list_tools())
    expected = READING_TOOLS if read_only else READING_TOOLS + WRITING_TOOLS
    assert names == sorted(expected)


def test_project_guard(memory: ConversationMemory) -> None:
    """Another project is refused without all_projects, and shares the engine with it."""
    guarded = MemoryTools(memory)
    assert guarded.memory_for(None) is memory and guarded.memory_for("mine") is memory
    with pytest.raises(InvalidArgument, match="serves project 'mine' only"):
        guarded.memory_for("theirs")
    opened = MemoryTools(memory, all_projects=True)
    theirs = opened.memory_for("theirs")
    assert theirs.project == "theirs" and theirs.engine is memory.engine
    assert opened.memory_for("theirs") is theirs


def test_cli_help_lists_the_options() -> None:
    """`tiermem mcp --help` documents the transport, safety and scope options."""
    result = CliRunner().invoke(app, ["mcp", "--help"], terminal_width=200)
    assert result.exit_code == 0
    for option in (
        "--url",
        "--project",
        "--http",
        "--read-only",
        "--all-projects",
        "--allow-remote",
    ):
        assert option in result.output
