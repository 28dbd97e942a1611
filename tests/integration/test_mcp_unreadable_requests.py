"""Every request to ``tiermem mcp`` gets an answer: one the SDK cannot parse (JSON nested
deeper than its parser goes, a lone surrogate escape, a message of the wrong shape) gets
a JSON-RPC error carrying its id, over stdio and over HTTP, and the server keeps
serving. Raw JSON-RPC, with a timeout on every read."""

from __future__ import annotations

import http.client
import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

from mcp_types.version import LATEST_HANDSHAKE_VERSION

from .mcp_client import TIMEOUT, HttpServer, server_command, server_env

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": LATEST_HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def nested(depth: int) -> str:
    """The text of a JSON object nested ``depth`` levels deep."""
    return '{"a": ' * depth + "{}" + "}" * depth


def add_message(ident: int | str, content: str = '"x"', metadata: str = "null") -> str:
    """The text of an add_message call with ``content`` and ``metadata`` as JSON texts."""
    return (
        f'{{"jsonrpc": "2.0", "id": {json.dumps(ident)}, "method": "tools/call", "params": '
        f'{{"name": "add_message", "arguments": {{"session_id": "s", "content": {content}, '
        f'"metadata": {metadata}}}}}}}'
    )


#: Requests the SDK's parser refuses, by id; each must be answered with an error.
UNREADABLE: dict[int | str, str] = {
    2: add_message(2, metadata=nested(250)),
    3: add_message(3, content='"\\ud800"'),
    4: add_message(4, metadata=nested(20_000)),
    5: json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": "x"}),
    "six": add_message("six", metadata='{"deep": ' + nested(300) + "}"),
}


def lines_of(stream: IO[bytes]) -> queue.Queue[bytes]:
    """The lines of ``stream``, read by a thread, so that a test can wait with a timeout."""
    lines: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_stdio_answers_every_request(tmp_path: Path) -> None:
    """Over stdio each unreadable request is answered with an error carrying its id and
    tiermem's error form; then a valid request is served."""
    assert json.loads(add_message(1))["params"]["arguments"]["content"] == "x"
    assert '"\\ud800"' in UNREADABLE[3]
    process = subprocess.Popen(
        server_command("--url", f"sqlite:///{tmp_path / 'mcp.db'}"),
        env=server_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    answers: dict[object, dict[str, Any]] = {}
    try:
        lines = lines_of(process.stdout)
        process.stdin.write((json.dumps(INITIALIZE) + "\n").encode())
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        for line in UNREADABLE.values():
            process.stdin.write(line.encode() + b"\n")
        process.stdin.write(b'{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}\n')
        process.stdin.flush()
        while 9 not in answers:
            answer = json.loads(lines.get(timeout=TIMEOUT))
            answers[answer.get("id")] = answer
    finally:
        process.stdin.close()
        process.wait(timeout=TIMEOUT)
        process.stdout.close()
    for ident in UNREADABLE:
        assert ident in answers, f"request {ident!r} was never answered"
        error = answers[ident]["error"]
        assert error["code"] in (-32700, -32600)
        assert error["message"].startswith("InvalidArgument: "), error
    assert "too deeply" in answers[2]["error"]["message"]
    assert "lone surrogate" in answers[3]["error"]["message"]
    assert len(answers[9]["result"]["tools"]) > 0
    assert process.returncode == 0


def post(server: HttpServer, body: str, session: str | None) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=TIMEOUT)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    try:
        connection.request("POST", "/mcp", body=body.encode(), headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.headers.items()), response.read()
    finally:
        connection.close()


def test_http_answers_every_request_with_its_id(tmp_path: Path) -> None:
    """Over HTTP each unreadable request is answered with a JSON-RPC error carrying its
    id (not ``id: null``), in tiermem's error form; then a valid request is served."""
    server = HttpServer("--url", f"sqlite:///{tmp_path / 'mcp.db'}")
    try:
        status, headers, _ = post(server, json.dumps(INITIALIZE), None)
        assert status == 200
        session = {k.lower(): v for k, v in headers.items()}.get("mcp-session-id")
        note = '{"jsonrpc": "2.0", "method": "notifications/initialized"}'
        assert post(server, note, session)[0] == 202
        for ident in UNREADABLE:
            status, headers, body = post(server, UNREADABLE[ident], session)
            assert status == 400
            answer = json.loads(body)
            assert answer["id"] == ident
            assert answer["error"]["message"].startswith("InvalidArgument: "), answer
        listing = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
        status, _, body = post(server, listing, session)
        assert status == 200 and b'"id":9' in body
        assert server.alive()
    finally:
        server.stop()
