"""The daemon threads that run timed summarizer calls: bounded when a model hangs, few
kept idle."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tiermem._compression import summarizer as compression
from tiermem._compression.summarizer import MAX_IDLE_WORKERS, MAX_STUCK_CALLS, Summarizer
from tiermem.errors import SummarizerTimeout

CALLS = 300


@pytest.fixture(name="workers", autouse=True)
def fixture_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh pool, so calls other tests left running do not count."""
    monkeypatch.setattr(compression, "_WORKERS", compression.DaemonWorkers())


@pytest.fixture(name="gate")
def fixture_gate() -> Iterator[threading.Event]:
    """An event a blocking model waits on; set at the end of the test."""
    gate = threading.Event()
    yield gate
    gate.set()


def _workers() -> int:
    return sum(thread.name == "tiermem-summarizer" for thread in threading.enumerate())


def _settle(*, expected: int, timeout: float = 5.0) -> int:
    """The worker count once it is at most ``expected`` (or after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while _workers() > expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return _workers()


def test_a_hung_model_holds_a_bounded_number_of_threads(gate: threading.Event) -> None:
    """300 timed calls to a model that never answers start at most MAX_STUCK_CALLS
    threads; the calls past them fail at once, naming the outstanding calls. Once the
    model answers, all but MAX_IDLE_WORKERS threads exit and calls succeed again."""
    before = _workers()
    hung = Summarizer(lambda prompt: "late" if gate.wait() else "")
    errors = []
    for _ in range(CALLS):
        with pytest.raises(SummarizerTimeout) as info:
            hung.summarize("hello", 0.01)
        errors.append(str(info.value))
    assert _workers() - before == MAX_STUCK_CALLS
    assert all("did not answer" in error for error in errors[:MAX_STUCK_CALLS])
    assert all(
        f"{MAX_STUCK_CALLS} timed-out summarizer calls are still outstanding" in error
        for error in errors[MAX_STUCK_CALLS:]
    )
    gate.set()
    assert _settle(expected=before + MAX_IDLE_WORKERS) == before + MAX_IDLE_WORKERS
    assert hung.summarize("hello", 5) == "late"


def test_idle_workers_beyond_a_few_exit() -> None:
    """Calls that ran at once each had a thread; when they are done, at most
    MAX_IDLE_WORKERS threads stay for the next call."""
    before, parallel = _workers(), MAX_IDLE_WORKERS + 4
    together = threading.Barrier(parallel)
    model = Summarizer(lambda prompt: f"summary {together.wait(5)}")
    answers: list[str] = []
    callers = [
        threading.Thread(target=lambda: answers.append(model.summarize("hello", 10)))
        for _ in range(parallel)
    ]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(10)
    assert len(answers) == parallel
    assert _settle(expected=before + MAX_IDLE_WORKERS) == before + MAX_IDLE_WORKERS
