"""The harness itself: logs survive a cut-short record, the dump sees every change."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from tiermem import ConversationMemory

from .dump import canonical_dump
from .harness import read_log, write_log


def test_log_keeps_complete_records(tmp_path: Path) -> None:
    """A record cut short by a kill is dropped; every complete one before it is kept."""
    path = tmp_path / "log.jsonl"
    for index in range(3):
        write_log(path, {"i": index})
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"i": 3')
    assert [r["i"] for r in read_log(path)] == [0, 1, 2]


def test_dump_sees_every_change(engine: Engine) -> None:
    """The canonical dump changes with a write and is stable across reads without one."""
    memory = ConversationMemory(engine=engine)
    memory.add_user_message("s", "one")
    first = canonical_dump(engine)
    assert canonical_dump(engine) == first
    memory.get_stats("s")  # a read without an access record
    assert canonical_dump(engine) == first
    memory.add_user_message("s", "two")
    assert canonical_dump(engine) != first
    memory.close()
