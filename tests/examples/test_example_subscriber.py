"""examples/subscriber.py writes every signal to a JSON-lines audit log and counts them."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from tiermem import ConversationMemory

EXAMPLE = Path(__file__).parents[2] / "examples" / "subscriber.py"


def _load() -> ModuleType:
    """Import the example as a module."""
    spec = importlib.util.spec_from_file_location("example_subscriber", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_audit_log_records_each_signal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The log beside the database holds every event in order, and the counters match it."""
    subscriber = _load()
    subscriber.main(url=f"sqlite:///{tmp_path}/x.db")
    log = tmp_path / "x.audit.jsonl"
    events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    names = [event["signal"] for event in events]
    assert names == ["entry:added"] * 8 + ["compression_failed", "compressed", "session:cleared"]
    assert {event["session_id"] for event in events} == {subscriber.SESSION}
    assert [event["seq"] for event in events[:8]] == list(range(1, 9))
    assert events[8]["error"] == "SummarizerFailed"
    assert events[9]["entries"] == 6 and events[9]["tokens_saved"] > 0
    assert events[10]["entries_removed"] == 8
    out = capsys.readouterr().out
    for name, count in [("entry:added", 8), ("compressed", 1), ("compression_failed", 1)]:
        assert f"{name:<20} {count}" in out


def test_audit_path_follows_the_database(tmp_path: Path) -> None:
    """The log goes beside a SQLite file, else into the working directory."""
    subscriber = _load()
    assert subscriber.audit_path(f"sqlite:///{tmp_path}/db.sqlite") == tmp_path / "db.audit.jsonl"
    assert subscriber.audit_path("sqlite://").name == "tiermem.audit.jsonl"
    assert subscriber.audit_path("postgresql+psycopg://u@h/db").name == "tiermem.audit.jsonl"


def test_receivers_are_disconnected_after_the_run(tmp_path: Path) -> None:
    """subscribe returns disconnect callables that stop further logging."""
    subscriber = _load()
    log, counter = tmp_path / "audit.jsonl", Counter[str]()
    with ConversationMemory(url=f"sqlite:///{tmp_path}/y.db") as mem:
        disconnects = subscriber.subscribe(mem, log, counter)
        mem.add_user_message("s", "observed")
        for disconnect in disconnects:
            disconnect()
        mem.add_user_message("s", "unobserved")
    assert counter == {"entry:added": 1}
    assert len(log.read_text(encoding="utf-8").splitlines()) == 1
