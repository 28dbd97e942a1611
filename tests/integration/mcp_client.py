"""Starting ``tiermem mcp`` as a subprocess and talking to it with the MCP SDK's own
client (over stdio or streamable HTTP), from synchronous tests.

The client session lives on an event loop in its own thread, so one session can
serve every test of a module; :meth:`McpClient.call` blocks until the answer.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, TypeVar

import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, Tool

T = TypeVar("T")
#: Seconds a request (or the server's start) may take before the test fails.
TIMEOUT = 60.0
Streams = tuple[Any, Any]


def server_command(*args: str) -> list[str]:
    """The command line of ``tiermem mcp`` with ``args``."""
    return [sys.executable, "-m", "tiermem.cli", "mcp", *args]


def server_env() -> dict[str, str]:
    """What the server needs of this environment: the import path of the sources."""
    return {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}


def free_port() -> int:
    """A loopback TCP port nothing listens on (as of now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stdio(
    *args: str, env: dict[str, str] | None = None
) -> Callable[[], AbstractAsyncContextManager[Streams]]:
    """Connect by starting ``tiermem mcp args`` over stdio (with ``env`` added to its
    environment)."""
    command = server_command(*args)
    params = StdioServerParameters(
        command=command[0], args=command[1:], env={**server_env(), **(env or {})}
    )
    return lambda: stdio_client(params)


class HttpServer:
    """``tiermem mcp --http HOST:PORT args`` running as a subprocess.

    Args:
        host: the address to listen on, as ``--http`` takes it (``[::1]`` for IPv6).
        env: more environment variables of the server.
        token: the bearer token the client sends.
    """

    def __init__(
        self,
        *args: str,
        host: str = "127.0.0.1",
        env: dict[str, str] | None = None,
        token: str | None = None,
    ) -> None:
        self.port = free_port()
        self.host = host
        self.token = token
        self.url = f"http://{host}:{self.port}/mcp"
        self.process = subprocess.Popen(
            server_command("--http", f"{host}:{self.port}", *args),
            env={**os.environ, **server_env(), **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + TIMEOUT
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited: {self.stderr()}")
            try:
                socket.create_connection((host.strip("[]"), self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.process.poll() is None

    def stderr(self) -> str:
        """What the server wrote on stderr (once it has exited)."""
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")

    def connect(self) -> AbstractAsyncContextManager[Streams]:
        """A streamable HTTP transport to the server."""
        return _http_streams(self.url, self.token)

    def stop(self) -> None:
        """Terminate the server and wait for it."""
        self.process.terminate()
        try:
            self.process.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stderr is not None:
            self.process.stderr.close()


@asynccontextmanager
async def _http_streams(url: str, token: str | None) -> AsyncIterator[Streams]:
    if token is None:
        async with streamable_http_client(url) as streams:
            yield streams[0], streams[1]
        return
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=TIMEOUT) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams[0], streams[1]


class McpClient:
    """An initialized MCP client session on a thread of its own.

    Args:
        connect: opens the transport (its read and write streams).
    """

    def __init__(self, connect: Callable[[], AbstractAsyncContextManager[Streams]]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._stop: asyncio.Event | None = None
        self._session: ClientSession | None = None
        ready: asyncio.Future[None] = self._loop.create_future()
        self._main = asyncio.run_coroutine_threadsafe(self._hold(connect, ready), self._loop)
        asyncio.run_coroutine_threadsafe(_wait(ready), self._loop).result(TIMEOUT)

    async def _hold(
        self,
        connect: Callable[[], AbstractAsyncContextManager[Streams]],
        ready: asyncio.Future[None],
    ) -> None:
        self._stop = asyncio.Event()
        try:
            async with connect() as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                self._session = session
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error)
            raise

    def _do(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(TIMEOUT)

    def call(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        """Call a tool and return its result."""
        assert self._session is not None
        return self._do(self._session.call_tool(name, arguments or {}))

    def tools(self) -> Sequence[Tool]:
        """The tools the server lists."""
        assert self._session is not None
        return self._do(self._session.list_tools()).tools

    def close(self) -> None:
        """End the session (a stdio server exits with it) and the thread."""
        stop = self._stop
        if stop is not None:
            self._loop.call_soon_threadsafe(stop.set)
        try:
            self._main.result(TIMEOUT)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(TIMEOUT)
            self._loop.close()


async def _wait(future: asyncio.Future[None]) -> None:
    await future


def text(result: CallToolResult) -> str:
    """The text of a result's first content block."""
    block = result.content[0]
    assert block.type == "text"
    return str(block.text)


def ok(result: CallToolResult) -> dict[str, Any]:
    """The structured content of a successful result (fails on a tool error)."""
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content
