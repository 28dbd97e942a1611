"""Writing operations: appends (one message, several, tool results, context) and
clearing a session (the turn, an append that reads the next context, is
:mod:`tiermem._ops.turn`).

An append validates, serializes and counts its messages before any transaction
opens, then writes them in one transaction that also records the access; when the
append leaves the session over budget it plans the compression in that same
transaction and runs it before returning (or queues it, in background mode).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from .._core.context import MemoryContext
from .._core.messages import (
    check_entry_size,
    check_message_id,
    classify,
    hollow,
    remember,
    render_text,
    serialize,
    serialize_metadata,
    store_text,
    stored_message,
    validate_session_id,
)
from .._core.runner import Op, compute
from .._storage import cascade, sessions, store
from .._storage import failpoints as _failpoints
from .._storage.database import Connection
from .._storage.rows import SessionRecord
from .._storage.store import MessageWindow
from ..errors import BudgetExceeded, InvalidContent, SessionNotFound
from ..events import EntryAdded, Event, SessionCleared
from ..types import EntryType, MemoryEntry
from . import feed
from .compress import (
    Planned,
    auto_compress,
    new_claim_token,
    plan_compression,
    releasing_claim,
)
from .compress_budget import compression_wanted
from .embed import queue_entries
from .expectation import Expected

__all__ = [
    "Attached",
    "Expected",
    "Stored",
    "add_context",
    "add_message",
    "add_messages",
    "add_text",
    "add_tool_call",
    "add_tool_result",
    "append_attached",
    "clear",
    "prepare_messages",
]


@dataclass(frozen=True, slots=True)
class Attached:
    """Work done in an append's own transaction (see :func:`append_attached`).

    Attributes:
        choose: picks, from the prepared entries, those to append (it may read what
            the session holds); runs first.
        after: runs once they are stored, with the session's pk and the stored
            entries (in the order ``choose`` returned them).
    """

    choose: Callable[[Connection, list[store.NewEntry]], list[store.NewEntry]]
    after: Callable[[Connection, int, list[MemoryEntry]], None]


def _prepare(
    ctx: MemoryContext,
    message: BaseMessage,
    *,
    pinned: bool = False,
    metadata: Mapping[str, Any] | None = None,
    entry_type: EntryType | None = None,
) -> store.NewEntry:
    """Validate, serialize and count a message before any transaction opens."""
    message_json = serialize(message, max_chars=ctx.config.max_entry_chars)
    check_message_id(message)
    metadata_json = serialize_metadata(metadata or {})
    check_entry_size(message_json, metadata_json, ctx.config.max_entry_chars)
    text = render_text(message)
    kept = hollow(message_json, message, text)
    # The turn reads it straight back, by the key a read of its row makes.
    remember(stored_message(kept, store_text(text)), message)
    classified, role = classify(message)
    return store.NewEntry(
        message=message,
        type=entry_type or classified,
        role=role,
        content=text,
        message_json=message_json,
        stored_json=kept,
        token_count=ctx.counter.count_message(message),
        pinned=pinned,
        metadata_json=metadata_json,
    )


#: Messages of more characters than this are serialized and counted off the event
#: loop under the async API (a worker thread); smaller ones cost less than the hop.
OFFLOAD_CHARS = 65_536


def _size(message: BaseMessage) -> int:
    """About how many characters serializing ``message`` reads: its text and the
    strings of its content blocks two levels down (an image URL), never recursing,
    since validation of what is nested deeper comes later."""
    content = message.content
    if isinstance(content, str):
        return len(content)
    size = 0
    for block in content if isinstance(content, list) else ():
        values = [block] if isinstance(block, str) else _values(block)
        for value in values:
            if isinstance(value, str):
                size += len(value)
            else:
                size += sum(len(inner) for inner in _values(value) if isinstance(inner, str))
    return size


def _values(value: object) -> list[object]:
    return list(value.values()) if isinstance(value, dict) else []


def _prepare_all(
    ctx: MemoryContext,
    messages: Sequence[BaseMessage],
    *,
    pinned: bool = False,
    metadata: Mapping[str, Any] | None = None,
    entry_type: EntryType | None = None,
) -> Op[list[store.NewEntry]]:
    """:func:`_prepare` each message: in place when they are small, as a
    computation (off the event loop under the async API) when they are large."""

    def work() -> list[store.NewEntry]:
        return [
            _prepare(ctx, m, pinned=pinned, metadata=metadata, entry_type=entry_type)
            for m in messages
        ]

    if sum(_size(m) for m in messages if isinstance(m, BaseMessage)) <= OFFLOAD_CHARS:
        return work()
    return (yield from compute(work))


#: Validate, serialize and count messages before a transaction (for extensions that
#: append with :func:`append_attached`).
prepare_messages = _prepare_all


def append_attached(
    ctx: MemoryContext,
    session_id: str,
    prepared: Sequence[store.NewEntry],
    attached: Attached,
) -> Op[list[MemoryEntry]]:
    """Append what ``attached.choose`` keeps of ``prepared`` and run
    ``attached.after``, all in one transaction (as any append: counted, indexed,
    announced in the change feed, compressed when due); the entries stored."""
    stored = yield from _store(
        ctx, session_id, prepared, skip_existing=False, with_window=False, attached=attached
    )
    return stored.entries


def _append(
    ctx: MemoryContext, session_id: str, prepared: Sequence[store.NewEntry]
) -> Op[MemoryEntry]:
    stored = yield from _store(ctx, session_id, prepared, skip_existing=False, with_window=False)
    return stored.entries[0]


def _check_pinned(ctx: MemoryContext, tokens: int) -> None:
    """Pinned context is never left out of a context, so it must fit the budget."""
    if tokens > ctx.config.max_tokens:
        raise BudgetExceeded(
            f"pinned context would take {tokens} tokens, more than "
            f"max_tokens={ctx.config.max_tokens}; pin less or raise max_tokens"
        )


#: No expectation: the append is not checked.
_NOTHING_EXPECTED = Expected()


class Stored(NamedTuple):
    """What an append stored, and the window ``get_messages`` shows when asked for
    (``None``: not asked, or not read on the way: the caller reads it)."""

    entries: list[MemoryEntry]
    window: MessageWindow | None


class _Append(NamedTuple):
    """An append as asked, with the time it is made at and the compression claim
    token it takes if it plans a compression."""

    session_id: str
    prepared: Sequence[store.NewEntry]
    skip_existing: bool
    with_window: bool
    expected: Expected
    attached: Attached | None
    now: datetime
    token: str


class _Written(NamedTuple):
    """What the append's transaction did: the entries it stored, the session row it
    left, the window it read, whether a compression follows the commit (and its
    first round, when planned there), and the events to signal."""

    entries: list[MemoryEntry]
    counters: SessionRecord
    window: MessageWindow | None
    compress: bool
    planned: Planned | None
    pending: list[Event]


def _store(
    ctx: MemoryContext,
    session_id: str,
    prepared: Sequence[store.NewEntry],
    *,
    skip_existing: bool,
    with_window: bool,
    expected: Expected = _NOTHING_EXPECTED,
    attached: Attached | None = None,
) -> Op[Stored]:
    """Append in one transaction; with ``with_window`` also read what
    ``get_messages`` shows: in the same transaction when no compression
    follows, else in the compression's last commit (``None`` when that did not
    happen: the caller reads after it). With an ``expected`` session state, append
    only if the session is in it (else :class:`StaleContext`)."""
    validate_session_id(session_id)
    append = _Append(
        session_id,
        prepared,
        skip_existing,
        with_window,
        expected,
        attached,
        ctx.now(),
        new_claim_token(),
    )
    # The append may take the compression claim: a cancelled caller releases it.
    op = _append_then_compress(ctx, append)
    return (yield from releasing_claim(ctx, session_id, append.token, op))


def _append_then_compress(ctx: MemoryContext, append: _Append) -> Op[Stored]:
    """The append's transaction, then its signals, its embeddings queued and the
    compression it triggered."""
    written = yield from ctx.transact(lambda conn: _write(ctx, conn, append))
    _failpoints.hit("append.after_commit")
    yield from ctx.emit(written.pending)
    if written.entries:
        queue_entries(ctx, [entry.id for entry in written.entries])
    window = written.window
    if written.compress:
        outcome = yield from auto_compress(
            ctx,
            append.session_id,
            written.planned,
            with_window=append.with_window and window is None,
        )
        if window is None:
            window = outcome.window
    return Stored(written.entries, window)


def _write(ctx: MemoryContext, conn: Connection, append: _Append) -> _Written:
    """In the append's transaction: store what is new, or only record the access."""
    todo = list(append.prepared)
    if append.attached is not None:
        todo = append.attached.choose(conn, todo)
    if not todo:
        return _record_access(ctx, conn, append, None)
    reserved = _reserve(ctx, conn, append, todo)
    if append.skip_existing or append.expected.active:
        todo, reserved = _drop_known(conn, append, todo, reserved)
    if not todo:
        return _record_access(ctx, conn, append, reserved)
    return _add_entries(ctx, conn, append, reserved, todo)


