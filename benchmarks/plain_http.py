"""A small HTTP/1.1 client for load generators: JSON over one kept-alive connection.

A load generator shares the machine with the service it measures, so every
millisecond of CPU it spends per request is taken from the service. ``httpx``
spent about 1.15 ms of CPU per request in ``chat_load.py``, more than serving a
turn with no memory does; this client writes a request and parses the answer's
status line and headers with asyncio streams and nothing else, for a fraction of
that. It speaks only what a benchmark needs: ``POST`` a JSON body, read an answer
framed by ``Content-Length``, reconnect after the server dropped the connection.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

__all__ = ["HttpConnection", "TransportError"]


class TransportError(Exception):
    """The request got no complete answer: refused, dropped, cut short or late."""


class HttpConnection:
    """One kept-alive HTTP/1.1 connection to ``host:port``, opened on first use and
    again after a failure. Requests on one connection go one at a time, as a browser
    tab's do; use one per simulated user."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def post_json(self, path: str, body: Any) -> tuple[int, Any]:
        """``POST`` ``body`` as JSON to ``path``; the status and the decoded answer.

        Raises:
            TransportError: no complete answer within ``timeout`` seconds (the
                connection is closed; the next request opens a new one).
        """
        payload = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        ).encode()
        try:
            # TimeoutError is an OSError, IncompleteReadError an EOFError.
            status, data = await asyncio.wait_for(self._exchange(head + payload), self.timeout)
        except (OSError, EOFError, asyncio.LimitOverrunError, ValueError) as error:
            await self.aclose()
            raise TransportError(f"{type(error).__name__}: {error}") from error
        return status, json.loads(data) if data else None

    async def _exchange(self, request: bytes) -> tuple[int, bytes]:
        if self._streams is not None and self._streams[0].at_eof():
            # The server closed the idle connection (its keep-alive timeout): a new
            # one, as every HTTP client does, rather than a request sent into it.
            await self.aclose()
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._streams
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length: int | None = None
        keep_alive = True
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                keep_alive = False
        if length is None:
            raise ValueError("the answer has no Content-Length")
        data = await reader.readexactly(length)
        if not keep_alive:
            await self.aclose()
        return status, data

    async def aclose(self) -> None:
        """Close the connection (a later request opens a new one)."""
        if self._streams is not None:
            writer = self._streams[1]
            self._streams = None
            writer.close()
            try:
                await writer.wait_closed()
            except OSError:
                pass  # already reset by the server: closed either way
