"""blinker signals sent by tiermem, always after the transaction commits.

Each signal's sender is the :class:`~tiermem.ConversationMemory` instance.
Delivery is at most once and in-process: a crash between commit and sending
loses the signal. A receiver that raises is logged and never breaks the write
or the other receivers. Receivers connected with ``signal.connect`` are held
weakly (blinker's default); ``mem.on(name, fn)`` holds them strongly.

Signals and their keyword arguments (the fields of the signal's event class in
:mod:`tiermem.events`, which :func:`send` sends):

* ``entry:added``: ``session_id``, ``entry`` (:class:`~tiermem.MemoryEntry`).
* ``compressed``: ``session_id``, ``result`` (:class:`~tiermem.CompressionResult`).
* ``compression_failed``: ``session_id``, ``error`` (the :class:`~tiermem.errors.TiermemError`).
* ``session:cleared``: ``session_id``, ``entries_removed`` (int).
* ``tier_changed``: ``session_ids`` (tuple of str), ``tier`` (str), ``project`` (str).
* ``pruned``: ``session_ids`` (tuple of str), ``item_ids`` (tuple of int: layer
  items), ``project`` (str); one batch's sessions or items, the other tuple empty.
* ``forgotten``: ``project`` (str), ``result`` (:class:`~tiermem.types.ForgetResult`:
  what ``forget`` erased, with the ids it found; the signal is not stored, and the
  change-feed event of an erasure holds its counts only).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from blinker import NamedSignal, Namespace

from .errors import InvalidArgument

__all__ = [
    "SIGNAL_NAMES",
    "Signalled",
    "compressed",
    "connect",
    "compression_failed",
    "entry_added",
    "forgotten",
    "pruned",
    "send",
    "send_async",
    "session_cleared",
    "session_renamed",
    "signal",
    "tier_changed",
]

logger = logging.getLogger(__name__)

_signals = Namespace()

entry_added = _signals.signal("entry:added", doc="An entry was stored.")
compressed = _signals.signal("compressed", doc="Entries were summarized.")
compression_failed = _signals.signal(
    "compression_failed", doc="A compression attempt failed; nothing changed."
)
session_cleared = _signals.signal("session:cleared", doc="A session was cleared.")
session_renamed = _signals.signal("session:renamed", doc="A session took a new id.")
tier_changed = _signals.signal("tier_changed", doc="Sessions moved to another tier.")
pruned = _signals.signal("pruned", doc="Expired sessions or layer items were deleted.")
forgotten = _signals.signal(
    "forgotten", doc="A person's sessions, scopes or documents were erased."
)

SIGNAL_NAMES = tuple(_signals)


class Signalled(Protocol):
    """What :func:`send` sends: an event of :mod:`tiermem.events`, which knows its
    signal (``None``: it has none) and the signal's keyword arguments."""

    @property
    def signal(self) -> NamedSignal | None:
        """The signal, or ``None``."""

    def arguments(self) -> dict[str, Any]:
        """The signal's keyword arguments."""


def signal(name: str) -> NamedSignal:
    """Return the tiermem signal called ``name``.

    Raises:
        InvalidArgument: for an unknown name.
    """
    if name not in _signals:
        raise InvalidArgument(f"unknown signal {name!r}; known: {', '.join(SIGNAL_NAMES)}")
    return _signals[name]


def connect(name: str, receiver: Callable[..., Any], sender: object) -> Callable[[], None]:
    """Connect ``receiver`` to signal ``name`` from ``sender`` only, held strongly;
    returns a callable that disconnects it."""
    sig = signal(name)
    sig.connect(receiver, sender=sender, weak=False)

    def disconnect() -> None:
        sig.disconnect(receiver, sender=sender)

    return disconnect


def _receivers(
    event: Signalled, sender: object
) -> tuple[str, list[Callable[..., Any]], dict[str, Any]]:
    """The signal's name, its receivers from ``sender`` and their keyword arguments
    (built only when someone listens)."""
    sig = event.signal
    if sig is None:
        return "", [], {}
    # A copy, so a receiver that disconnects itself does not upset iteration.
    receivers = list(sig.receivers_for(sender))
    return sig.name, receivers, event.arguments() if receivers else {}


def _log_failure(name: str, receiver: Callable[..., Any]) -> None:
    logger.exception("tiermem signal %r: receiver %r raised; ignored", name, receiver)


def send(sender: object, pending: Iterable[Signalled]) -> None:
    """Send the signal of each pending event to every receiver, isolating failures.

    A coroutine receiver is run to completion when no event loop runs in this
    thread, otherwise scheduled as a task on the running loop.
    """
    for event in pending:
        name, receivers, kwargs = _receivers(event, sender)
        for receiver in receivers:
            try:
                result = receiver(sender, **kwargs)
                if inspect.isawaitable(result):
                    _run_awaitable(result)
            except Exception:
                _log_failure(name, receiver)


async def send_async(sender: object, pending: Iterable[Signalled]) -> None:
    """Like :func:`send` from async code: coroutine receivers are awaited in turn."""
    for event in pending:
        name, receivers, kwargs = _receivers(event, sender)
        for receiver in receivers:
            try:
                result = receiver(sender, **kwargs)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                _log_failure(name, receiver)


def _run_awaitable(awaitable: Any) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_await(awaitable))
        return
    task = loop.create_task(_await(awaitable))
    _background.add(task)
    task.add_done_callback(_background.discard)


_background: set[asyncio.Task[None]] = set()


async def _await(awaitable: Any) -> None:
    try:
        await awaitable
    except Exception:
        logger.exception("tiermem signal: async receiver raised; ignored")
