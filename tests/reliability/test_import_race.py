"""T24: an append racing an overwrite import of the same session lands wholly before
the import (and is replaced by it) or wholly after it (and is kept), never in between;
an append that cannot wait fails with ``StorageBusy`` and changes nothing."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from tiermem import ConversationMemory, SessionState
from tiermem.errors import StorageBusy
from tiermem.types import MemoryEntry

from .harness import (
    StoreSpec,
    join_all,
    kill,
    read_log,
    spawn,
    store_healthy,
    wait_backends_gone,
    wait_for,
    wait_for_hit,
    write_log,
)
from .workers import open_memory, opened

pytestmark = pytest.mark.slow

#: Entries of the imported session: more than one 500-row insert batch, so a pause
#: at ``import.mid_batch`` holds the importer with part of its rows written.
IMPORTED = 1_200
OLD = ["old.0", "old.1", "old.2"]


# --------------------------------------------------------------------------- workers


def _wait_file(path: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(4)
        time.sleep(0.01)


def _gate_failpoint(point: str, gate: str) -> None:
    """Make failpoint ``point`` pause as the ``pause`` action does (its ``.hit`` marker in
    ``TIERMEM_FAILPOINT_DIR``), but go on once the file ``gate`` exists instead of
    sleeping until killed."""
    from tiermem._storage import failpoints as _failpoints

    original = _failpoints.hit

    def hit(name: str) -> None:
        if name == point and not os.path.exists(gate):
            directory = Path(os.environ["TIERMEM_FAILPOINT_DIR"])
            (directory / f"{name}.{os.getpid()}.hit").write_text(name)
            _wait_file(gate)
            return
        original(name)

    _failpoints.hit = hit


def import_over(
    spec: StoreSpec, path: str, log_path: str, go: str, pause_gate: str | None = None
) -> None:
    """Warm up, wait for the file ``go``, then import ``path`` with ``overwrite=True``;
    with ``pause_gate``, pause at ``import.mid_batch`` until that file exists."""
    if pause_gate is not None:
        _gate_failpoint("import.mid_batch", pause_gate)
    with opened(spec) as memory:
        memory.list_sessions()
        write_log(log_path, {"event": "ready"})
        _wait_file(go)
        data = Path(path).read_bytes()
        write_log(log_path, {"event": "start"})
        memory.import_session(data, overwrite=True)
        write_log(log_path, {"event": "end"})


def gated_append(spec: StoreSpec, session_id: str, text: str, log_path: str, gate: str) -> None:
    """Append one message, pausing at ``append.before_commit`` (lock held) until ``gate``."""
    _gate_failpoint("append.before_commit", gate)
    with opened(spec) as memory:
        entry = memory.add_user_message(session_id, text)
    write_log(log_path, {"outcome": "ok", "seq": entry.seq})


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(name="export_file", scope="module")
def fixture_export_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The export of a 1,200-entry session ``s`` (tagged ``new.<i>``)."""
    folder = tmp_path_factory.mktemp("export")
    source = StoreSpec("sqlite", str(folder / "source.db"))
    messages: list[BaseMessage] = [
        HumanMessage(content=f"new.{i}") if i % 2 == 0 else AIMessage(content=f"new.{i}")
        for i in range(IMPORTED)
    ]
    with opened(source) as memory:
        memory.add_messages("s", messages)
        state = memory.export_session("s")
    path = folder / "s.json"
    path.write_text(state.to_json(), encoding="utf-8")
    return path


def _seed(store: StoreSpec) -> tuple[str, str]:
    """Session ``s`` with three old messages and an unrelated session; their exports."""
    with opened(store) as memory:
        memory.add_messages("s", [HumanMessage(content=text) for text in OLD])
        memory.add_user_message("other", "unrelated session")
        return memory.export_session("s").to_json(), memory.export_session("other").to_json()


def _contents(state: SessionState) -> list[str]:
    return [str(entry.message["data"]["content"]) for entry in state.entries]


def _lock_waiters(store: StoreSpec) -> int:
    """PostgreSQL backends of this test blocked on a lock."""
    engine = store.engine()
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = :app "
                        "AND wait_event_type = 'Lock'"
                    ),
                    {"app": store.app_name},
                ).scalar_one()
            )
    finally:
        engine.dispose()