def _session(ctx: MemoryContext, conn: Connection, append: _Append) -> SessionRecord:
    """The session's row, created on its first append."""
    return sessions.get_session(
        conn,
        ctx.project,
        append.session_id,
        create=True,
        now=append.now,
        encoding=ctx.counter.encoding_name,
    )


def _reserve(
    ctx: MemoryContext, conn: Connection, append: _Append, todo: Sequence[store.NewEntry]
) -> SessionRecord:
    """Allocate the seqs of ``todo`` and lock the session, in one UPDATE ...
    RETURNING (the session is created only on its first append)."""
    count, tokens = _counted(todo)
    reserved = sessions.reserve(conn, ctx.project, append.session_id, count, tokens, append.now)
    if reserved is None:
        _session(ctx, conn, append)
        reserved = sessions.reserve(conn, ctx.project, append.session_id, count, tokens, append.now)
    if reserved is None:  # pragma: no cover - the row was just created
        raise SessionNotFound(append.session_id)
    return reserved


def _counted(entries: Sequence[store.NewEntry]) -> tuple[int, int]:
    """How many entries, and their tokens."""
    return len(entries), sum(entry.token_count for entry in entries)


def _drop_known(
    conn: Connection,
    append: _Append,
    todo: list[store.NewEntry],
    reserved: SessionRecord,
) -> tuple[list[store.NewEntry], SessionRecord]:
    """Leave out the messages whose ids the session holds (``skip_existing``) and
    check the ``expected`` state; what is left to append and the reservation.

    Checked under the session's lock, which the reservation took: a retry racing
    the append it repeats finds that append's ids, and no other append can come
    between the expected state and these."""
    ids = [e.message.id for e in todo if e.message.id] if append.skip_existing else []
    newest = reserved.last_seq - len(todo)  # before this append's reservation
    seen: set[str] = set()
    newest_id = None
    if ids or append.expected.by_id:
        seen, newest_id = store.known_entries(conn, reserved.pk, ids, newest)
    if seen:
        known = [e for e in todo if e.message.id and e.message.id in seen]
        todo = [e for e in todo if not (e.message.id and e.message.id in seen)]
        reserved = sessions.release(conn, reserved, *_counted(known))
    if todo:
        # Raised inside the transaction: it rolls back, nothing is written.
        now_at = store.session_version(reserved, newest)
        append.expected.check(append.session_id, now_at, newest, newest_id)
    return todo, reserved


