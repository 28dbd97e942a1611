"""``tiermem mcp`` is configured by flags and environment: a chat model for summaries
(``provider:model`` through LangChain's init_chat_model, here an OpenAI-compatible fake
on a loopback port), the budgets of MemoryConfig; bad settings are one line and exit 1.
Argument errors come back in tiermem's error form, and counts have their plurals."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tiermem import ConversationMemory

from ..conftest import store_url
from .mcp_client import TIMEOUT, McpClient, ok, server_command, server_env, stdio, text

SUMMARY = "SUMMARY: the user listed the cities of the trip"


class FakeOpenAI(BaseHTTPRequestHandler):
    """Answers every chat completion with :data:`SUMMARY`; counts the calls."""

    calls: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - the handler's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        FakeOpenAI.calls.append(json.loads(body))
        answer = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "fake-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": SUMMARY},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(name="openai_env")
def fixture_openai_env() -> Iterator[dict[str, str]]:
    """The environment that points LangChain's OpenAI provider at the fake."""
    FakeOpenAI.calls.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    yield {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "test-key"}
    server.shutdown()
    server.server_close()


@pytest.fixture(name="url")
def fixture_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    return store_url(backend, tmp_path, request)


TRIP = [
    f"On day {day} of the trip we visit {city}, walk through the old town, see the "
    "museum by the river and eat dinner at a small place the hotel recommended."
    for day, city in enumerate(["Paris", "Lisbon", "Oslo", "Kyoto", "Lima", "Cairo"] * 2, 1)
]


@pytest.mark.parametrize("how", ["flags", "env"])
def test_chat_model_and_budgets_shape_the_context(
    how: str, url: str, openai_env: dict[str, str]
) -> None:
    """With a chat model and small budgets, a session's older messages are summarized by
    that model: its summary is in the context, and the model was called."""
    settings = {
        "TIERMEM_CHAT_MODEL": "openai:fake-model",
        "TIERMEM_MAX_TOKENS": "400",
        "TIERMEM_MAX_ENTRIES": "6",
        "TIERMEM_RECENT_WINDOW": "2",
    }
    if how == "flags":
        flags = ["--chat-model", "openai:fake-model", "--max-tokens", "400"]
        flags += ["--max-entries", "6", "--recent-window", "2"]
        client = McpClient(stdio("--url", url, *flags, env=openai_env))
    else:
        client = McpClient(stdio("--url", url, env={**openai_env, **settings}))
    try:
        for message in TRIP:
            ok(client.call("add_message", {"session_id": "trip", "content": message}))
        context = ok(client.call("get_context", {"session_id": "trip"}))["context"]
    finally:
        client.close()
    assert SUMMARY in context
    assert FakeOpenAI.calls and FakeOpenAI.calls[0]["model"] == "fake-model"
    with ConversationMemory(url) as memory:
        assert memory.get_stats("trip").compressed_entries >= 6


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--max-tokens", "0"], "max_tokens"),
        (["--recent-window", "-1"], "recent_window"),
        (["--chat-model", "nosuchprovider:model"], "summarizer 'nosuchprovider:model'"),
    ],
)
def test_bad_settings_are_one_line(args: list[str], expected: str, tmp_path: Path) -> None:
    """A setting out of range or a chat model that cannot be made: exit 1, one line,
    no database created."""
    done = subprocess.run(
        server_command("--url", f"sqlite:///{tmp_path / 'x.db'}", *args),
        env=server_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert not (tmp_path / "x.db").exists()


def test_argument_errors_and_plurals(url: str) -> None:
    """Bad arguments are 'InvalidArgument: ...' naming the field and value, with no
    pydantic text or link; one hit, one rule and one session are singular."""
    client = McpClient(stdio("--url", url))
    try:
        bad = client.call("search_memory", {"query": "x", "limit": 0})
        assert bad.is_error
        assert text(bad).startswith("InvalidArgument: bad arguments for search_memory: limit:")
        assert "got 0" in text(bad)
        missing = client.call("learn", {"key": "k"})
        assert text(missing).startswith("InvalidArgument: bad arguments for learn: value:")
        wrong = client.call("load_context", {"limit": "many"})
        assert text(wrong).startswith("InvalidArgument: bad arguments for load_context: limit:")
        for result in (bad, missing, wrong):
            assert "pydantic" not in text(result) and "http" not in text(result)
            assert "\n" not in text(result)
        ok(client.call("add_message", {"session_id": "s", "content": "hello Oslo"}))
        ok(client.call("add_rule", {"condition": "user asks about Oslo", "action": "say hi"}))
        assert text(client.call("search_memory", {"query": "Oslo"})).startswith("1 hit\n")
        assert text(client.call("match_rules", {"situation": "Oslo"})).startswith("1 rule\n")
        assert text(client.call("load_context", {})).startswith("1 session of project")
        stats = text(client.call("get_memory_stats", {}))
        assert "1 session (" in stats and "1 layer item (" in stats
    finally:
        client.close()
