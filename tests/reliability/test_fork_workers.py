"""A process forked after tiermem was used compresses, times out and releases its caches
like a fresh one: the summarizer's worker threads, the background worker of a memory and
the parse cache of the parent do not carry over into the child."""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tiermem import ConversationMemory, MemoryConfig
from tiermem._compression import summarizer as compression
from tiermem._compression.summarizer import Summarizer
from tiermem._core import messages as _messages
from tiermem.errors import SummarizerTimeout
from tiermem.testing import FakeSummarizer

from .harness import StoreSpec, kill, wait_for
from .workers import open_memory

#: Automatic compression within 300 tokens, with the default 60 s model timeout.
BUDGET = MemoryConfig(
    max_tokens=300, recent_window=2, min_entries_to_compress=2, summarizer_timeout=60.0
)
#: Seconds a child has to report; a child that hangs fails the test after it.
WATCHDOG = 20.0
#: A first compression in a child that takes longer than this waited for a dead thread.
PROMPT = 5.0

Report = dict[str, Any]


def in_child(body: Callable[[], Report]) -> Report:
    """Run ``body`` in a forked child and return its report; fail when the child raises,
    dies or gives no report within :data:`WATCHDOG` seconds."""
    fork = multiprocessing.get_context("fork")
    reader, writer = fork.Pipe(duplex=False)

    def run() -> None:
        try:
            report = body()
        except BaseException as exc:  # reported to the parent, which fails the test
            report = {"error": repr(exc)}
        writer.send(report)

    child = fork.Process(target=run, daemon=True)
    child.start()
    writer.close()
    try:
        if not reader.poll(WATCHDOG):
            raise AssertionError(f"the forked child gave no report within {WATCHDOG} s")
        report: Report = reader.recv()
    finally:
        reader.close()
        child.join(5)
        kill(child)
    assert child.exitcode == 0 and "error" not in report, report
    return report


def fill(memory: ConversationMemory, session_id: str, count: int = 30) -> None:
    """Append ``count`` messages, far more than :data:`BUDGET` holds."""
    for index in range(count):
        memory.add_user_message(session_id, f"{session_id} message {index}: " + "word " * 20)


def compressed(memory: ConversationMemory, session_id: str) -> Report:
    """How ``session_id`` stands: its summaries and the tokens handed to the model."""
    stats = memory.get_stats(session_id)
    return {"summaries": stats.summaries, "context_tokens": stats.context_tokens}


@pytest.fixture(name="gate")
def fixture_gate() -> Iterator[threading.Event]:
    """An event a blocking model waits on; set at the end of the test."""
    gate = threading.Event()
    yield gate
    gate.set()


def test_a_child_compresses_at_once_after_the_parent_did(store: StoreSpec) -> None:
    """After the parent compressed through a timed model (leaving an idle worker thread),
    a child's first automatic compression, on a new memory, is prompt and succeeds."""
    with open_memory(store, config=BUDGET, summarizer=FakeSummarizer()) as parent:
        fill(parent, "parent")
        assert compressed(parent, "parent")["summaries"] >= 1

        def child() -> Report:
            started = time.monotonic()
            with open_memory(store, config=BUDGET, summarizer=FakeSummarizer()) as fresh:
                fill(fresh, "child")
                return {"seconds": time.monotonic() - started, **compressed(fresh, "child")}

        report = in_child(child)
    assert report["seconds"] < PROMPT, report
    assert report["summaries"] >= 1 and report["context_tokens"] <= BUDGET.max_tokens, report


