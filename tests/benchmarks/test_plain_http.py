"""benchmarks/plain_http.py: the load generator's HTTP/1.1 client, against a small
asyncio server that answers, drops and stalls as told."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
from plain_http import HttpConnection, TransportError


class Server:
    """Answers each request with its JSON body echoed, unless told to drop the
    connection (``drop``), stall (``stall``) or close after answering (``close``)."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                body = json.loads(await reader.readexactly(length))
                if body.get("do") == "drop":
                    writer.close()
                    return
                if body.get("do") == "stall":
                    await asyncio.sleep(30)
                idle_close = body.get("do") == "idle-close"
                close = body.get("do") == "close"
                data = json.dumps({"echo": body}).encode()
                headers = f"HTTP/1.1 201 Created\r\nContent-Length: {len(data)}\r\n"
                headers += "Connection: close\r\n" if close else ""
                writer.write(headers.encode() + b"\r\n" + data)
                await writer.drain()
                if close:
                    writer.close()
                    return
                if idle_close:  # as a keep-alive timeout does, after answering
                    await asyncio.sleep(0.05)
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    @property
    def port(self) -> int:
        assert self.server is not None
        port: int = self.server.sockets[0].getsockname()[1]
        return port


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    served = Server()
    served.server = await asyncio.start_server(served.handle, "127.0.0.1", 0)
    yield served
    served.server.close()
    for writer in served.writers:  # a stalled handler's connection is still open
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    await served.server.wait_closed()


async def test_requests_share_one_kept_alive_connection(server: Server) -> None:
    """Each answer's status and JSON come back; every request used one connection."""
    client = HttpConnection("127.0.0.1", server.port, timeout=5)
    for n in range(3):
        assert await client.post_json("/chat", {"n": n, "text": "é"}) == (
            201,
            {"echo": {"n": n, "text": "é"}},
        )
    await client.aclose()
    assert server.connections == 1


async def test_a_dropped_connection_is_a_transport_error_and_the_next_request_reconnects(
    server: Server,
) -> None:
    """A connection the server closed without answering raises TransportError; the
    next request opens a new connection and is answered."""
    client = HttpConnection("127.0.0.1", server.port, timeout=5)
    with pytest.raises(TransportError):
        await client.post_json("/chat", {"do": "drop"})
    assert await client.post_json("/chat", {"n": 1}) == (201, {"echo": {"n": 1}})
    await client.aclose()
    assert server.connections == 2


async def test_an_answer_with_connection_close_ends_the_connection(server: Server) -> None:
    """After an answer that says ``Connection: close`` the next request reconnects."""
    client = HttpConnection("127.0.0.1", server.port, timeout=5)
    assert (await client.post_json("/chat", {"do": "close"}))[0] == 201
    assert (await client.post_json("/chat", {"n": 2}))[0] == 201
    await client.aclose()
    assert server.connections == 2


async def test_a_connection_the_server_closed_while_idle_is_not_an_error(
    server: Server,
) -> None:
    """A kept-alive connection the server closed after answering (its keep-alive
    timeout) is replaced before the next request, which is answered, not failed."""
    client = HttpConnection("127.0.0.1", server.port, timeout=5)
    assert (await client.post_json("/chat", {"do": "idle-close"}))[0] == 201
    await asyncio.sleep(0.2)  # the server has closed it meanwhile
    assert await client.post_json("/chat", {"n": 4}) == (201, {"echo": {"n": 4}})
    await client.aclose()
    assert server.connections == 2


async def test_a_late_answer_is_a_transport_error(server: Server) -> None:
    """No answer within the timeout raises TransportError (and closes the connection)."""
    client = HttpConnection("127.0.0.1", server.port, timeout=0.2)
    with pytest.raises(TransportError, match="TimeoutError"):
        await client.post_json("/chat", {"do": "stall"})
    client.timeout = 5
    assert (await client.post_json("/chat", {"n": 3}))[0] == 201
    await client.aclose()


async def test_a_refused_connection_is_a_transport_error(server: Server) -> None:
    """Nobody listening raises TransportError, not an OSError."""
    port = server.port
    assert server.server is not None
    server.server.close()
    await server.server.wait_closed()
    with pytest.raises(TransportError):
        await HttpConnection("127.0.0.1", port, timeout=5).post_json("/chat", {})
