"""Running the MCP server: stdio (the default) or streamable HTTP.

Over HTTP the server listens on a loopback address, where it checks every
request's ``Host`` and ``Origin`` (:mod:`tiermem.mcp.http_guard`), and may
require a bearer token; another address needs both ``--allow-remote`` and a
token. On either transport a request the SDK cannot parse is answered with a
JSON-RPC error carrying its id (:mod:`tiermem.mcp.wire`).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import (
    DEFAULT_MAX_REQUEST_BODY_SIZE,
    TransportSecuritySettings,
)
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ..errors import InvalidArgument
from ..memory import ConversationMemory
from .http_guard import HttpGuard, is_loopback_host
from .server import MemoryTools, build_server
from .wire import error_for_validation

__all__ = ["HTTP_PATH", "is_loopback_host", "parse_http_address", "serve"]

#: Where the streamable HTTP endpoint is served.
HTTP_PATH = "/mcp"


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
            f"{host} is not a loopback address: pass --allow-remote and a --token to listen on it"
        )
    return host, int(port_text)


async def _serve_stdio(server: MCPServer[Any]) -> None:
    """``server.run_stdio_async()``, except that a request the SDK cannot parse is
    answered with a JSON-RPC error instead of being dropped."""
    lowlevel = server._lowlevel_server  # the SDK offers no public way to filter its input
    async with stdio_server() as (read, write):
        sender, receiver = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def forward() -> None:
            async with sender:
                async for item in read:
                    if isinstance(item, ValidationError):
                        answer = error_for_validation(item)
                        if answer is not None:
                            await write.send(SessionMessage(answer))
                            continue
                    await sender.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(forward)
            await lowlevel.run(receiver, write, lowlevel.create_initialization_options())
            group.cancel_scope.cancel()


async def _serve_http(server: MCPServer[Any], host: str, port: int, token: str | None) -> None:
    import uvicorn

    # The SDK checks Host and Origin for three spellings of loopback only; the guard
    # checks them for every one, so the SDK's own check is off.
    app = server.streamable_http_app(
        streamable_http_path=HTTP_PATH,
        host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    guarded = HttpGuard(
        app,
        loopback=is_loopback_host(host),
        token=token,
        max_body=DEFAULT_MAX_REQUEST_BODY_SIZE,
    )
    config = uvicorn.Config(guarded, host=host, port=port, log_level="warning")
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
    token: str | None = None,
) -> None:
    """Serve ``memory``'s tools until the client goes away (stdio) or the process is
    interrupted (HTTP); closes the memories at the end.

    Args:
        memory: the memory of the server's project.
        read_only: serve only the reading tools.
        all_projects: let tools name any project.
        http: serve streamable HTTP on this host and port instead of stdio.
        token: over HTTP, the bearer token every request must carry.
    """
    tools = MemoryTools(memory, read_only=read_only, all_projects=all_projects)
    server = build_server(tools)
    try:
        if http is None:
            anyio.run(_serve_stdio, server)
        else:
            anyio.run(_serve_http, server, *http, token)
    except KeyboardInterrupt:
        pass  # an interrupted server exits quietly
    finally:
        tools.close()
