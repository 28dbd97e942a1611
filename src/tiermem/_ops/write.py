"""Writing operations: appends (one message, several, a model turn, tool results,
context) and clearing a session.

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
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from .._core.context import MemoryContext
from .._core.messages import (
    check_entry_size,
    check_message_id,
    classify,
    remember,
    render_text,
    serialize,
    serialize_metadata,
    validate_session_id,
)
from .._core.runner import Op, compute
from .._storage import cascade, store
from .._storage import failpoints as _failpoints
from .._storage.database import Connection
from .._storage.rows import SessionRecord
from ..errors import (
    BudgetExceeded,
    ContextReadFailed,
    InvalidContent,
    SessionNotFound,
    TiermemError,
)
from ..events import EntryAdded, Event, SessionCleared
from ..types import ContextMessages, EntryType, MemoryEntry
from . import feed
from .compress import (
    Planned,
    auto_compress,
    compression_due,
    new_claim_token,
    plan_compression,
    releasing_claim,
)
from .embed import queue_entries
from .expectation import Expected
from .read import MessageWindow, message_window, render_window
from .recall import check_query

__all__ = [
    "Attached",
    "Expected",
    "add_context",
    "add_message",
    "add_messages",
    "add_text",
    "add_tool_call",
    "add_tool_result",
    "add_turn",
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
    remember(message_json, message)  # the turn reads it straight back
    classified, role = classify(message)
    return store.NewEntry(
        message=message,
        type=entry_type or classified,
        role=role,
        content=render_text(message),
        message_json=message_json,
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
    entries, _ = yield from _store(
        ctx, session_id, prepared, skip_existing=False, with_window=False, attached=attached
    )
    return entries


def _append(
    ctx: MemoryContext, session_id: str, prepared: Sequence[store.NewEntry]
) -> Op[MemoryEntry]:
    entries, _ = yield from _store(
        ctx, session_id, prepared, skip_existing=False, with_window=False
    )
    return entries[0]


def _check_pinned(ctx: MemoryContext, tokens: int) -> None:
    """Pinned context is never left out of a context, so it must fit the budget."""
    if tokens > ctx.config.max_tokens:
        raise BudgetExceeded(
            f"pinned context would take {tokens} tokens, more than "
            f"max_tokens={ctx.config.max_tokens}; pin less or raise max_tokens"
        )


#: No expectation: the append is not checked.
_NOTHING_EXPECTED = Expected()


def _store(
    ctx: MemoryContext,
    session_id: str,
    prepared: Sequence[store.NewEntry],
    *,
    skip_existing: bool,
    with_window: bool,
    expected: Expected = _NOTHING_EXPECTED,
    attached: Attached | None = None,
) -> Op[tuple[list[MemoryEntry], MessageWindow | None]]:
    """Append in one transaction; with ``with_window`` also read what
    ``get_messages`` shows: in the same transaction when no compression
    follows, else in the compression's last commit (``None`` when that did not
    happen: the caller reads after it). With an ``expected`` session state, append
    only if the session is in it (else :class:`StaleContext`)."""
    validate_session_id(session_id)
    now, token = ctx.now(), new_claim_token()

    def create(conn: Connection) -> SessionRecord:
        return store.get_session(
            conn, ctx.project, session_id, create=True, now=now, encoding=ctx.counter.encoding_name
        )

    def window(conn: Connection, session: SessionRecord) -> MessageWindow | None:
        if not with_window or compression_due(ctx, session, now):
            return None
        return store.read_message_window(conn, session)

    def _reserve(conn: Connection, todo: Sequence[store.NewEntry]) -> SessionRecord:
        # One UPDATE ... RETURNING allocates the seqs and locks the session, which
        # is created only on its first append.
        reserved = store.reserve(conn, ctx.project, session_id, todo, now)
        if reserved is None:
            create(conn)
            reserved = store.reserve(conn, ctx.project, session_id, todo, now)
        if reserved is None:  # pragma: no cover - the row was just created
            raise SessionNotFound(session_id)
        return reserved

    def work(
        conn: Connection,
    ) -> tuple[list[MemoryEntry], SessionRecord, MessageWindow | None, Planned | None, list[Event]]:
        todo = list(prepared) if attached is None else attached.choose(conn, list(prepared))
        reserved = _reserve(conn, todo) if todo else None
        if reserved is not None and (skip_existing or expected.active):
            # Checked under the session's lock, which the reservation took: a retry
            # racing the append it repeats finds that append's ids, and no other
            # append can come between the expected state and these.
            ids = [e.message.id for e in todo if e.message.id] if skip_existing else []
            newest = reserved.last_seq - len(todo)  # before this append's reservation
            seen: set[str] = set()
            newest_id = None
            if ids or expected.by_id:
                seen, newest_id = store.known_entries(conn, reserved.pk, ids, newest)
            if seen:
                known = [e for e in todo if e.message.id and e.message.id in seen]
                todo = [e for e in todo if not (e.message.id and e.message.id in seen)]
                reserved = store.release(conn, reserved, known)
            if todo:
                # Raised inside the transaction: it rolls back, nothing is written.
                now_at = store.session_version(reserved, newest)
                expected.check(session_id, now_at, newest, newest_id)
        if reserved is None or not todo:
            if reserved is None:
                session, woken = store.touch(conn, create(conn), now)
            else:  # the reservation recorded the access
                session, woken = store.activate(conn, reserved)
            pending = feed.woken(ctx, session_id, woken)
            feed.record(ctx, conn, pending)
            if attached is not None:
                attached.after(conn, session.pk, [])
            return [], session, window(conn, session), None, pending
        reserved, woken = store.activate(conn, reserved)
        pending = feed.woken(ctx, session_id, woken)
        feed.record(ctx, conn, pending)  # first: the entries' events follow it
        entries, counters = store.append(
            conn, reserved, todo, now, feed.entry_events(ctx, session_id)
        )
        if any(entry.pinned for entry in todo):
            _check_pinned(ctx, store.pinned_tokens(conn, reserved.pk))
        if attached is not None:
            attached.after(conn, reserved.pk, entries)
        planned = None
        if compression_due(ctx, counters, now):
            # The row is locked already: plan the compression (pick the entries,
            # take the claim) here rather than in a transaction of its own.
            planned = plan_compression(ctx, conn, counters, now, token=token)
        read = window(conn, counters)
        # Their events were written with them.
        pending += [EntryAdded(session_id, entry) for entry in entries]
        _failpoints.hit("append.before_commit")
        return entries, counters, read, planned, pending

    def append_then_compress() -> Op[tuple[list[MemoryEntry], MessageWindow | None]]:
        entries, counters, read, planned, pending = yield from ctx.transact(work)
        _failpoints.hit("append.after_commit")
        yield from ctx.emit(pending)
        if entries:
            queue_entries(ctx, [entry.id for entry in entries])
        sink: list[MessageWindow] | None = [] if with_window and read is None else None
        yield from auto_compress(ctx, session_id, counters, sink, planned)
        if read is None and sink:
            read = sink[0]
        return entries, read

    # The append may take the compression claim: a cancelled caller releases it.
    return (yield from releasing_claim(ctx, session_id, token, append_then_compress()))


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
) -> Op[tuple[list[MemoryEntry], MessageWindow | None]]:
    """Store several messages in one transaction: all or none (``expected``: see
    :func:`add_turn`)."""
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


def add_turn(
    ctx: MemoryContext,
    session_id: str,
    messages: Sequence[BaseMessage],
    skip_existing: bool,
    expected: Expected = _NOTHING_EXPECTED,
    query: str | None = None,
) -> Op[ContextMessages]:
    """Store a model turn and read the next context (``add_and_get_messages``), with
    what ``query`` (default: the newest human message) recalls.

    With an ``expected`` session state (:mod:`tiermem._ops.expectation`) the
    messages are appended only if the session is still in it, checked under the
    session's lock: a caller that answered from the context an earlier call
    returned never stores a turn another writer's append made stale. Otherwise
    :class:`StaleContext` is raised and nothing is written. Messages that are all
    stored already (``skip_existing``) are no append, and pass."""
    query = check_query(query)
    entries, window = yield from add_messages(
        ctx, session_id, messages, skip_existing, with_window=True, expected=expected
    )
    if window is None:  # a compression ran after the append: read what it left
        try:
            window = yield from message_window(ctx, session_id)
        except TiermemError as exc:
            # The append committed: a plain error would make the caller add the
            # messages again.
            raise ContextReadFailed(
                f"the {len(entries)} messages were stored, but reading the context "
                f"failed: {exc}; read it with get_messages",
                entries=entries,
            ) from exc
    return (yield from render_window(ctx, session_id, window, query))


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
            session = store.get_session(conn, ctx.project, session_id, lock=False)
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
            session = store.get_session(conn, ctx.project, session_id)
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
