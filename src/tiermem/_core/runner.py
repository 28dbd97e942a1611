"""Operations as generators of effects, and the sync and async drivers that run them.

Each public operation is written once, as a generator that yields the work whose
sync and async forms differ and returns its result (the shape of psycopg's
``generators.py`` and ``waiting.py``):

* :class:`Transact`: run a function in one database transaction;
* :class:`Emit`: send signals, after the commit that produced them;
* :class:`Summarize`: call the summarizer;
* :class:`Compute`: run CPU-heavy work (serializing and counting a large message,
  validating an import) that must not hold up an event loop;
* :class:`Embed`: ask an embedding model for vectors.

:func:`run` performs each effect in the calling thread for the sync API;
:func:`arun` awaits each one for the async API (a transaction through
``Database.arun``, on a worker thread; the model's async call; async receivers; a
computation on a worker thread), so
the small work between two effects runs on the event loop and anything that waits
or computes at length runs off it. An effect's result is
sent back into the operation and its error is thrown into it at the ``yield``,
so an operation handles both as if it had made the call itself.

Cancellation: a cancelled task sees its ``CancelledError`` at once, while the
transaction it was waiting for runs to its end on its thread. A transaction marked
``cleanup`` (releasing a compression claim that transaction may have taken) that the
operation yields while it unwinds that cancellation is not awaited: it runs in the
background, after the interrupted transaction ended, and a later cancellation (the
event loop shutting down) does not stop it (:func:`cleanups_finished` waits for them).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .. import signals

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from .._compression.summarizer import Summarizer
    from .._storage.database import Database
    from .embedder import Embedder

__all__ = [
    "Compute",
    "Effect",
    "Embed",
    "Emit",
    "Op",
    "Summarize",
    "Transact",
    "arun",
    "cleanups_finished",
    "compute",
    "run",
    "transact",
]

T = TypeVar("T")
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Transact:
    """Run ``work`` in one transaction of ``database`` (see ``Database.run``);
    ``cleanup``: it undoes what an interrupted operation may have left (see the
    module's note on cancellation)."""

    database: Database
    work: Callable[[Connection], Any]
    write: bool = True
    snapshot: bool = False
    cleanup: bool = False


@dataclass(frozen=True, slots=True)
class Emit:
    """Send the signals of these events with ``sender`` as their sender."""

    sender: object
    pending: Sequence[signals.Signalled]


@dataclass(frozen=True, slots=True)
class Summarize:
    """Ask ``summarizer`` to answer ``prompt`` within ``timeout`` seconds."""

    summarizer: Summarizer
    prompt: str
    timeout: float | None


@dataclass(frozen=True, slots=True)
class Compute:
    """Call ``work`` (no I/O, but long enough to matter to an event loop)."""

    work: Callable[[], Any]


@dataclass(frozen=True, slots=True)
class Embed:
    """Ask ``embedder``'s model for the vectors of ``texts`` (documents), or of one
    query (``query``: ``texts`` holds it alone), within ``timeout`` seconds."""

    embedder: Embedder
    texts: list[str]
    query: bool = False
    timeout: float | None = None


Effect = Transact | Emit | Summarize | Compute | Embed

#: An operation: yields effects, returns its result.
Op = Generator[Effect, Any, T]


def transact(
    database: Database,
    work: Callable[[Connection], T],
    *,
    write: bool = True,
    snapshot: bool = False,
    cleanup: bool = False,
) -> Op[T]:
    """Yield ``work`` as a transaction and return what it returned (typed)."""
    result: T = yield Transact(database, work, write, snapshot, cleanup)
    return result


def compute(work: Callable[[], T]) -> Op[T]:
    """Yield ``work`` as a computation and return what it returned (typed)."""
    result: T = yield Compute(work)
    return result


def run(op: Op[T]) -> T:
    """Drive ``op`` to its result, performing each effect synchronously."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            effect = op.throw(error) if error is not None else op.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = _perform(effect)
        except BaseException as exc:  # the operation decides: release, translate, re-raise
            error = exc


async def arun(op: Op[T]) -> T:
    """Drive ``op`` to its result, awaiting each effect."""
    value: Any = None
    error: BaseException | None = None
    cancelled = False
    in_flight: asyncio.Future[Any] | None = None  # the transaction a cancellation left
    while True:
        try:
            effect = op.throw(error) if error is not None else op.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        if cancelled and isinstance(effect, Transact) and effect.cleanup:
            _clean_up_after(in_flight, effect)  # the cancelled caller does not wait
            continue
        running: asyncio.Future[Any] | None = None
        if isinstance(effect, Transact):
            # Shielded: a cancelled caller leaves the transaction running (or queued
            # for a thread), so a cleanup can wait for its end.
            running = _start(effect)
            awaiting: Awaitable[Any] = asyncio.shield(running)
        else:
            awaiting = _aperform(effect)
        try:
            value = await awaiting
        except asyncio.CancelledError as exc:
            error = exc
            if running is not None:  # its outcome is nobody's now: no "never retrieved"
                running.add_done_callback(_retrieve)
            task = asyncio.current_task()
            # Only a cancelled task: a CancelledError a callee raised of its own (no
            # cancellation requested) leaves a caller that still awaits the cleanup.
            if not cancelled and task is not None and task.cancelling():
                cancelled, in_flight = True, running
        except BaseException as exc:
            error = exc


#: Cleanup transactions of cancelled operations still running (held: a task that
#: nothing references may be collected before it ends).
_CLEANUPS: set[asyncio.Task[None]] = set()


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _start(effect: Transact) -> asyncio.Future[Any]:
    """The transaction on a worker thread of the loop's default executor, with the
    caller's context variables (as ``asyncio.to_thread`` runs it)."""
    call = functools.partial(
        effect.database.run, effect.work, write=effect.write, snapshot=effect.snapshot
    )
    context = contextvars.copy_context()
    return asyncio.get_running_loop().run_in_executor(None, context.run, call)


def _clean_up_after(in_flight: asyncio.Future[Any] | None, effect: Transact) -> None:
    """Run the cleanup ``effect`` in the background once ``in_flight`` ended."""
    task = asyncio.ensure_future(_clean_up(in_flight, effect))
    _CLEANUPS.add(task)
    task.add_done_callback(_CLEANUPS.discard)


async def _clean_up(in_flight: asyncio.Future[Any] | None, effect: Transact) -> None:
    if in_flight is not None:
        await _to_the_end(in_flight)
    done = _start(effect)
    await _to_the_end(done)
    if not done.cancelled() and done.exception() is not None:
        logger.warning("cleanup after a cancelled call failed: %s", done.exception())


async def _to_the_end(future: asyncio.Future[Any]) -> None:
    """Wait until ``future`` is done, whatever cancels this task meanwhile (the
    executor's threads finish their transaction even while the loop shuts down)."""
    while not future.done():
        try:
            await asyncio.wait([future])
        except asyncio.CancelledError:
            continue


async def cleanups_finished() -> None:
    """Wait until the cleanups of cancelled operations started so far on this event
    loop have ended."""
    loop = asyncio.get_running_loop()
    while mine := [task for task in _CLEANUPS if task.get_loop() is loop]:
        await asyncio.wait(mine)


def _perform(effect: Effect) -> Any:
    if isinstance(effect, Transact):
        return effect.database.run(effect.work, write=effect.write, snapshot=effect.snapshot)
    if isinstance(effect, Emit):
        signals.send(effect.sender, effect.pending)
        return None
    if isinstance(effect, Compute):
        return effect.work()
    if isinstance(effect, Embed):
        return effect.embedder.embed(effect.texts, effect.query, effect.timeout)
    return effect.summarizer.summarize(effect.prompt, effect.timeout)


async def _aperform(effect: Emit | Summarize | Compute | Embed) -> Any:
    if isinstance(effect, Emit):
        await signals.send_async(effect.sender, effect.pending)
        return None
    if isinstance(effect, Compute):
        return await asyncio.to_thread(effect.work)
    if isinstance(effect, Embed):
        return await effect.embedder.aembed(effect.texts, effect.query, effect.timeout)
    return await effect.summarizer.asummarize(effect.prompt, effect.timeout)
