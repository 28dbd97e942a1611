"""Compression planning and the summarizer: pure code shared by sync and async paths.

The protocol (see ``ConversationMemory.compress``): claim the session and
pick the entries in one short transaction, call the summarizer outside any
transaction, then commit the summary only if the claim and the entries are
unchanged. This module holds the parts without I/O: which entries to take,
the prompt, the heuristic summary, and validation of what a model returns.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import queue
import re
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable

from .._core.messages import render_text, tool_call_ids
from ..errors import (
    InvalidArgument,
    SummarizationError,
    SummarizerFailed,
    SummarizerOutputInvalid,
    SummarizerTimeout,
)
from ..tokens import TokenCounter
from ..types import EntryType, MemoryConfig, MemoryEntry

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "Summarizer",
    "SummarizerLike",
    "build_prompt",
    "conversation_lines",
    "fit_prompt",
    "fit_summary",
    "heuristic_summary",
    "normalize_output",
    "select_entries",
    "summary_prompt",
    "summary_target",
]

#: Anything that can summarize: a chat model, a Runnable, or a callable taking the
#: prompt text and returning (or awaiting) a str or message.
SummarizerLike = Runnable[Any, Any] | Callable[[str], Any]

DEFAULT_SUMMARY_PROMPT = """\
Summarize the conversation below so that it can be continued without the original messages.
Cover: the key topics discussed; decisions made; tools used and their outcomes; \
errors encountered; the context needed to continue.
Write at most about {target_tokens} tokens. Reply with the summary only.