def _record_access(
    ctx: MemoryContext, conn: Connection, append: _Append, reserved: SessionRecord | None
) -> _Written:
    """Nothing to append: record the access (the reservation did, if one was made)."""
    if reserved is None:
        session, woken = sessions.touch(conn, _session(ctx, conn, append), append.now)
    else:
        session, woken = sessions.activate(conn, reserved)
    pending = feed.woken(ctx, append.session_id, woken)
    feed.record(ctx, conn, pending)
    if append.attached is not None:
        append.attached.after(conn, session.pk, [])
    return _finish(ctx, conn, append, [], session, pending, plan=False)


def _add_entries(
    ctx: MemoryContext,
    conn: Connection,
    append: _Append,
    reserved: SessionRecord,
    todo: list[store.NewEntry],
) -> _Written:
    """Store ``todo`` under the reservation, with their change-feed events."""
    reserved, woken = sessions.activate(conn, reserved)
    pending = feed.woken(ctx, append.session_id, woken)
    feed.record(ctx, conn, pending)  # first: the entries' events follow it
    entries, counters = store.append(
        conn, reserved, todo, append.now, feed.entry_events(ctx, append.session_id)
    )
    if any(entry.pinned for entry in todo):
        _check_pinned(ctx, store.pinned_tokens(conn, reserved.pk))
    if append.attached is not None:
        append.attached.after(conn, reserved.pk, entries)
    # Their events were written with them.
    pending += [EntryAdded(append.session_id, entry) for entry in entries]
    written = _finish(ctx, conn, append, entries, counters, pending, plan=True)
    _failpoints.hit("append.before_commit")
    return written


