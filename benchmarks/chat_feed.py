"""The change-feed side of ``chat_load.py``: the subscriber process and its checks.

The subscriber is ``examples/chat_service.py subscriber``, following the service's
project under one consumer name and writing a JSON line per event (with when it was
made and when it arrived). After the load, :func:`check_feed` reads that log back
against the stored entries: every stored entry's ``entry:added`` event arrived at
least once, the first deliveries of each session came in ``seq`` order, and the lag
from an event's creation to its first receipt (events of the conversations only: the
warm-up's were made while the subscriber started).
"""

from __future__ import annotations

import contextlib
import json
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SERVICE = ROOT / "examples" / "chat_service.py"
CONSUMER = "load-subscriber"


class Subscriber:
    """The subscriber process, appending to ``log``; restartable under its name."""

    def __init__(self, url: str, project: str, log: Path) -> None:
        self.command = [sys.executable, str(SERVICE), "subscriber", "--url", url]
        self.command += ["--project", project, "--consumer", CONSUMER, "--log", str(log)]
        self.log = log
        self.process = subprocess.Popen(self.command)

    def kill(self) -> None:
        """SIGKILL it: what it wrote but did not acknowledge comes again."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def restart(self) -> None:
        """Start it again under the same consumer name."""
        self.process = subprocess.Popen(self.command)

    def wait_live(self, events: int, timeout: float = 60.0) -> bool:
        """Wait until the log holds ``events`` events (those made before the load):
        from then on the subscriber is following, not starting up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(read_log(self.log)) >= events:
                return True
            time.sleep(0.1)
        return False

    def received(self) -> set[int]:
        """The entry ids of the ``entry:added`` events in the log so far."""
        return {
            record["entry_id"] for record in read_log(self.log) if record["kind"] == "entry:added"
        }

    def wait_for(self, entry_ids: set[int], timeout: float = 60.0) -> bool:
        """Wait until every one of ``entry_ids`` has arrived; whether it did."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if entry_ids <= self.received():
                return True
            time.sleep(0.2)
        return entry_ids <= self.received()

    def stop(self) -> None:
        """SIGTERM it (it acknowledges what it wrote and exits)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def read_log(log: Path) -> list[dict[str, Any]]:
    """The log's records (a line cut short by a kill is left out)."""
    if not log.exists():
        return []
    records = []
    for line in log.read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            records.append(json.loads(line))
    return records


@dataclass
class FeedCheck:
    """What the subscriber's log shows."""

    events: int = 0
    redelivered: int = 0
    missing: int = 0
    out_of_order: int = 0
    lag_p50_ms: float = 0.0
    lag_p99_ms: float = 0.0
    lag_max_ms: float = 0.0

    @property
    def correct(self) -> bool:
        """Every stored entry's event arrived, each session's in order."""
        return self.missing == 0 and self.out_of_order == 0


def check_feed(log: Path, stored: Mapping[str, set[int]]) -> FeedCheck:
    """Check the log against ``stored`` (session id to the ids of its entries)."""
    check = FeedCheck()
    seen: set[str] = set()
    last_seq: dict[str, int] = {}
    arrived: set[int] = set()
    lags: list[float] = []
    for record in read_log(log):
        check.events += 1
        position = str(record["position"])
        if position in seen:
            check.redelivered += 1
            continue
        seen.add(position)
        session = str(record["session_id"])
        if session not in stored:  # the warm-up's, made before the subscriber started
            continue
        created = datetime.fromisoformat(str(record["created_at"]))
        received = datetime.fromisoformat(str(record["received_at"]))
        lags.append((received - created).total_seconds() * 1000)
        if record["kind"] != "entry:added":
            continue
        arrived.add(int(str(record["entry_id"])))
        seq = int(str(record["seq"]))
        if seq <= last_seq.get(session, 0):
            check.out_of_order += 1
        last_seq[session] = seq
    check.missing = sum(len(ids - arrived) for ids in stored.values())
    if lags:
        cuts = statistics.quantiles(lags, n=100, method="inclusive") if len(lags) > 1 else lags
        check.lag_p50_ms = round(statistics.median(lags), 1)
        check.lag_p99_ms = round(cuts[98] if len(lags) > 1 else lags[0], 1)
        check.lag_max_ms = round(max(lags), 1)
    return check