Conversation:
{conversation}"""

_ENTRY_PREVIEW_CHARS = 8_000
_ERROR_STUB = re.compile(
    r"^\s*(error generating summary|error:|an error occurred|i'?m sorry|i am sorry|"
    r"i cannot|i can'?t|as an ai\b)",
    re.IGNORECASE,
)
_PROMPT_ECHO = "Summarize the conversation below"


# --------------------------------------------------------------------------- selection


def _group_ends(active: Sequence[MemoryEntry]) -> dict[int, int | None]:
    """Index of each tool-call entry -> index of its last result, ``None`` while a call
    is unanswered. Results pair with the latest earlier call of their id, so an id
    reused after it was answered starts a new group."""
    ends: dict[int, int | None] = {}
    missing: dict[int, int] = {}
    open_calls: dict[str, int] = {}
    for index, entry in enumerate(active):
        message = entry.message
        if isinstance(message, ToolMessage):
            owner = open_calls.pop(message.tool_call_id, None)
            if owner is not None:
                missing[owner] -= 1
                ends[owner] = index
        ids = tool_call_ids(message)
        if ids:
            open_calls.update(dict.fromkeys(ids, index))
            missing[index], ends[index] = len(ids), index
    return {index: end if missing[index] == 0 else None for index, end in ends.items()}


def _safe_prefix(active: Sequence[MemoryEntry], length: int) -> int:
    """Shrink ``length`` until ``active[:length]`` holds no unanswered tool call and
    no call whose results lie beyond it (a tool group is never split)."""
    ends = _group_ends(active)
    changed = True
    while changed and length > 0:
        changed = False
        for index in range(length):
            end = ends.get(index, index)
            if end is None or end >= length:
                length, changed = index, True
                break
    return length


def select_entries(
    active: Sequence[MemoryEntry], config: MemoryConfig, *, force: bool, keep: int | None = None
) -> list[MemoryEntry]:
    """The oldest active entries to compress, or ``[]`` when there is nothing to do.

    Pinned context is never taken. The newest ``keep`` (default
    ``recent_window``) unpinned entries stay; the run stops before the first
    unanswered tool call and never splits a call from its results; the run is
    capped at ``max_summarizer_input_tokens``. Without ``force`` fewer than
    ``min_entries_to_compress`` entries is nothing to do.
    """
    window = config.recent_window if keep is None else keep
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise InvalidArgument(f"keep must be an int >= 0, got {window!r}")
    unpinned = [entry for entry in active if not entry.pinned]
    length = max(len(unpinned) - window, 0)
    budget, capped = config.max_summarizer_input_tokens, 0
    for index in range(length):
        budget -= unpinned[index].token_count
        if budget < 0:
            capped = max(index, 1)
            break
    if capped:
        length = min(length, capped)
    length = _safe_prefix(unpinned, length)
    minimum = 1 if force else config.min_entries_to_compress
    return unpinned[:length] if length >= minimum else []


# --------------------------------------------------------------------------- prompt


def _line(entry: MemoryEntry) -> str:
    text = render_text(entry.message)
    if len(text) > _ENTRY_PREVIEW_CHARS:
        text = text[:_ENTRY_PREVIEW_CHARS] + " [...truncated]"
    message = entry.message
    if isinstance(message, ToolMessage):
        status = " (error)" if message.status == "error" else ""
        return f"Tool result{status} ({message.name or 'tool'}): {text}"
    if isinstance(message, AIMessage) and message.tool_calls:
        return f"Assistant called tools: {text}"
    label = {"user": "User", "assistant": "Assistant", "system": "System"}.get(entry.role, "Tool")
    return f"{label}: {text}"


def conversation_lines(entries: Sequence[MemoryEntry], summaries: Sequence[str] = ()) -> list[str]:
    """The conversation as plain text lines (earlier summaries first), media as
    placeholders, each entry cut at a preview length."""
    lines = [f"[Earlier summary] {text}" for text in summaries]
    lines.extend(_line(entry) for entry in entries)
    return lines


def render_conversation(entries: Sequence[MemoryEntry], summaries: Sequence[str] = ()) -> str:
    """The conversation as one text, a line per summary and entry."""
    return "\n".join(conversation_lines(entries, summaries))


_PLACEHOLDER = re.compile(r"\{(conversation|target_tokens)\}")


def build_prompt(conversation: str, target_tokens: int, template: str | None = None) -> str:
    """Fill the summary prompt (the default, or ``MemoryConfig.summary_prompt``).

    Only ``{conversation}`` and ``{target_tokens}`` are replaced, in one pass (so
    neither is looked for in the text substituted for the other); every other brace
    stays as written, so a template may hold a JSON example.
    """
    values = {"conversation": conversation, "target_tokens": str(target_tokens)}
    return _PLACEHOLDER.sub(
        lambda match: values[match.group(1)], template or DEFAULT_SUMMARY_PROMPT
    )


_TRUNCATED = " [...truncated]"
#: Rounds of cutting before giving up: each round removes at least what was over.
_FIT_ROUNDS = 8


def fit_prompt(
    lines: Sequence[str],
    target_tokens: int,
    counter: TokenCounter,
    limit: int,
    template: str | None = None,
) -> str:
    """The summary prompt for ``lines``, at most ``limit`` tokens in all
    (``max_summarizer_input_tokens``: the template's own words count too).

    When the whole prompt would be longer, the longest lines are cut to a common
    length (each keeps its start and ends with ``[...truncated]``), so every entry
    still reaches the model. Shorter prompts are returned without counting.

    Raises:
        InvalidArgument: when ``limit`` leaves no room for the conversation.
    """
    prompt = build_prompt("\n".join(lines), target_tokens, template)
    # A token covers at least one UTF-8 byte: a prompt of at most ``limit`` bytes
    # fits, and typical prompts (a few kB against a budget of thousands) stop here.
    if len(prompt) <= limit and len(prompt.encode("utf-8", "surrogatepass")) <= limit:
        return prompt
    over = counter.count_text(prompt) - limit
    if over <= 0:
        return prompt
    sizes = [counter.count_text(line) for line in lines]
    marker = counter.count_text(_TRUNCATED)
    budget = sum(sizes)
    for _ in range(_FIT_ROUNDS):
        budget -= over
        cap = _common_cap(sizes, budget)
        if cap <= marker:
            raise InvalidArgument(
                f"max_summarizer_input_tokens={limit} leaves no room for the conversation "
                f"of {len(lines)} lines (the prompt's own words take part of it)"
            )
        cut = [
            line if size <= cap else counter.truncate(line, cap - marker) + _TRUNCATED
            for line, size in zip(lines, sizes, strict=True)
        ]
        prompt = build_prompt("\n".join(cut), target_tokens, template)
        over = counter.count_text(prompt) - limit
        if over <= 0:
            return prompt
    raise InvalidArgument(f"cannot fit the summary prompt in {limit} tokens")


def summary_prompt(
    lines: Sequence[str], original_tokens: int, config: MemoryConfig, counter: TokenCounter
) -> str:
    """The prompt that asks for a summary of ``lines`` (``original_tokens`` in all):
    ``compression_ratio`` of them as the target length, within
    ``max_summarizer_input_tokens`` (see :func:`fit_prompt`)."""
    target = summary_target(original_tokens, config)
    return fit_prompt(
        lines, target, counter, config.max_summarizer_input_tokens, config.summary_prompt
    )


def summary_target(original_tokens: int, config: MemoryConfig) -> int:
    """The length a summary of ``original_tokens`` is asked for:
    ``compression_ratio`` of them, at least 16 tokens."""
    return max(int(original_tokens * config.compression_ratio), 16)


def _common_cap(sizes: Sequence[int], budget: int) -> int:
    """The largest ``cap`` with ``sum(min(size, cap)) <= budget`` (0 if none)."""
    remaining, left = budget, len(sizes)
    for size in sorted(sizes):
        if size * left > remaining:
            return max(remaining // left, 0)
        remaining -= size
        left -= 1
    return max(sizes, default=0)


def _is_error(entry: MemoryEntry) -> bool:
    message = entry.message
    return isinstance(message, ToolMessage) and (
        message.status == "error" or render_text(message).lower().startswith("error")
    )


def heuristic_summary(
    entries: Sequence[MemoryEntry], summaries: Sequence[str] = (), *, quote: int = 100
) -> str:
    """The seed's fallback summary, used without a model or when configured; it
    quotes up to ``quote`` characters of the first and last user message (1.5 times
    that of the first and last summary when merging)."""
    users = [render_text(e.message) for e in entries if e.role == "user"]
    tools = sorted({e.message.name or "tool" for e in entries if e.type is EntryType.TOOL_RESULT})
    errors = sum(1 for e in entries if _is_error(e))
    if summaries:
        # Merging summaries: keep the start of the oldest and of the newest.
        long = quote * 3 // 2
        return (
            f"[Previous conversation summary] {len(summaries)} earlier summaries, "
            f"First: {summaries[0][:long]}, Last: {summaries[-1][:long]}"
        )
    parts = [f"[Previous conversation summary] {len(users)} user messages"]
    if users:
        parts.append(f"First: {users[0][:quote]}")
        parts.append(f"Last: {users[-1][:quote]}")
    if tools:
        parts.append(f"Tools used: {', '.join(tools)}")
    if errors:
        parts.append(f"{errors} errors encountered")
    return ", ".join(parts)


#: Quote lengths tried, longest first, until a heuristic summary fits its target.
_QUOTES = (100, 60, 30, 10, 0)


def fit_summary(
    make: Callable[[int], str], original_tokens: int, config: MemoryConfig, counter: TokenCounter
) -> str:
    """A heuristic summary (``make(quote)``, see :func:`heuristic_summary`) within its
    target length and always shorter than the ``original_tokens`` it replaces, so it
    fits at any budget: shorter quotes first, then the text is cut."""
    limit = min(summary_target(original_tokens, config), original_tokens - 1)
    text = ""
    for quote in _QUOTES:
        text = make(quote)
        if counter.count_text(text) <= limit:
            return text
    # Nothing is shorter than one token: then validation refuses the summary.
    return counter.truncate(text, limit) if limit >= 1 else text


# --------------------------------------------------------------------------- output


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
    if _ERROR_STUB.match(text) or _PROMPT_ECHO in text:
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


class _DaemonWorkers:
    """Daemon threads that run timed summarizer calls.

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

    def __init__(self) -> None:
        self._calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self._idle = 0
        self._stuck = 0
        self._lock = threading.Lock()

    def call(self, task: Callable[[], Any], timeout: float) -> tuple[str, Any]:
        """Run ``task`` on a worker: ``("ok", result)`` or ``("error", exception)``.

        Raises:
            SummarizerTimeout: no answer within ``timeout`` seconds, or
                :data:`MAX_STUCK_CALLS` earlier calls still hold their threads.
        """
        call = _Call(task)
        with self._lock:
            if self._stuck >= MAX_STUCK_CALLS:
                raise SummarizerTimeout(
                    f"{self._stuck} timed-out summarizer calls are still outstanding "
                    f"(MAX_STUCK_CALLS={MAX_STUCK_CALLS}); not starting another"
                )
            if self._idle:
                self._idle -= 1
            else:
                threading.Thread(target=self._work, name="tiermem-summarizer", daemon=True).start()
        self._calls.put(call)
        # A lock wait longer than TIMEOUT_MAX (an infinite timeout, say) overflows.
        if not call.done.acquire(timeout=min(timeout, threading.TIMEOUT_MAX)):
            with self._lock:
                if call.outcome is _PENDING:  # else it answered just now: use the answer
                    call.abandoned = True
                    self._stuck += 1
                    raise SummarizerTimeout(f"summarizer did not answer within {timeout} s")
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


_WORKERS = _DaemonWorkers()


def _reset_after_fork() -> None:
    """Give a forked child its own empty worker pool."""
    global _WORKERS
    _WORKERS = _DaemonWorkers()


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
