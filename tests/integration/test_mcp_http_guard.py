"""``tiermem mcp --http`` over real HTTP: Host and Origin are checked on every loopback
address (any case, any IPv6 spelling, all of 127/8), so a web page cannot reach the
memory by DNS rebinding or a cross-site request; a bearer token, when set, is required
of every request."""

from __future__ import annotations

import http.client
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from .mcp_client import TIMEOUT, HttpServer, McpClient, ok, server_command, server_env

INITIALIZE = json.dumps(
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


def post(server: HttpServer, headers: dict[str, str], body: str = INITIALIZE) -> int:
    """The status of a POST of ``body`` to the server with ``headers`` (``Host`` among
    them, else the server's own address)."""
    connection = http.client.HTTPConnection(server.host.strip("[]"), server.port, timeout=TIMEOUT)
    try:
        connection.request(
            "POST",
            "/mcp",
            body=body.encode(),
            headers={
                "Host": f"{server.host}:{server.port}",
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                **headers,
            },
        )
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


@pytest.fixture(name="server_on")
def fixture_server_on() -> Iterator[list[HttpServer]]:
    """Servers a test starts, stopped after it."""
    servers: list[HttpServer] = []
    yield servers
    for server in servers:
        server.stop()


def start(servers: list[HttpServer], tmp_path: Path, *args: str, **kwargs: object) -> HttpServer:
    url = f"sqlite:///{tmp_path / 'mcp.db'}"
    server = HttpServer("--url", url, *args, **kwargs)  # type: ignore[arg-type]
    servers.append(server)
    return server


@pytest.mark.parametrize("host", ["127.0.0.2", "LOCALHOST", "[0:0:0:0:0:0:0:1]", "127.0.0.1"])
def test_foreign_host_and_origin_are_refused_on_every_loopback_address(
    host: str, tmp_path: Path, server_on: list[HttpServer]
) -> None:
    """A request naming another site in Host (DNS rebinding) gets 421, one from another
    site's page (Origin) 403; the server's own Host, a loopback Origin in another
    spelling, or no Origin at all are served."""
    server = start(server_on, tmp_path, host=host)
    port = server.port
    assert post(server, {"Host": f"evil.example:{port}"}) == 421
    assert post(server, {"Host": "evil.example"}) == 421
    assert post(server, {"Origin": "http://evil.example"}) == 403
    assert post(server, {"Origin": f"http://evil.example:{port}"}) == 403
    assert post(server, {"Origin": "null"}) == 403
    assert post(server, {"Host": f"localhost.evil.example:{port}"}) == 421
    assert post(server, {}) == 200
    assert post(server, {"Host": f"LocalHost:{port}", "Origin": f"http://[::1]:{port}"}) == 200
    assert post(server, {"Origin": f"http://127.42.0.1:{port}"}) == 200
    client = McpClient(server.connect)
    try:
        assert ok(client.call("get_memory_stats", {}))["total"] == 0
    finally:
        client.close()


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_token_is_required_of_every_request(
    how: str, tmp_path: Path, server_on: list[HttpServer]
) -> None:
    """With --token (or TIERMEM_MCP_TOKEN) a request without the bearer token, or with
    another one, gets 401; a client that sends it is served."""
    secret = "s3cret-token"
    if how == "flag":
        server = start(server_on, tmp_path, "--token", secret, token=secret)
    else:
        server = start(server_on, tmp_path, env={"TIERMEM_MCP_TOKEN": secret}, token=secret)
    assert post(server, {}) == 401
    assert post(server, {"Authorization": "Bearer wrong"}) == 401
    assert post(server, {"Authorization": secret}) == 401
    assert post(server, {"Authorization": f"Bearer {secret}"}) == 200
    assert post(server, {"Authorization": f"bearer {secret}"}) == 200
    client = McpClient(server.connect)
    try:
        assert ok(client.call("add_message", {"session_id": "s", "content": "hi"}))
        assert ok(client.call("get_memory_stats", {}))["total"] == 1
    finally:
        client.close()


def test_a_remote_address_needs_a_token(tmp_path: Path) -> None:
    """--allow-remote without a token exits with code 1 and one line."""
    done = subprocess.run(
        server_command("--http", "0.0.0.0:8765", "--allow-remote"),
        env=server_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert "needs --token" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "tiermem.db").exists()
