"""What every HTTP request to ``tiermem mcp --http`` passes before the MCP SDK sees it.

* **Host and Origin** (on a loopback address): a web page the user visits can
  make the browser send requests to a loopback port, and by DNS rebinding even
  read the answers; such requests carry the page's site in ``Host`` (rebinding)
  or ``Origin`` (a cross-site request). Both must name a loopback host:
  ``localhost`` or any loopback IP (all of 127/8, ``::1`` in any spelling, an
  IPv4-mapped ``::ffff:127.x.y.z``), compared without regard to case. A
  request without ``Origin`` (not from a browser) passes. A refused ``Host``
  gets 421, a refused ``Origin`` 403.
* **A bearer token** (``--token`` / ``TIERMEM_MCP_TOKEN``): when the server has
  one, every request must carry ``Authorization: Bearer <token>``, else 401.
* **Unreadable requests**: a POST body that does not parse as JSON, or is no
  JSON-RPC message, gets a JSON-RPC error carrying the request's id
  (:mod:`tiermem.mcp.wire`), where the SDK would answer with ``id: null``.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import pydantic_core
from mcp.types import JSONRPCError, jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, Response

from .wire import error_for_text, error_for_validation

__all__ = [
    "HttpGuard",
    "host_of_header",
    "is_loopback_host",
    "is_loopback_origin",
    "unreadable_answer",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback IP address, in any case and
    any IPv6 spelling (brackets, zeros written out, IPv4-mapped); other names are
    not resolved, so they do not count."""
    name = host.strip().lower().rstrip(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def host_of_header(value: str) -> str | None:
    """The host of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``), or
    ``None`` when it is malformed."""
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :]
        if end < 0 or (rest and not (rest[:1] == ":" and rest[1:].isdigit())):
            return None
        return value[1:end]
    name, sep, port = value.rpartition(":")
    if not sep:
        return value
    if ":" in name or not port.isdigit():
        return None
    return name


def is_loopback_origin(origin: str) -> bool:
    """Whether an ``Origin`` header names an http(s) site on a loopback host (the
    opaque origin ``null`` does not)."""
    try:
        parts = urlsplit(origin)
        parts.port  # noqa: B018 - raises ValueError on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and is_loopback_host(parts.hostname or "")


def unreadable_answer(body: bytes) -> JSONRPCError | None:
    """The error answering a POST body the SDK cannot read (not JSON, or not a
    JSON-RPC message) when it is a request with an id, else ``None``."""
    try:
        parsed = pydantic_core.from_json(body)
    except ValueError as error:
        return error_for_text(body.decode("utf-8", "replace"), str(error))
    if not isinstance(parsed, dict):
        return None  # a batch or a scalar: the SDK answers it
    try:
        jsonrpc_message_adapter.validate_python(parsed, by_name=False)
    except ValidationError as error:
        return error_for_validation(error)
    return None


class HttpGuard:
    """An ASGI middleware in front of the MCP app (see the module's docstring).

    Args:
        app: the MCP SDK's streamable HTTP app.
        loopback: the server listens on a loopback address: check Host and Origin.
        token: the bearer token every request must carry, if any.
        max_body: bodies larger than this go to the app unread (it refuses them).
    """

    def __init__(self, app: App, *, loopback: bool, token: str | None, max_body: int) -> None:
        self.app = app
        self.loopback = loopback
        self.token = None if token is None else token.encode()
        self.max_body = max_body

    def refusal(self, headers: Headers) -> Response | None:
        """The answer to a request whose headers do not pass, or ``None``."""
        if self.loopback:
            host = host_of_header(headers.get("host", ""))
            if host is None or not is_loopback_host(host):
                return Response("Invalid Host header", status_code=421)
            origin = headers.get("origin")
            if origin is not None and not is_loopback_origin(origin):
                return Response("Invalid Origin header", status_code=403)
        if self.token is not None:
            scheme, _, given = headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                given.strip().encode(), self.token
            ):
                return Response(
                    "A bearer token is required",
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = self.refusal(Headers(scope=scope))
        if refused is not None:
            await refused(scope, receive, send)
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, complete, replay = await self._read_body(receive)
        answer = unreadable_answer(body) if complete else None
        if answer is not None:
            content = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
            await JSONResponse(content, status_code=400)(scope, receive, send)
            return
        await self.app(scope, replay, send)

    async def _read_body(self, receive: Receive) -> tuple[bytes, bool, Receive]:
        """The body (up to ``max_body`` bytes), whether it is all of it, and a
        ``receive`` that hands the app the same messages again."""
        messages: list[Message] = []
        size = 0
        complete = False
        while size <= self.max_body:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if not message.get("more_body", False):
                complete = size <= self.max_body
                break
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")

        async def replay() -> Message:
            if messages:
                return messages.pop(0)
            return await receive()

        return body, complete, replay
