"""``ConversationMemory``: the public entry point (configuration, writing,
clearing, export and import).

Reads live in :mod:`tiermem.reading`, compression in :mod:`tiermem.compressor`,
tiers and pruning in :mod:`tiermem.lifecycle`; the operation runner that makes
each method's sync and async twin share one body is in :mod:`tiermem._ops`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from sqlalchemy.engine import Connection, Engine

from . import signals
from ._compression.policy import Summarizer, SummarizerLike
from ._core import failpoints as _failpoints
from ._core.messages import (
    check_entry_size,
    check_message_id,
    classify,
    clear_cache,
    remember,
    render_text,
    serialize,
    serialize_metadata,
    validate_session_id,
)
from ._core.render import SUMMARY_HEADER
from ._core.runner import Emit, Op
from ._ops.compress import CompressionMixin, Planned
from ._ops.read import MessageWindow, ReadingMixin
from ._ops.tiers import LifecycleMixin
from ._ops.transfer import SessionState, export_state, import_state
from ._storage import store
from ._storage.database import Database, utc_now
from .errors import (
    BudgetExceeded,
    ContextReadFailed,
    InvalidArgument,
    InvalidContent,
    SessionNotFound,
    TiermemError,
)
from .layers import LayeredMemory, layered_memory
from .tokens import MESSAGE_OVERHEAD, TokenCounter
from .types import (
    MemoryConfig,
    MemoryEntry,
)

if TYPE_CHECKING:  # the deprecated base class is imported lazily at run time
    from .history import TieredChatMessageHistory

__all__ = ["ConversationMemory"]


logger = logging.getLogger(__name__)
T = TypeVar("T")


class ConversationMemory(ReadingMixin, LifecycleMixin, CompressionMixin):
    """Tiered, token-aware conversation memory on SQLite or PostgreSQL.

    Args:
        url: SQLAlchemy URL; ``None`` is ``sqlite:///tiermem.db`` in the working
            directory, created on first use.
        engine: an existing SQLAlchemy engine instead of ``url``.
        project: namespace of the sessions (and of tier statistics).
        config: budgets and compression settings.
        summarizer: a chat model, Runnable or callable used to compress; without
            one the seed's heuristic summary is used.
        model: a model name whose tiktoken encoding counts tokens.
        encoding: a tiktoken encoding name (default ``cl100k_base``); a name
            tiktoken does not register raises ``InvalidArgument``.
        clock: a callable returning an aware datetime within the years 1000-8999
            (tests inject one); any other value makes operations raise
            ``InvalidArgument`` before they touch the database.
        lock_timeout: seconds a writer waits for a lock before ``StorageBusy``.

    Raises:
        InvalidArgument: for bad arguments.
        TokenizerUnavailable: if the encoding cannot be loaded (fail fast).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        engine: Engine | None = None,
        project: str = "default",
        config: MemoryConfig | None = None,
        summarizer: SummarizerLike | None = None,
        model: str | None = None,
        encoding: str | None = None,
        clock: Callable[[], datetime] | None = None,
        lock_timeout: float = 30.0,
    ) -> None:
        self.project = validate_session_id(project, "project")
        if config is not None and not isinstance(config, MemoryConfig):
            raise InvalidArgument("config must be a MemoryConfig")
        self.config = config or MemoryConfig()
        self.counter = TokenCounter(model=model, encoding=encoding)
        # Without an injected clock, PostgreSQL stamps accesses with its own now().
        self._db = Database(
            url, engine=engine, lock_timeout=lock_timeout, server_time=clock is None
        )
        self._summarizer: Summarizer | None = None
        self.set_summarizer(summarizer)
        self._clock = clock or utc_now
        self._receivers: list[tuple[str, Callable[..., Any]]] = []
        self._reset_background()
        self._frame_tokens = MESSAGE_OVERHEAD + self.counter.count_text("system " + SUMMARY_HEADER)

    # ------------------------------------------------------------------ plumbing

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine."""
        return self._db.engine

    @property
    def database(self) -> Database:
        """The engine with tiermem's transaction discipline (for extensions)."""
        return self._db

    # ------------------------------------------------------------------ configuration

    def set_summarizer(self, summarizer: SummarizerLike | None) -> None:
        """Use ``summarizer`` (chat model, Runnable or callable) from now on;
        ``None`` selects the heuristic summary."""
        if (
            summarizer is not None
            and not callable(summarizer)
            and not hasattr(summarizer, "invoke")
        ):
            raise InvalidArgument("summarizer must be a chat model, Runnable or callable")
        self._summarizer = Summarizer(summarizer) if summarizer is not None else None

    def update_config(self, **changes: Any) -> MemoryConfig:
        """Change configuration fields (validated); returns the new config."""
        self.config = self.config.replace(**changes)
        return self.config

    def on(self, name: str, receiver: Callable[..., Any]) -> Callable[[], None]:
        """Connect ``receiver`` to signal ``name`` for this instance only, holding it
        strongly (a lambda works). Returns a callable that disconnects it."""
        sig = signals.signal(name)
        sig.connect(receiver, sender=self, weak=False)
        self._receivers.append((name, receiver))

        def disconnect() -> None:
            sig.disconnect(receiver, sender=self)

        return disconnect

    def history(self, session_id: str) -> TieredChatMessageHistory:
        """A LangChain ``BaseChatMessageHistory`` over one session
        (usable as ``get_session_history`` of ``RunnableWithMessageHistory``)."""
        from .history import TieredChatMessageHistory  # deprecated base class: load lazily

        return TieredChatMessageHistory(self, validate_session_id(session_id))

    def layers(
        self, scope: str = "default", *, max_working_entries: int | None = None
    ) -> LayeredMemory:
        """The working, episodic, semantic and procedural memory of ``scope`` (one
        :class:`~tiermem.layers.LayeredMemory` per scope, shared in this process).

        Args:
            max_working_entries: how many working items are kept (default 50).

        Raises:
            InvalidArgument: for a bad scope name.
        """
        return layered_memory(self, scope, max_working_entries=max_working_entries)

    def close(self) -> None:
        """Drain background compression, release the connection pool and empty the
        parse cache of stored messages (it is shared by the process, keyed by their
        JSON: other open memories parse what they read next again)."""
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=True)
        self._db.dispose()
        clear_cache()

    async def aclose(self) -> None:
        """Async :meth:`close`: drains background compression off the event loop."""
        await asyncio.to_thread(self.close)

    def __enter__(self) -> ConversationMemory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> ConversationMemory:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ writing

    def _prepare(
        self,
        message: BaseMessage,
        *,
        pinned: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> store.NewEntry:
        """Validate, serialize and count a message before any transaction opens."""
        message_json = serialize(message, max_chars=self.config.max_entry_chars)
        check_message_id(message)
        metadata_json = serialize_metadata(metadata or {})
        check_entry_size(message_json, metadata_json, self.config.max_entry_chars)
        remember(message_json, message)  # the turn reads it straight back
        entry_type, role = classify(message)
        return store.NewEntry(
            message=message,
            type=entry_type,
            role=role,
            content=render_text(message),
            message_json=message_json,
            token_count=self.counter.count_message(message),
            pinned=pinned,
            metadata_json=metadata_json,
        )

    def _op_append(
        self, session_id: str, prepared: Sequence[store.NewEntry], *, skip_existing: bool = False
    ) -> Op[list[MemoryEntry]]:
        entries, _ = yield from self._op_store(
            session_id, prepared, skip_existing=skip_existing, with_window=False
        )
        return entries

    def _op_store(
        self,
        session_id: str,
        prepared: Sequence[store.NewEntry],
        *,
        skip_existing: bool,
        with_window: bool,
    ) -> Op[tuple[list[MemoryEntry], MessageWindow | None]]:
        """Append in one transaction; with ``with_window`` also read what
        ``get_messages`` shows: in the same transaction when no compression
        follows, else in the compression's last commit (``None`` when that did not
        happen: the caller reads after it)."""
        validate_session_id(session_id)
        now = self.now()

        def create(conn: Connection) -> store.SessionRow:
            return self._session(
                conn, session_id, create=True, now=now, encoding=self.counter.encoding_name
            )

        def window(conn: Connection, counters: Mapping[str, Any]) -> MessageWindow | None:
            if not with_window or self._compression_due(counters, now):
                return None
            return store.read_message_window(conn, counters)

        def work(
            conn: Connection,
        ) -> tuple[
            list[MemoryEntry], dict[str, Any], MessageWindow | None, Planned | None, str | None
        ]:
            todo = list(prepared)
            if skip_existing and todo:
                pk = create(conn)["pk"]
                seen = store.existing_message_ids(
                    conn, pk, [e.message.id for e in todo if e.message.id]
                )
                todo = [e for e in todo if not e.message.id or e.message.id not in seen]
            if not todo:
                session = dict(create(conn))
                woken = store.touch(conn, session, now)
                return [], session, window(conn, session), None, woken
            # One UPDATE ... RETURNING allocates the seqs; the session is created
            # only on its first append.
            reserved = store.reserve(conn, self.project, session_id, todo, now)
            if reserved is None:
                create(conn)
                reserved = store.reserve(conn, self.project, session_id, todo, now)
            if reserved is None:  # pragma: no cover - the row was just created
                raise SessionNotFound(session_id)
            woken = store.activate(conn, reserved)
            entries, counters = store.append(conn, reserved, todo, now)
            if any(entry.pinned for entry in todo):
                self._check_pinned(store.pinned_tokens(conn, reserved["pk"]))
            planned = None
            if self._compression_due(counters, now):
                # The row is locked already: plan the compression (pick the entries,
                # take the claim) here rather than in a transaction of its own.
                planned = self._plan_compression(conn, counters, now)
            read = window(conn, counters)
            _failpoints.hit("append.before_commit")
            return entries, counters, read, planned, woken

        entries, counters, read, planned, woken = self._db.run(work)
        _failpoints.hit("append.after_commit")
        yield from self._woken(session_id, woken)
        if entries:
            yield Emit([("entry:added", {"session_id": session_id, "entry": e}) for e in entries])
        sink: list[MessageWindow] | None = [] if with_window and read is None else None
        yield from self._auto_compress(session_id, counters, sink, planned)
        if read is None and sink:
            read = sink[0]
        return entries, read

    def _check_pinned(self, tokens: int) -> None:
        """Pinned context is never left out of a context, so it must fit the budget."""
        if tokens > self.config.max_tokens:
            raise BudgetExceeded(
                f"pinned context would take {tokens} tokens, more than "
                f"max_tokens={self.config.max_tokens}; pin less or raise max_tokens"
            )

    def add_message(
        self,
        session_id: str,
        message: BaseMessage,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryEntry:
        """Store any LangChain message (content blocks, tool calls, ids and
        ``additional_kwargs`` round-trip exactly).

        Raises:
            InvalidSessionId, StorageError.
            InvalidContent: for content that cannot be stored exactly, or a message id
                longer than 255 characters.
            EntryTooLarge: when the message and ``metadata`` JSON exceed
                ``max_entry_chars``.
        """
        return self._run(self._op_append(session_id, [self._prepare(message, metadata=metadata)]))[
            0
        ]

    async def aadd_message(
        self, session_id: str, message: BaseMessage, *, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Async :meth:`add_message`."""
        prepared = [self._prepare(message, metadata=metadata)]
        return (await self._arun(self._op_append(session_id, prepared)))[0]

    def add_messages(
        self, session_id: str, messages: Iterable[BaseMessage], *, skip_existing: bool = False
    ) -> list[MemoryEntry]:
        """Store several messages in one transaction: all or none.

        Args:
            skip_existing: skip messages whose ``id`` is already stored in the
                session (resuming from a checkpointer never duplicates).
        """
        return self._run(self._op_add_messages(session_id, list(messages), skip_existing))[0]

    async def aadd_messages(
        self, session_id: str, messages: Iterable[BaseMessage], *, skip_existing: bool = False
    ) -> list[MemoryEntry]:
        """Async :meth:`add_messages`."""
        op = self._op_add_messages(session_id, list(messages), skip_existing)
        return (await self._arun(op))[0]

    def add_and_get_messages(
        self, session_id: str, messages: Iterable[BaseMessage], *, skip_existing: bool = False
    ) -> list[BaseMessage]:
        """:meth:`add_messages`, then :meth:`get_messages`: a model turn's store and
        read in one transaction (and one recorded access), unless the messages
        trigger a compression, which then runs before the context is read.

        Returns:
            The context the model gets next, exactly as ``get_messages`` returns it.

        Raises:
            ContextReadFailed: the messages were stored, but reading the context
                after the compression they triggered failed (do not add them again).
        """
        return self._render(self._run(self._op_turn(session_id, list(messages), skip_existing)))

    async def aadd_and_get_messages(
        self, session_id: str, messages: Iterable[BaseMessage], *, skip_existing: bool = False
    ) -> list[BaseMessage]:
        """Async :meth:`add_and_get_messages`."""
        op = self._op_turn(session_id, list(messages), skip_existing)
        return self._render(await self._arun(op))

    def _op_turn(
        self, session_id: str, messages: list[BaseMessage], skip_existing: bool
    ) -> Op[MessageWindow]:
        entries, window = yield from self._op_add_messages(
            session_id, messages, skip_existing, with_window=True
        )
        if window is None:  # a compression ran after the append: read what it left
            try:
                window = yield from self._op_message_window(session_id)
            except TiermemError as exc:
                # The append committed: a plain error would make the caller add the
                # messages again.
                raise ContextReadFailed(
                    f"the {len(entries)} messages were stored, but reading the context "
                    f"failed: {exc}; read it with get_messages",
                    entries=entries,
                ) from exc
        return window

    def _op_add_messages(
        self,
        session_id: str,
        messages: list[BaseMessage],
        skip_existing: bool,
        *,
        with_window: bool = False,
    ) -> Op[tuple[list[MemoryEntry], MessageWindow | None]]:
        validate_session_id(session_id)
        ids = [m.id for m in messages if isinstance(m, BaseMessage) and m.id]
        if skip_existing and ids:
            # Resuming agents resend their whole state: drop known ids before the
            # costly serialize-and-count; the append re-checks inside its transaction.
            seen = self._db.run(
                lambda conn: store.stored_message_ids(conn, self.project, session_id, ids),
                write=False,
            )
            messages = [m for m in messages if not m.id or m.id not in seen]
        prepared = [self._prepare(m) for m in messages]
        return (
            yield from self._op_store(
                session_id, prepared, skip_existing=skip_existing, with_window=with_window
            )
        )

    def add_user_message(self, session_id: str, text: str, **metadata: Any) -> MemoryEntry:
        """Store a user message; keyword arguments are kept as entry metadata."""
        return self.add_message(session_id, HumanMessage(content=_text(text)), metadata=metadata)

    async def aadd_user_message(self, session_id: str, text: str, **metadata: Any) -> MemoryEntry:
        """Async :meth:`add_user_message`."""
        return await self.aadd_message(
            session_id, HumanMessage(content=_text(text)), metadata=metadata
        )

    def add_assistant_message(self, session_id: str, text: str, **metadata: Any) -> MemoryEntry:
        """Store an assistant message; keyword arguments are kept as entry metadata."""
        return self.add_message(session_id, AIMessage(content=_text(text)), metadata=metadata)

    async def aadd_assistant_message(
        self, session_id: str, text: str, **metadata: Any
    ) -> MemoryEntry:
        """Async :meth:`add_assistant_message`."""
        return await self.aadd_message(
            session_id, AIMessage(content=_text(text)), metadata=metadata
        )

    def add_tool_call(
        self, session_id: str, tool_name: str, args: Mapping[str, Any], call_id: str | None = None
    ) -> MemoryEntry:
        """Store an assistant tool call (``call_id`` generated when omitted)."""
        return self.add_message(session_id, _tool_call(tool_name, args, call_id))

    async def aadd_tool_call(
        self, session_id: str, tool_name: str, args: Mapping[str, Any], call_id: str | None = None
    ) -> MemoryEntry:
        """Async :meth:`add_tool_call`."""
        return await self.aadd_message(session_id, _tool_call(tool_name, args, call_id))

    def add_tool_result(
        self, session_id: str, tool_name: str, output: str, call_id: str | None = None
    ) -> MemoryEntry:
        """Store a tool result answering the call ``call_id``.

        Without a ``call_id`` (``None`` or ``""``, as :meth:`add_tool_call` generates
        an id for either) it answers the oldest pending call of ``tool_name``: of
        that tool's unanswered calls, the one made first, whatever the ids are.

        Raises:
            InvalidContent: if no such call is pending, or ``call_id`` is not a str.
        """
        return self._run(self._op_tool_result(session_id, tool_name, output, call_id))

    async def aadd_tool_result(
        self, session_id: str, tool_name: str, output: str, call_id: str | None = None
    ) -> MemoryEntry:
        """Async :meth:`add_tool_result`."""
        return await self._arun(self._op_tool_result(session_id, tool_name, output, call_id))

    def _op_tool_result(
        self, session_id: str, tool_name: str, output: str, call_id: str | None
    ) -> Op[MemoryEntry]:
        validate_session_id(session_id)
        _text(tool_name)
        _text(output)
        if call_id is not None and not isinstance(call_id, str):
            raise InvalidContent(f"call_id must be a str or None, got {type(call_id).__name__}")
        if not call_id:
            call_id = yield from self._op_pending_call(session_id, tool_name)
        prepared = [self._prepare(_tool_result(tool_name, output, call_id))]
        return (yield from self._op_append(session_id, prepared))[0]

    def _op_pending_call(self, session_id: str, tool_name: str) -> Op[str]:
        validate_session_id(session_id)

        def work(conn: Connection) -> str:
            try:
                session = self._session(conn, session_id, lock=False)
            except SessionNotFound:
                session = None
            pending: dict[str, str] = (
                json.loads(session["pending_calls"]) if session is not None else {}
            )
            # pending_calls keeps the calls in the order they were made.
            for call_id, name in pending.items():
                if name == tool_name:
                    return call_id
            raise InvalidContent(f"no pending call of tool {tool_name!r} in {session_id!r}")

        return self._db.run(work, write=False)
        yield  # pragma: no cover - makes this a generator

    def add_context(
        self, session_id: str, content: str, source: str, pinned: bool = False
    ) -> MemoryEntry:
        """Store context (a system message from ``source``); pinned context is
        never compressed nor left out of a context.

        Raises:
            BudgetExceeded: pinned, it would make the session's pinned context
                larger than ``max_tokens`` (nothing is written).
        """
        message = SystemMessage(content=_text(content), additional_kwargs={"source": source})
        return self._run(self._op_append(session_id, [self._context(message, pinned, source)]))[0]

    async def aadd_context(
        self, session_id: str, content: str, source: str, pinned: bool = False
    ) -> MemoryEntry:
        """Async :meth:`add_context`."""
        message = SystemMessage(content=_text(content), additional_kwargs={"source": source})
        return (
            await self._arun(self._op_append(session_id, [self._context(message, pinned, source)]))
        )[0]

    def _context(self, message: BaseMessage, pinned: bool, source: str) -> store.NewEntry:
        prepared = self._prepare(message, pinned=pinned, metadata={"source": source})
        return store.NewEntry(**{**_fields(prepared), "type": prepared.type.CONTEXT})

    # ------------------------------------------------------------------ lifecycle

    def _op_clear(self, session_id: str) -> Op[int]:
        validate_session_id(session_id)

        def work(conn: Connection) -> int:
            try:
                session = self._session(conn, session_id)
            except SessionNotFound:
                return -1
            store.delete_sessions(conn, [session["pk"]])
            return int(session["entry_count"])

        removed = self._db.run(work)
        if removed >= 0:
            yield Emit(
                [("session:cleared", {"session_id": session_id, "entries_removed": removed})]
            )
        return max(removed, 0)

    def clear_session(self, session_id: str) -> int:
        """Delete a session with its entries and summaries; returns the number of
        entries removed (0 for an unknown session)."""
        return self._run(self._op_clear(session_id))

    async def aclear_session(self, session_id: str) -> int:
        """Async :meth:`clear_session`."""
        return await self._arun(self._op_clear(session_id))

    def _op_export(self, session_id: str) -> Op[SessionState]:
        validate_session_id(session_id)

        def work(conn: Connection) -> SessionState:
            session = self._session(conn, session_id, lock=False)
            return export_state(
                session,
                self._all(conn, session),
                store.read_summaries(conn, session, top_only=False),
            )

        # Several statements: one snapshot, or a compression committing between them
        # would give summaries and entries of two different states.
        return self._db.run(work, write=False, snapshot=True)
        yield  # pragma: no cover

    def export_session(self, session_id: str) -> SessionState:
        """A deterministic, JSON round-trippable snapshot of a session; not an access.

        Raises:
            SessionNotFound: for an unknown session.
        """
        return self._run(self._op_export(session_id))

    async def aexport_session(self, session_id: str) -> SessionState:
        """Async :meth:`export_session`."""
        return await self._arun(self._op_export(session_id))

    def _op_import(
        self, state: SessionState | str | bytes, overwrite: bool, session_id: str | None
    ) -> Op[str]:
        plan = import_state(
            state, self.counter, session_id=session_id, max_entry_chars=self.config.max_entry_chars
        )
        now = self.now()
        target = plan.session_id
        self._db.run(lambda conn: plan.write(conn, self.project, overwrite=overwrite, now=now))
        return target
        yield  # pragma: no cover

    def import_session(
        self,
        state: SessionState | str | bytes,
        *,
        overwrite: bool = False,
        session_id: str | None = None,
    ) -> str:
        """Store an exported session (a ``SessionState`` or its JSON), validated first
        and written all-or-nothing. Returns the session id.

        The validation applies the structural rules ``check_invariants`` checks, the
        entry size limit (``max_entry_chars``), message ids of at most 255 characters,
        and the ranges both backends store (INTEGER values, UTC times within the years
        1-9999 with a day to spare). Overwrite imports of one session racing each other
        (or an append) run one after the other: the later one replaces the earlier.

        Args:
            overwrite: replace an existing session of that id atomically.
            session_id: import under another id.

        Raises:
            ImportValidationError: for invalid input or an existing session.
            StorageBusy: the session kept being created again by other writers
                while the import ran (retry later).
        """
        return self._run(self._op_import(state, overwrite, session_id))

    async def aimport_session(
        self,
        state: SessionState | str | bytes,
        *,
        overwrite: bool = False,
        session_id: str | None = None,
    ) -> str:
        """Async :meth:`import_session`."""
        return await self._arun(self._op_import(state, overwrite, session_id))


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidContent(f"text must be a str, got {type(value).__name__}")
    return value


def _tool_call(tool_name: str, args: Mapping[str, Any], call_id: str | None) -> AIMessage:
    if not isinstance(args, Mapping):
        raise InvalidContent("tool call args must be a mapping")
    return AIMessage(
        content="",
        tool_calls=[
            {
                "name": _text(tool_name),
                "args": dict(args),
                "id": call_id or f"call_{uuid.uuid4().hex}",
            }
        ],
    )


def _tool_result(tool_name: str, output: str, call_id: str) -> ToolMessage:
    return ToolMessage(content=_text(output), name=_text(tool_name), tool_call_id=call_id)


def _fields(entry: store.NewEntry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in entry.__slots__}
