"""T09: SIGKILL during import and during prune is all or nothing."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage

from tiermem import SessionState

from .harness import (
    StoreSpec,
    join_all,
    kill,
    read_log,
    spawn,
    store_dump,
    store_healthy,
    wait_backends_gone,
    wait_for_hit,
)
from .workers import days_ago, import_file, op_messages, opened, prune_now

pytestmark = pytest.mark.slow

ENTRIES = 2_000


@pytest.fixture(name="export_file", scope="module")
def fixture_export_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The export of a 2,000-entry session (tool groups and a summary included)."""
    from .workers import NO_AUTO

    folder = tmp_path_factory.mktemp("export")
    source = StoreSpec("sqlite", str(folder / "source.db"))
    messages: list[BaseMessage] = []
    index = 0
    while len(messages) < ENTRIES:
        messages += op_messages("big", index, padding=index % 50)
        index += 1
    with opened(source, config=NO_AUTO.replace(recent_window=1000)) as memory:
        memory.add_messages("big", messages[:ENTRIES])
        memory.compress("big", force=True)
        state = memory.export_session("big")
    path = folder / "big.json"
    path.write_text(state.to_json(), encoding="utf-8")
    return path


def _seed_other(store: StoreSpec) -> None:
    with opened(store) as memory:
        memory.add_user_message("other", "unrelated session")


@pytest.mark.parametrize("failpoint", ["import.mid_batch", "transaction.before_commit"])
def test_kill_during_import(
    store: StoreSpec, fp_dir: Path, tmp_path: Path, export_file: Path, failpoint: str
) -> None:
    """An import killed mid-batch or before its commit leaves no trace of the session."""
    _seed_other(store)
    before = store_dump(store)
    worker = spawn(
        import_file,
        store,
        str(export_file),
        str(tmp_path / "log.jsonl"),
        failpoints=f"{failpoint}=pause",
        fp_dir=fp_dir,
    )
    try:
        wait_for_hit(fp_dir, failpoint, worker, timeout=120)
    finally:
        kill(worker)
    wait_backends_gone(store)
    store_healthy(store)
    assert store_dump(store) == before


def test_import_killed_at_random_times(store: StoreSpec, tmp_path: Path, export_file: Path) -> None:
    """Imports killed at random moments leave the session absent or complete, never partial;
    an import that finishes reproduces the export byte for byte."""
    _seed_other(store)
    source = SessionState.from_json(export_file.read_bytes()).to_json()
    rng = random.Random(11)
    outcomes = set()
    for attempt in range(4):
        log = tmp_path / f"log{attempt}.jsonl"
        worker = spawn(import_file, store, str(export_file), str(log))
        if attempt < 3:
            time.sleep(rng.uniform(1.0, 3.0))
            kill(worker)
        else:
            join_all([worker], 120)
        wait_backends_gone(store)
        store_healthy(store)
        with opened(store) as memory:
            present = [info.session_id for info in memory.list_sessions()]
            if "big" in present:
                assert memory.export_session("big").to_json() == source
                outcomes.add("complete")
                memory.clear_session("big")
            else:
                assert read_log(log) == []
                outcomes.add("absent")
    assert "complete" in outcomes


def _seed_expired(store: StoreSpec) -> None:
    with opened(store, clock=days_ago(40)) as memory:
        for index in range(5):
            memory.add_messages(f"old{index}", op_messages("old", 4))
    with opened(store) as memory:
        memory.add_user_message("fresh", "kept")


def test_kill_during_prune(store: StoreSpec, fp_dir: Path, tmp_path: Path) -> None:
    """A prune killed after selecting its batch deletes nothing; the next prune deletes
    every expired session with its entries, and only those."""
    _seed_expired(store)
    before = store_dump(store)
    log = tmp_path / "log.jsonl"
    worker = spawn(prune_now, store, str(log), failpoints="prune.after_select=pause", fp_dir=fp_dir)
    try:
        wait_for_hit(fp_dir, "prune.after_select", worker)
    finally:
        kill(worker)
    wait_backends_gone(store)
    store_healthy(store)
    assert store_dump(store) == before
    worker = spawn(prune_now, store, str(log))
    join_all([worker], 60)
    assert read_log(log) == [{"removed": 5}]
    store_healthy(store)
    with opened(store) as memory:
        assert [info.session_id for info in memory.list_sessions()] == ["fresh"]
