"""A cancelled async compression never leaves its claim held (issue 29, item 4).

Each test cancels the call at every transaction it runs, in turn: the transaction
is let commit first (a claim it took is then in the database), and the thread
that ran it waits until the event loop has delivered the cancellation, so the
order is fixed without sleeping. ``again`` cancels once more at every later
transaction, the release included. The release runs in the background (the
cancelled caller does not wait for it): ``cleanups_finished`` waits for it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig
from tiermem._core.runner import Op, Transact, arun, cleanups_finished
from tiermem._storage.database import Database
from tiermem.testing import FakeSummarizer

from ..conftest import MemoryFactory

MANUAL = MemoryConfig(auto_compress=False, recent_window=2, claim_ttl=3600)
AUTOMATIC = MemoryConfig(max_tokens=60, recent_window=2, claim_ttl=3600, min_entries_to_compress=2)
SENTENCE = "message {n} is a sentence of a dozen words about the quarterly report"

Call = Callable[[ConversationMemory, str], Coroutine[Any, Any, object]]


class CancelAtTransaction:
    """Patches ``Database.run``: after the ``at``-th transaction (and, with ``again``,
    after each later one) commits, cancel ``task`` and wait until it was delivered."""

    def __init__(self, at: int, again: bool) -> None:
        self.at, self.again, self.count = at, again, 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[object] | None = None
        self.original = Database.run

    def run(self, database: Database, work: Any, **kwargs: Any) -> Any:
        result = self.original(database, work, **kwargs)
        if self.task is None or self.loop is None or threading.current_thread() is _MAIN:
            return result
        self.count += 1
        if self.count == self.at or (self.again and self.count > self.at):
            delivered = threading.Event()
            task, loop = self.task, self.loop

            def cancel() -> None:
                task.cancel()
                loop.call_soon(delivered.set)  # after the task has handled it

            loop.call_soon_threadsafe(cancel)
            assert delivered.wait(30), "the event loop never delivered the cancellation"
        return result


_MAIN = threading.main_thread()


def _claims(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text("SELECT claim_token FROM tiermem_session")).scalars())


async def _run_with(
    hook: CancelAtTransaction, monkeypatch: pytest.MonkeyPatch, call: Coroutine[Any, Any, object]
) -> asyncio.Task[object]:
    """Start ``call`` as a task with ``hook`` patched into ``Database.run``."""

    def run(database: Database, work: Any, **kwargs: Any) -> Any:
        return hook.run(database, work, **kwargs)

    monkeypatch.setattr(Database, "run", run)
    hook.loop = asyncio.get_running_loop()
    hook.task = asyncio.ensure_future(call)
    return hook.task


async def _cancel_everywhere(
    engine: Engine,
    memory: ConversationMemory,
    monkeypatch: pytest.MonkeyPatch,
    prepare: Callable[[str], None],
    call: Call,
) -> None:
    """Run ``call`` once in full to count its transactions, then once per transaction,
    cancelled there (and, in a second pass, at every later one too)."""
    original = Database.run
    prepare("full")
    counter = CancelAtTransaction(at=0, again=False)
    await (await _run_with(counter, monkeypatch, call(memory, "full")))
    assert counter.count >= 2
    for again in (False, True):
        for at in range(1, counter.count + 1):
            session = f"s-{at}-{again}"
            monkeypatch.setattr(Database, "run", original)
            prepare(session)
            task = await _run_with(
                CancelAtTransaction(at, again), monkeypatch, call(memory, session)
            )
            with pytest.raises(asyncio.CancelledError):
                await task
            await cleanups_finished()
            monkeypatch.setattr(Database, "run", original)
            assert _claims(engine) == [None] * len(_claims(engine)), (at, again)


async def test_a_cancelled_acompress_releases_its_claim(
    engine: Engine, make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled at any of its transactions, acompress leaves no claim behind."""
    memory = make_memory(config=MANUAL, summarizer=FakeSummarizer())

    def prepare(session: str) -> None:
        for n in range(8):
            memory.add_user_message(session, SENTENCE.format(n=n))

    async def call(memory: ConversationMemory, session: str) -> object:
        return await memory.acompress(session, force=True)

    await _cancel_everywhere(engine, memory, monkeypatch, prepare, call)


async def test_a_cancelled_append_releases_the_claim_it_took(
    engine: Engine, make_memory: MemoryFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append that takes the claim for its automatic compression and is cancelled
    at any of its transactions (the append's own included) leaves no claim behind."""
    memory = make_memory(config=AUTOMATIC, summarizer=FakeSummarizer())

    def prepare(session: str) -> None:
        for n in range(3):
            memory.add_user_message(session, SENTENCE.format(n=n))

    async def call(memory: ConversationMemory, session: str) -> object:
        return await memory.aadd_user_message(session, SENTENCE.format(n=99))

    await _cancel_everywhere(engine, memory, monkeypatch, prepare, call)


async def test_a_cancelled_summarizer_call_releases_the_claim(
    engine: Engine, make_memory: MemoryFactory
) -> None:
    """Cancelled while its model runs, acompress leaves no claim behind."""
    entered, never = asyncio.Event(), asyncio.Event()

    async def blocking(prompt: str) -> str:
        entered.set()
        await never.wait()
        return "unreachable"

    memory = make_memory(config=MANUAL, summarizer=blocking)
    for n in range(8):
        memory.add_user_message("s", SENTENCE.format(n=n))
    task = asyncio.ensure_future(memory.acompress("s", force=True))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await cleanups_finished()
    assert _claims(engine) == [None]


async def test_a_cleanup_runs_after_the_transaction_a_cancellation_interrupted(
    engine: Engine,
) -> None:
    """Cancelled while its transaction still waits for a worker thread, an operation
    raises at once; that transaction runs all the same, and the cleanup it yields
    while unwinding runs after it, in the background."""
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
    database = Database(engine=engine)
    gate = threading.Event()
    busy = loop.run_in_executor(None, gate.wait)  # holds the only worker
    ran: list[str] = []

    def operation() -> Op[None]:
        try:
            yield Transact(database, lambda conn: ran.append("work"))
        except asyncio.CancelledError:
            yield Transact(database, lambda conn: ran.append("cleanup"), cleanup=True)
            raise

    call = asyncio.ensure_future(arun(operation()))
    try:
        await asyncio.sleep(0)  # one loop turn: the work is queued behind ``busy``
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call  # at once: the worker is still busy
        assert ran == []
    finally:
        gate.set()
        await busy
    await cleanups_finished()
    assert ran == ["work", "cleanup"]
