"""Running the MCP server: stdio (the default) or streamable HTTP.

Over HTTP the server has no authentication, so it listens on a loopback address
unless the caller explicitly allows another one (``tiermem mcp --allow-remote``).
"""

from __future__ import annotations

import ipaddress
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from ..errors import InvalidArgument
from ..memory import ConversationMemory
from .server import MemoryTools, build_server

__all__ = ["HTTP_PATH", "is_loopback_host", "parse_http_address", "serve"]

#: Where the streamable HTTP endpoint is served.
HTTP_PATH = "/mcp"


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback IP address (names other than
    ``localhost`` are not resolved, so they do not count)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_http_address(address: str, *, allow_remote: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as a host and a port.

    Raises:
        InvalidArgument: a malformed address or port, or a host that is not a loopback
            address without ``allow_remote``.
    """
    host, sep, port_text = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise InvalidArgument(f"--http takes HOST:PORT (e.g. 127.0.0.1:8765), got {address!r}")
    if not allow_remote and not is_loopback_host(host):
        raise InvalidArgument(
            f"{host} is not a loopback address: the MCP server has no authentication, "
            "so pass --allow-remote to listen on it"
        )
    return host, int(port_text)


async def _serve_http(server: MCPServer[Any], host: str, port: int) -> None:
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    shown = f"[{host}]" if ":" in host else host
    sys.stderr.write(f"tiermem MCP server on http://{shown}:{port}{HTTP_PATH}\n")
    sys.stderr.flush()
    await uvicorn.Server(config).serve()


def serve(
    memory: ConversationMemory,
    *,
    read_only: bool = False,
    all_projects: bool = False,
    http: tuple[str, int] | None = None,
) -> None:
    """Serve ``memory``'s tools until the client goes away (stdio) or the process is
    interrupted (HTTP); closes the memories at the end.

    Args:
        memory: the memory of the server's project.
        read_only: serve only the reading tools.
        all_projects: let tools name any project.
        http: serve streamable HTTP on this host and port instead of stdio.
    """
    tools = MemoryTools(memory, read_only=read_only, all_projects=all_projects)
    server = build_server(tools)
    try:
        if http is None:
            anyio.run(server.run_stdio_async)
        else:
            anyio.run(_serve_http, server, *http)
    except KeyboardInterrupt:
        pass  # an interrupted server exits quietly
    finally:
        tools.close()
