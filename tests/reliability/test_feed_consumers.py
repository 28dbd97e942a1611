"""The change feed across processes: a subscriber process killed with SIGKILL and
started again resumes from its acknowledged position, so every event written by
other processes arrives at least once, in commit order within each session."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tiermem import ConversationMemory

from ..conftest import store_url

pytestmark = pytest.mark.slow

#: A subscriber: follows consumer "audit", writes each event to its log (flushed)
#: and then acknowledges it, as a real consumer handles before it acknowledges.
SUBSCRIBER = textwrap.dedent(
    """
    import json, os, sys
    from tiermem import ConversationMemory
    url, log = sys.argv[1], sys.argv[2]
    memory = ConversationMemory(url)
    with open(log, "a", encoding="utf-8") as out:
        out.write(json.dumps({"start": os.getpid()}) + "\\n")
        out.flush()
        for event in memory.feed.follow("audit", poll_interval=0.05):
            out.write(json.dumps([event.session_id, event.payload["seq"]]) + "\\n")
            out.flush()
            memory.feed.ack("audit", event)
    """
)

#: A writer: appends ``count`` messages round-robin over four sessions.
WRITER = textwrap.dedent(
    """
    import sys
    from tiermem import ConversationMemory
    url, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    memory = ConversationMemory(url)
    for number in range(count):
        memory.add_user_message(f"{name}-{number % 4}", f"message {number}")
    memory.close()
    """
)


def _start(script: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", script, *args], env=dict(os.environ))


def _runs(log: Path) -> list[list[tuple[str, int]]]:
    """The log's lines, one list per subscriber process."""
    runs: list[list[tuple[str, int]]] = []
    for line in log.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if isinstance(item, dict):
            runs.append([])
        else:
            runs[-1].append((item[0], item[1]))
    return runs


def test_killed_subscriber_resumes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Two writer processes, and a subscriber killed twice mid-stream: every entry's
    event is received, each subscriber run sees each session's events in order, and
    a restarted run starts at or before where the killed one had acknowledged."""
    url = store_url(backend, tmp_path, request)
    ConversationMemory(url).close()  # the schema, before four processes race to make it
    log = tmp_path / "audit.jsonl"
    writers = [_start(WRITER, url, name, "150") for name in ("w1", "w2")]
    subscriber = _start(SUBSCRIBER, url, str(log))
    try:
        for _ in range(2):
            deadline = time.monotonic() + 60
            before = len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0
            while time.monotonic() < deadline:
                seen = len(log.read_text(encoding="utf-8").splitlines()) if log.exists() else 0
                if seen > before + 20:
                    break
                time.sleep(0.05)
            subscriber.send_signal(signal.SIGKILL)
            subscriber.wait()
            subscriber = _start(SUBSCRIBER, url, str(log))
        for writer in writers:
            assert writer.wait(timeout=120) == 0
        expected = {(f"{name}-{n % 4}", n // 4 + 1) for name in ("w1", "w2") for n in range(150)}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            received = {pair for run in _runs(log) for pair in run}
            if received >= expected:
                break
            time.sleep(0.1)
    finally:
        subscriber.send_signal(signal.SIGKILL)
        subscriber.wait()
        for writer in writers:
            writer.kill()
            writer.wait()
    runs = _runs(log)
    assert len(runs) == 3
    assert {pair for run in runs for pair in run} == expected
    for run in runs:
        last: dict[str, int] = {}
        for session, seq in run:
            assert seq > last.get(session, 0), f"{session} out of order: {seq} after {last}"
            last[session] = seq
    # Resumed, not restarted: a later run does not begin from the first event again.
    assert all(run and run[0] != runs[0][0] for run in runs[1:] if runs[0])
