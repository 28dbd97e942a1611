"""T07: SIGKILL during append keeps every returned append and nothing partial."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event
from pathlib import Path

import pytest

from .harness import (
    CTX,
    StoreSpec,
    kill,
    read_log,
    spawn,
    store_dump,
    store_healthy,
    wait_for,
    wait_for_hit,
)
from .workers import append_forever, append_group, append_one, op_messages, opened

pytestmark = pytest.mark.slow

SEED_OPS = 6
SEED_ENTRIES = sum(len(op_messages("seed", i)) for i in range(SEED_OPS))


def _seed(store: StoreSpec) -> None:
    with opened(store) as memory:
        for index in range(SEED_OPS):
            memory.add_messages("s", op_messages("seed", index))


def _stored(store: StoreSpec) -> list[str]:
    with opened(store) as memory:
        return [str(e.message.content) for e in memory.get_entries("s")]


@pytest.mark.parametrize(
    ("failpoint", "kept", "group"),
    [
        ("append.after_insert", False, False),
        ("append.after_insert", False, True),
        ("append.before_commit", False, False),
        ("transaction.before_commit", False, True),
        ("append.after_commit", True, False),
        ("append.after_commit", True, True),
    ],
)
def test_kill_at_append_failpoint(
    store: StoreSpec, fp_dir: Path, failpoint: str, kept: bool, group: bool
) -> None:
    """A writer killed before its commit leaves the exact pre-state; one killed after
    it leaves the whole append; either way the store reopens healthy and writable."""
    _seed(store)
    before = store_dump(store)
    body = append_group if group else append_one
    worker = spawn(body, store, "s", "inflight", failpoints=f"{failpoint}=pause", fp_dir=fp_dir)
    try:
        wait_for_hit(fp_dir, failpoint, worker)
    finally:
        kill(worker)
    store_healthy(store)
    after = store_dump(store)
    stored = _stored(store)
    added = 3 if group else 1
    if kept:
        assert len(stored) == SEED_ENTRIES + added
        assert all(text.startswith("inflight") for text in stored[SEED_ENTRIES:])
    else:
        assert after == before
        assert len(stored) == SEED_ENTRIES
    with opened(store) as memory:
        assert memory.add_user_message("s", "after").seq == len(stored) + 1
    store_healthy(store)


@dataclass
class _Writer:
    process: BaseProcess
    ready: Event
    go: Event
    log: Path


def test_kill_at_random_times(store: StoreSpec, tmp_path: Path) -> None:
    """30 writers killed at random moments: every returned append survives, the one in
    flight is all or nothing, and each reopen recovers the last crash (compound crashes)."""
    rng = random.Random(7)
    expected: list[str] = []
    iterations = 30

    def prepare(iteration: int) -> _Writer:
        ready, go = CTX.Event(), CTX.Event()
        log = tmp_path / f"log{iteration}.jsonl"
        process = spawn(append_forever, store, "s", f"it{iteration}", str(log), ready, go)
        return _Writer(process, ready, go, log)

    upcoming: _Writer | None = prepare(0)
    try:
        for iteration in range(iterations):
            assert upcoming is not None
            writer = upcoming
            wait_for(writer.ready.is_set, 60, "the writer to warm up")
            # Start the next interpreter now, so its start-up overlaps this round.
            upcoming = prepare(iteration + 1) if iteration + 1 < iterations else None
            writer.go.set()
            time.sleep(rng.uniform(0.001, 0.030) + (0.1 if iteration % 3 == 0 else 0.0))
            kill(writer.process)
            store_healthy(store)
            stored = _stored(store)
            tag = f"it{iteration}"
            returned = read_log(writer.log)
            for record in returned:
                texts = [str(m.content) for m in op_messages(tag, record["i"])]
                expected += texts
                assert stored[record["seqs"][0] - 1 : record["seqs"][-1]] == texts
            in_flight = [str(m.content) for m in op_messages(tag, len(returned))]
            if stored == expected + in_flight:
                expected += in_flight
            assert stored == expected, f"iteration {iteration}: an append was lost or partial"
    finally:
        if upcoming is not None:
            kill(upcoming.process)
    assert len(expected) > iterations