def _finish(
    ctx: MemoryContext,
    conn: Connection,
    append: _Append,
    entries: list[MemoryEntry],
    counters: SessionRecord,
    pending: list[Event],
    *,
    plan: bool,
) -> _Written:
    """End the append's transaction: ask once whether a compression follows the
    commit, plan its first round here when ``plan``, and read the window unless a
    compression that runs before the call returns will change it."""
    compress = compression_wanted(ctx, counters, append.now)
    compresses_now = compress and not ctx.config.background
    planned = None
    if compresses_now and plan:
        # The row is locked already: plan the compression (pick the entries,
        # take the claim) here rather than in a transaction of its own.
        planned = plan_compression(ctx, conn, counters, append.now, token=append.token)
    window = None
    if append.with_window and not compresses_now:
        window = store.read_message_window(conn, counters)
    return _Written(entries, counters, window, compress, planned, pending)


def add_message(
    ctx: MemoryContext,
    session_id: str,
    message: BaseMessage,
    metadata: Mapping[str, Any] | None = None,
) -> Op[MemoryEntry]:
    """Store any LangChain message (see ``ConversationMemory.add_message``)."""
    prepared = yield from _prepare_all(ctx, [message], metadata=metadata)
    return (yield from _append(ctx, session_id, prepared))


def add_text(
    ctx: MemoryContext, session_id: str, role: str, text: str, metadata: Mapping[str, Any]
) -> Op[MemoryEntry]:
    """Store a user (``role="human"``) or assistant (``"ai"``) message of plain text."""
    message_type = HumanMessage if role == "human" else AIMessage
    return (yield from add_message(ctx, session_id, message_type(content=_text(text)), metadata))


#: ``skip_existing`` looks for known ids in a read transaction of its own, before
#: serializing and counting, only for batches of more messages with ids than this: a
#: resent state is long, while for a turn's few messages that transaction costs more
#: than the work it saves (the append checks the ids again under the session lock).
PRECHECK_IDS = 8