class _Append(threading.Thread):
    """One ``add_user_message`` on a warmed-up memory, in the background."""

    def __init__(self, memory: ConversationMemory, text: str) -> None:
        super().__init__(daemon=True)
        self.memory = memory
        self.text = text
        self.entry: MemoryEntry | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.entry = self.memory.add_user_message("s", self.text)
        except BaseException as exc:  # reported to the test, which asserts on it
            self.error = exc


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize(("lock_timeout", "outcome"), [(30.0, "waits"), (0.5, "busy")])
def test_append_during_import_waits_or_fails_never_interleaves(
    store: StoreSpec,
    fp_dir: Path,
    tmp_path: Path,
    export_file: Path,
    lock_timeout: float,
    outcome: str,
) -> None:
    """With the importer held mid-batch (its old rows deleted, part of the new ones
    written, nothing committed), readers still see the old session and an append of
    the same session waits for the import and then lands after it (kept, at the next
    seq), or, with a short lock timeout, fails with StorageBusy and changes nothing:
    either way the session is the import plus at most that append, never a mix."""
    source = SessionState.from_json(export_file.read_bytes())
    old, other = _seed(store)
    reader = open_memory(store)
    appender = open_memory(store, lock_timeout=lock_timeout)
    reader.list_sessions()  # warm up: schema checks done before the import holds the lock
    appender.list_sessions()
    gate, go, log = tmp_path / "release", tmp_path / "go", tmp_path / "import.jsonl"
    go.touch()
    worker = spawn(
        import_over, store, str(export_file), str(log), str(go), str(gate), fp_dir=fp_dir
    )
    append = _Append(appender, "late")
    try:
        wait_for_hit(fp_dir, "import.mid_batch", worker, timeout=120)
        assert reader.export_session("s").to_json() == old, "a reader saw the import half-done"
        append.start()
        if outcome == "waits":
            time.sleep(1.0)
            assert append.is_alive() and append.entry is None and append.error is None, (
                "the append did not wait for the import"
            )
        else:
            append.join(20)
            assert not append.is_alive(), "the append ignored its lock timeout"
            assert isinstance(append.error, StorageBusy), repr(append.error)
        assert reader.export_session("s").to_json() == old
        gate.touch()
        join_all([worker], 120)
        append.join(60)
        assert not append.is_alive(), "the append never finished after the import committed"
    finally:
        kill(worker)
        reader.close()
        appender.close()
    assert [record["event"] for record in read_log(log)] == ["ready", "start", "end"]
    with opened(store) as memory:
        final = memory.export_session("s")
        assert memory.export_session("other").to_json() == other
    if outcome == "waits":
        assert append.error is None, repr(append.error)
        assert append.entry is not None and append.entry.seq == IMPORTED + 1
        assert final.entries[:IMPORTED] == source.entries
        assert _contents(final)[IMPORTED:] == ["late"]
        assert [e.seq for e in final.entries] == list(range(1, IMPORTED + 2))
    else:
        assert final.to_json() == source.to_json()
    assert not set(_contents(final)) & set(OLD)
    wait_backends_gone(store)
    store_healthy(store)


def test_append_holding_the_lock_lands_before_the_import_and_is_replaced(
    store: StoreSpec, fp_dir: Path, tmp_path: Path, export_file: Path
) -> None:
    """An append paused before its commit (holding the session lock) makes a concurrent
    overwrite import wait; once the append commits, the import replaces the session,
    append included, and the result is the export byte for byte."""
    source = export_file.read_text(encoding="utf-8")
    source = SessionState.from_json(source).to_json()
    _, other = _seed(store)
    gate, go = tmp_path / "release", tmp_path / "go"
    import_log, append_log = tmp_path / "import.jsonl", tmp_path / "append.jsonl"
    importer = spawn(import_over, store, str(export_file), str(import_log), str(go))
    appender = None
    try:
        wait_for(lambda: bool(read_log(import_log)), 120, "the importer to warm up")
        appender = spawn(
            gated_append, store, "s", "early", str(append_log), str(gate), fp_dir=fp_dir
        )
        wait_for_hit(fp_dir, "append.before_commit", appender, timeout=120)
        go.touch()
        wait_for(lambda: len(read_log(import_log)) >= 2, 60, "the import to start")
        if store.backend == "postgres":
            wait_for(lambda: _lock_waiters(store) >= 1, 60, "the import to wait for the lock")
        else:
            time.sleep(1.5)
        assert [r["event"] for r in read_log(import_log)] == ["ready", "start"], (
            "the import finished while the append held the session"
        )
        assert read_log(append_log) == []
        gate.touch()
        join_all([appender, importer], 120)
    finally:
        kill(importer)
        if appender is not None:
            kill(appender)
    assert read_log(append_log) == [{"outcome": "ok", "seq": len(OLD) + 1}]
    assert [r["event"] for r in read_log(import_log)] == ["ready", "start", "end"]
    with opened(store) as memory:
        final = memory.export_session("s")
        assert memory.export_session("other").to_json() == other
    assert final.to_json() == source
    wait_backends_gone(store)
    store_healthy(store)
