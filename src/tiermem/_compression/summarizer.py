"""Calling the summarizer: a chat model, Runnable or callable, with a timeout,
typed errors, and validation of what it answers.

A timed synchronous call runs on a daemon helper thread, so a model that hangs
costs a thread, never the caller: at most :data:`MAX_STUCK_CALLS` such calls may
be outstanding in a process, and their threads are not inherited by a forked
child.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import queue
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable

from .._core.named_models import chat_model_from_name
from ..errors import (
    InvalidArgument,
    SummarizationError,
    SummarizerFailed,
    SummarizerOutputInvalid,
    SummarizerTimeout,
    TiermemError,
)
from .policy import PROMPT_ECHO, SummarizerLike

__all__ = [
    "MAX_IDLE_WORKERS",
    "MAX_STUCK_CALLS",
    "DaemonWorkers",
    "Summarizer",
    "make_summarizer",
    "normalize_output",
]

_ERROR_STUB = re.compile(
    r"^\s*(error generating summary|error:|an error occurred|i'?m sorry|i am sorry|"
    r"i cannot|i can'?t|as an ai\b)",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------- output


_ERROR_STUB = re.compile(
    r"^\s*(error generating summary|error:|an error occurred|i'?m sorry|i am sorry|"
    r"i cannot|i can'?t|as an ai\b)",
    re.IGNORECASE,
)


def normalize_output(raw: object) -> str:
    """The summary text of a summarizer's answer.

    A message's content is used; a list of content blocks is joined from its
    text blocks (documented normalization). Empty text, text that is not valid
    Unicode (a lone surrogate), an error stub, an echo of the prompt or an
    assistant tool call is rejected.

    Raises:
        SummarizerOutputInvalid: for anything that is not a usable summary.
    """
    if isinstance(raw, AIMessage) and raw.tool_calls:
        raise SummarizerOutputInvalid("summarizer answered with a tool call")
    content = raw.content if isinstance(raw, BaseMessage) else raw
    if isinstance(content, list):
        content = "\n".join(
            str(b.get("text", "")) if isinstance(b, dict) else str(b)
            for b in content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
        )
    if not isinstance(content, str):
        raise SummarizerOutputInvalid(f"summarizer returned {type(content).__name__}, not text")
    text = content.strip()
    if not text:
        raise SummarizerOutputInvalid("summarizer returned an empty summary")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # the database could not store it
        raise SummarizerOutputInvalid(
            "summarizer returned invalid Unicode (lone surrogate)"
        ) from exc
    if _ERROR_STUB.match(text) or PROMPT_ECHO in text:
        raise SummarizerOutputInvalid(f"summarizer returned an error text: {text[:80]!r}")
    return text


# --------------------------------------------------------------------------- calling


@dataclass(frozen=True, slots=True)
class Summarizer:
    """Calls a chat model, Runnable or callable with a timeout; typed errors only."""

    target: SummarizerLike

    def summarize(self, prompt: str, timeout: float | None) -> str:
        """Summarize synchronously; the call runs on a helper thread when timed.

        Raises:
            SummarizerFailed / SummarizerTimeout / SummarizerOutputInvalid.
        """
        if timeout is None:
            try:
                raw = self._call(prompt)
            except Exception as exc:  # typed like the timed path: SummarizerFailed
                raise _wrap(exc) from exc
            return normalize_output(raw)
        kind, value = _WORKERS.call(lambda: self._call(prompt), timeout)
        if kind == "error":
            raise _wrap(value)
        return normalize_output(value)

    async def asummarize(self, prompt: str, timeout: float | None) -> str:
        """Summarize from async code (``ainvoke`` for Runnables).

        Raises:
            SummarizerFailed / SummarizerTimeout / SummarizerOutputInvalid.
        """
        try:
            raw = await asyncio.wait_for(self._acall(prompt), timeout)
        except TimeoutError as exc:
            raise SummarizerTimeout(f"summarizer did not answer within {timeout} s") from exc
        except Exception as exc:
            raise _wrap(exc) from exc
        return normalize_output(raw)

    def _call(self, prompt: str) -> Any:
        if isinstance(self.target, Runnable):
            return self.target.invoke(prompt)
        result = self.target(prompt)
        if inspect.isawaitable(result):
            return asyncio.run(_awaited(result))
        return result

    async def _acall(self, prompt: str) -> Any:
        if isinstance(self.target, Runnable):
            return await self.target.ainvoke(prompt)
        if inspect.iscoroutinefunction(self.target):
            return await self.target(prompt)
        result = await asyncio.to_thread(self.target, prompt)
        if inspect.isawaitable(result):
            return await result
        return result


#: Timed summarizer calls whose caller gave up (they timed out) but whose model has
#: not answered yet, in this process. Each holds a thread until its model answers;
#: with this many outstanding, a timed call fails at once with ``SummarizerTimeout``
#: instead of starting another thread. Adjustable at run time.
MAX_STUCK_CALLS = 8
#: Idle worker threads kept for the next timed call; a worker finishing its call
#: when this many are idle already exits.
MAX_IDLE_WORKERS = 2


#: The outcome of a call that has not answered yet.
_PENDING: tuple[str, Any] = ("pending", None)


class _Call:
    """One timed call: ``done`` is held until ``outcome`` (kind, value) is set."""

    __slots__ = ("abandoned", "done", "outcome", "task")

    def __init__(self, task: Callable[[], Any]) -> None:
        self.task = task
        self.outcome = _PENDING
        self.abandoned = False
        # A bare lock, held until the answer is in: waking on it costs less than on
        # an Event (a Condition written in Python).
        self.done = threading.Lock()
        self.done.acquire()


class DaemonWorkers:
    """Daemon threads that run timed calls of a model (the summarizer's; the
    embedding model's have a pool of their own, :mod:`tiermem._core.embedder`).

    Daemon threads, so a model that never answers cannot keep the process
    alive (a ``ThreadPoolExecutor`` joins its threads at exit); reused, so a
    compression does not pay for starting a thread. A worker stuck in a call
    that timed out is not idle: the next call starts another thread, up to
    :data:`MAX_STUCK_CALLS` stuck calls; past them a call fails at once rather
    than add a thread a hung model may hold forever. At most
    :data:`MAX_IDLE_WORKERS` finished workers wait for work; the others exit.

    A forked child gets a new, empty pool (see :func:`_reset_after_fork`): the
    parent's threads do not exist there, its lock may have been held by one of
    them, and its counts describe the parent.
    """

    def __init__(
        self, what: str = "summarizer", timeout_error: type[TiermemError] = SummarizerTimeout
    ) -> None:
        self._what = what
        self._timeout_error = timeout_error
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._idle = 0
        self._stuck = 0
        self._lock = threading.Lock()

    def call(self, task: Callable[[], Any], timeout: float) -> tuple[str, Any]:
        """Run ``task`` on a worker: ``("ok", result)`` or ``("error", exception)``.

        Raises:
            SummarizerTimeout: (the pool's ``timeout_error``) no answer within
                ``timeout`` seconds, or :data:`MAX_STUCK_CALLS` earlier calls still
                hold their threads.
        """
        call = _Call(task)
        with self._lock:
            if self._stuck >= MAX_STUCK_CALLS:
                raise self._timeout_error(
                    f"{self._stuck} timed-out {self._what} calls are still outstanding "
                    f"(MAX_STUCK_CALLS={MAX_STUCK_CALLS}); not starting another"
                )
            if self._idle:
                self._idle -= 1
            else:
                name = f"tiermem-{self._what}"
                threading.Thread(target=self._work, name=name, daemon=True).start()
        self._calls.put(call)
        # A lock wait longer than TIMEOUT_MAX (an infinite timeout, say) overflows.
        if not call.done.acquire(timeout=min(timeout, threading.TIMEOUT_MAX)):
            with self._lock:
                if call.outcome is _PENDING:  # else it answered just now: use the answer
                    call.abandoned = True
                    self._stuck += 1
                    raise self._timeout_error(f"{self._what} did not answer within {timeout} s")
        return call.outcome

    def _work(self) -> None:
        while True:
            call = self._calls.get()
            try:
                call.outcome = ("ok", call.task())
            except BaseException as exc:  # handed back to the caller's thread
                call.outcome = ("error", exc)
            with self._lock:
                if call.abandoned:
                    self._stuck -= 1
                keep = self._idle < MAX_IDLE_WORKERS
                if keep:
                    self._idle += 1
            call.done.release()
            if not keep:
                return


_WORKERS = DaemonWorkers()


def make_summarizer(summarizer: SummarizerLike | str | None) -> Summarizer | None:
    """A :class:`Summarizer` over a chat model, Runnable or callable (``None``: none),
    or over the chat model a ``"provider:model"`` string names (``init_chat_model``).

    Raises:
        InvalidArgument: for anything else, or a named model that cannot be made.
    """
    if summarizer is None:
        return None
    if isinstance(summarizer, str):
        summarizer = chat_model_from_name(summarizer)
    if not callable(summarizer) and not hasattr(summarizer, "invoke"):
        raise InvalidArgument(
            "summarizer must be a chat model, Runnable, callable or 'provider:model' name"
        )
    return Summarizer(summarizer)


def _reset_after_fork() -> None:
    """Give a forked child its own empty worker pool."""
    global _WORKERS
    _WORKERS = DaemonWorkers()


os.register_at_fork(after_in_child=_reset_after_fork)


async def _awaited(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def _wrap(error: BaseException) -> BaseException:
    """SummarizationErrors pass; other Exceptions become SummarizerFailed; BaseExceptions
    (KeyboardInterrupt, CancelledError) propagate unchanged."""
    if isinstance(error, SummarizationError) or not isinstance(error, Exception):
        return error
    wrapped = SummarizerFailed(f"summarizer raised {type(error).__name__}: {error}")
    wrapped.__cause__ = error
    return wrapped