def add_messages(
    ctx: MemoryContext,
    session_id: str,
    messages: Sequence[BaseMessage],
    skip_existing: bool,
    *,
    with_window: bool = False,
    expected: Expected = _NOTHING_EXPECTED,
) -> Op[Stored]:
    """Store several messages in one transaction: all or none (``with_window`` and
    ``expected``: see :func:`_store`)."""
    validate_session_id(session_id)
    messages = list(messages)
    ids = [m.id for m in messages if isinstance(m, BaseMessage) and m.id]
    if skip_existing and len(ids) > PRECHECK_IDS:
        # Resuming agents resend their whole state: drop known ids before the
        # costly serialize-and-count; the append re-checks inside its transaction.
        seen = yield from ctx.transact(
            lambda conn: store.stored_message_ids(conn, ctx.project, session_id, ids),
            write=False,
        )
        messages = [m for m in messages if not m.id or m.id not in seen]
    prepared = yield from _prepare_all(ctx, messages)
    return (
        yield from _store(
            ctx,
            session_id,
            prepared,
            skip_existing=skip_existing,
            with_window=with_window,
            expected=expected,
        )
    )


def add_tool_call(
    ctx: MemoryContext,
    session_id: str,
    tool_name: str,
    args: Mapping[str, Any],
    call_id: str | None,
) -> Op[MemoryEntry]:
    """Store an assistant tool call (``call_id`` generated when omitted)."""
    if not isinstance(args, Mapping):
        raise InvalidContent("tool call args must be a mapping")
    message = AIMessage(
        content="",
        tool_calls=[
            {
                "name": _text(tool_name),
                "args": dict(args),
                "id": call_id or f"call_{uuid.uuid4().hex}",
            }
        ],
    )
    return (yield from add_message(ctx, session_id, message))


def add_tool_result(
    ctx: MemoryContext, session_id: str, tool_name: str, output: str, call_id: str | None
) -> Op[MemoryEntry]:
    """Store a tool result answering ``call_id`` or the oldest pending call of the tool."""
    validate_session_id(session_id)
    _text(tool_name)
    _text(output)
    if call_id is not None and not isinstance(call_id, str):
        raise InvalidContent(f"call_id must be a str or None, got {type(call_id).__name__}")
    if not call_id:
        call_id = yield from _pending_call(ctx, session_id, tool_name)
    message = ToolMessage(content=output, name=tool_name, tool_call_id=call_id)
    return (yield from add_message(ctx, session_id, message))


def _pending_call(ctx: MemoryContext, session_id: str, tool_name: str) -> Op[str]:
    def work(conn: Connection) -> str:
        try:
            session = sessions.get_session(conn, ctx.project, session_id, lock=False)
        except SessionNotFound:
            session = None
        pending: dict[str, str] = json.loads(session.pending_calls) if session else {}
        # pending_calls keeps the calls in the order they were made.
        for call_id, name in pending.items():
            if name == tool_name:
                return call_id
        raise InvalidContent(f"no pending call of tool {tool_name!r} in {session_id!r}")

    return (yield from ctx.transact(work, write=False))


def add_context(
    ctx: MemoryContext, session_id: str, content: str, source: str, pinned: bool
) -> Op[MemoryEntry]:
    """Store context: a system message from ``source``, pinned or not."""
    message = SystemMessage(content=_text(content), additional_kwargs={"source": source})
    prepared = yield from _prepare_all(
        ctx, [message], pinned=pinned, metadata={"source": source}, entry_type=EntryType.CONTEXT
    )
    return (yield from _append(ctx, session_id, prepared))


def clear(ctx: MemoryContext, session_id: str) -> Op[int]:
    """Delete a session with its entries and summaries; the entries removed."""
    validate_session_id(session_id)

    def work(conn: Connection) -> tuple[int, list[Event]]:
        try:
            session = sessions.get_session(conn, ctx.project, session_id)
        except SessionNotFound:
            return 0, []
        cascade.delete_sessions(conn, [session.pk])
        removed = session.entry_count
        return removed, [SessionCleared(session_id, removed)]

    return (yield from feed.transact_recorded(ctx, work))


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidContent(f"text must be a str, got {type(value).__name__}")
    return value