def test_a_fork_during_a_model_call_leaves_the_child_no_held_lock(
    store: StoreSpec, gate: threading.Event
) -> None:
    """A fork while a parent thread waits on a timed model call, and while the worker
    pool's lock is held, gives a child whose compressions go through."""
    blocked = FakeSummarizer(mode="sleep", release=gate, delay=WATCHDOG)
    with open_memory(store, config=BUDGET, summarizer=blocked) as parent:
        for index in range(6):
            parent.add_user_message("parent", f"parent message {index}")
        waiting = threading.Thread(target=lambda: parent.compress("parent", force=True))
        waiting.start()
        wait_for(lambda: len(blocked.calls) == 1, 10, "the parent's model call")

        def child() -> Report:
            with open_memory(store, config=BUDGET, summarizer=FakeSummarizer()) as fresh:
                fill(fresh, "child")
                return compressed(fresh, "child")

        with compression._WORKERS._lock:  # another thread of the parent is starting a call
            report = in_child(child)
        gate.set()
        waiting.join(10)
    assert report["summaries"] >= 1 and report["context_tokens"] <= BUDGET.max_tokens, report


def test_a_child_inherits_no_stuck_calls(
    monkeypatch: pytest.MonkeyPatch, gate: threading.Event
) -> None:
    """A parent whose model left the most timed-out calls outstanding fails further calls
    at once; its child's timed calls start threads again and get answers."""
    monkeypatch.setattr(compression, "_WORKERS", compression.DaemonWorkers())
    hung = Summarizer(lambda prompt: "late" if gate.wait() else "")
    for _ in range(compression.MAX_STUCK_CALLS):
        with pytest.raises(SummarizerTimeout, match="did not answer"):
            hung.summarize("hello", 0.01)
    with pytest.raises(SummarizerTimeout, match="outstanding"):
        hung.summarize("hello", 60)
    answering = Summarizer(lambda prompt: f"summary of {prompt}")
    report = in_child(lambda: {"answer": answering.summarize("hello", 60)})
    assert report == {"answer": "summary of hello"}


def test_background_compression_runs_in_a_child(store: StoreSpec) -> None:
    """With ``background=True``, a child forked after the parent's worker compressed
    compresses its own appends: ``close()`` drains them and the context fits the budget."""
    config = BUDGET.replace(background=True)
    parent = open_memory(store, config=config, summarizer=FakeSummarizer())
    try:
        fill(parent, "parent")
        wait_for(
            lambda: compressed(parent, "parent")["context_tokens"] <= BUDGET.max_tokens,
            10,
            "the parent's background compression",
        )

        def child() -> Report:
            fill(parent, "child")
            parent.close()  # drains the child's background compression
            return compressed(parent, "child")

        report = in_child(child)
    finally:
        parent.close()
    assert report["summaries"] >= 1 and report["context_tokens"] <= BUDGET.max_tokens, report


def test_a_child_starts_with_an_empty_parse_cache(store: StoreSpec) -> None:
    """Messages the parent parsed are not held in the child, which reads them right."""
    with open_memory(store, config=BUDGET.replace(auto_compress=False)) as parent:
        fill(parent, "s", 5)
        expected = [str(message.content) for message in parent.get_messages("s")]
        assert _messages._CACHE

        def child() -> Report:
            cached = len(_messages._CACHE)
            contents = [str(message.content) for message in parent.get_messages("s")]
            return {"cached": cached, "contents": contents}

        report = in_child(child)
    assert report == {"cached": 0, "contents": expected}


def test_a_fork_while_layer_locks_are_held_leaves_the_child_working(store: StoreSpec) -> None:
    """A fork while parent threads hold the layer registry's lock and a working memory's
    lock gives a child whose layers work (no lock the child can never take)."""
    with open_memory(store, config=BUDGET, summarizer=FakeSummarizer()) as parent:
        working = parent.layers("notes")
        working.append("working", "parent note")

        def child() -> Report:
            child_layers = parent.layers("notes")
            child_layers.append("working", "child note")
            fresh = parent.layers("other")
            return {"working": len(child_layers.recent("working", 10)), "other": fresh.scope}

        with parent._layers._lock, working._state.working._lock:
            report = in_child(child)
    assert report == {"working": 2, "other": "other"}
