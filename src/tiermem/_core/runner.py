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
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .. import signals

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from sqlalchemy.engine import Connection

    from .._compression.summarizer import Summarizer
    from .._storage.database import Database

__all__ = [
    "Compute",
    "Effect",
    "Embed",
    "Emit",
    "Op",
    "Summarize",
    "Transact",
    "arun",
    "compute",
    "run",
    "transact",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Transact:
    """Run ``work`` in one transaction of ``database`` (see ``Database.run``)."""

    database: Database
    work: Callable[[Connection], Any]
    write: bool = True
    snapshot: bool = False


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
    """Ask ``embeddings`` for the vectors of ``texts`` (documents), or of one query
    (``query``: ``texts`` holds it alone)."""

    embeddings: Embeddings
    texts: list[str]
    query: bool = False


Effect = Transact | Emit | Summarize | Compute | Embed

#: An operation: yields effects, returns its result.
Op = Generator[Effect, Any, T]


def transact(
    database: Database,
    work: Callable[[Connection], T],
    *,
    write: bool = True,
    snapshot: bool = False,
) -> Op[T]:
    """Yield ``work`` as a transaction and return what it returned (typed)."""
    result: T = yield Transact(database, work, write, snapshot)
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
    while True:
        try:
            effect = op.throw(error) if error is not None else op.send(value)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        value, error = None, None
        try:
            value = await _aperform(effect)
        except BaseException as exc:
            error = exc


def _perform(effect: Effect) -> Any:
    if isinstance(effect, Transact):
        return effect.database.run(effect.work, write=effect.write, snapshot=effect.snapshot)
    if isinstance(effect, Emit):
        signals.send(effect.sender, effect.pending)
        return None
    if isinstance(effect, Compute):
        return effect.work()
    if isinstance(effect, Embed):
        if effect.query:
            return [effect.embeddings.embed_query(effect.texts[0])]
        return effect.embeddings.embed_documents(effect.texts)
    return effect.summarizer.summarize(effect.prompt, effect.timeout)


async def _aperform(effect: Effect) -> Any:
    if isinstance(effect, Transact):
        return await effect.database.arun(effect.work, write=effect.write, snapshot=effect.snapshot)
    if isinstance(effect, Emit):
        await signals.send_async(effect.sender, effect.pending)
        return None
    if isinstance(effect, Compute):
        return await asyncio.to_thread(effect.work)
    if isinstance(effect, Embed):
        if effect.query:
            return [await effect.embeddings.aembed_query(effect.texts[0])]
        return await effect.embeddings.aembed_documents(effect.texts)
    return await effect.summarizer.asummarize(effect.prompt, effect.timeout)
