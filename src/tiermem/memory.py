"""``ConversationMemory``: the public entry point, a thin facade.

Each public method is one line over an operation of :mod:`tiermem._ops`
(writing, reading, compression, tiers, transfer), run by the sync driver
:func:`~tiermem._core.runner.run`; its ``a``-prefixed async twin runs the same
operation with :func:`~tiermem._core.runner.arun`. The state the operations
share is one :class:`~tiermem._core.context.MemoryContext`.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from . import forgetting, maintenance, signals
from ._compression.policy import SummarizerLike
from ._compression.summarizer import make_summarizer
from ._core.clock import utc_now
from ._core.context import MemoryContext
from ._core.embedder import Embedder
from ._core.messages import validate_session_id
from ._core.render import SUMMARY_HEADER
from ._core.runner import arun, run
from ._ops import compress as compressing
from ._ops import read, rename, transfer, turn, write
from ._storage.database import Database
from .documents import DocumentStore
from .errors import InvalidArgument
from .feed import ChangeFeed
from .layers import LayeredMemory, LayerRegistry
from .state import SessionState
from .tokens import MESSAGE_OVERHEAD, TokenCounter
from .types import (
    CompressionResult,
    ContextMessages,
    MemoryConfig,
    MemoryEntry,
    MemorySummary,
    SearchHit,
    SessionInfo,
    SessionStats,
    SessionView,
)

if TYPE_CHECKING:  # the deprecated base class is imported lazily at run time
    from langchain_core.embeddings import Embeddings
    from sqlalchemy.engine import Engine

    from .history import TieredChatMessageHistory

__all__ = ["ConversationMemory"]


class ConversationMemory:
    """Tiered, token-aware conversation memory on SQLite or PostgreSQL.

    Args:
        url: SQLAlchemy URL; ``None`` is ``sqlite:///tiermem.db``, created on first use.
        engine: an existing SQLAlchemy engine instead of ``url``.
        project: namespace of the sessions (and of tier statistics).
        config: budgets and compression settings.
        summarizer: a chat model, Runnable, callable or ``"provider:model"`` name
            (``init_chat_model``); without one, a heuristic summary (entry quotes).
        model: a model name whose tiktoken encoding counts tokens.
        encoding: a tiktoken encoding name (default ``cl100k_base``); a name
            tiktoken does not register raises ``InvalidArgument``.
        clock: returns an aware datetime within the years 1000-8999 (tests inject one).
        lock_timeout: seconds a writer waits for a lock before ``StorageBusy``.
        embeddings: LangChain ``Embeddings`` or a ``"provider:model"`` name for
            ``init_embeddings`` (the ``embeddings`` extra): embedded after each
            write, and searches (the layers' too) fuse similarity with BM25.
        dense_weight: the similarity ranking's weight in that fusion (BM25's is 1).
        read_only: only look: never create a database or tables (a missing SQLite
            file or schema is ``StorageUnavailable``); an operation that would change
            a row, an access record included, raises ``ReadOnlyMemory`` and writes
            nothing (read sessions with :meth:`peek`).

    Raises:
        InvalidArgument: for bad arguments.
        StorageUnavailable: ``read_only`` on a SQLite file that does not exist.
        TokenizerUnavailable: if the encoding cannot be loaded (fail fast).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        engine: Engine | None = None,
        project: str = "default",
        config: MemoryConfig | None = None,
        summarizer: SummarizerLike | str | None = None,
        model: str | None = None,
        encoding: str | None = None,
        clock: Callable[[], datetime] | None = None,
        lock_timeout: float = 30.0,
        embeddings: Embeddings | str | None = None,
        dense_weight: float = 1.0,
        read_only: bool = False,
    ) -> None:
        project = validate_session_id(project, "project")
        if config is not None and not isinstance(config, MemoryConfig):
            raise InvalidArgument("config must be a MemoryConfig")
        counter = TokenCounter(model=model, encoding=encoding)
        # Without an injected clock, PostgreSQL stamps accesses with its own now().
        database = Database(
            url,
            engine=engine,
            lock_timeout=lock_timeout,
            server_time=clock is None,
            read_only=read_only,
        )
        self._context = MemoryContext(
            project=project,
            database=database,
            config=config or MemoryConfig(),
            counter=counter,
            clock=clock or utc_now,
            summarizer=None,
            owner=self,
            frame_tokens=MESSAGE_OVERHEAD + counter.count_text("system " + SUMMARY_HEADER),
            embedder=None if embeddings is None else Embedder(embeddings, dense_weight),
        )
        self.set_summarizer(summarizer)
        self._layers = LayerRegistry()
        self._feed = ChangeFeed(self._context)

    @property
    def project(self) -> str:
        """The namespace of this memory's sessions."""
        return self._context.project

    @property
    def config(self) -> MemoryConfig:
        """Budgets and compression settings (change them with :meth:`update_config`)."""
        return self._context.config

    @property
    def counter(self) -> TokenCounter:
        """The token counter."""
        return self._context.counter

    def now(self) -> datetime:
        """The memory's clock, in UTC (``InvalidArgument`` for a bad clock value)."""
        return self._context.now()

    @property
    def context(self) -> MemoryContext:
        """The state this memory's operations share (for extensions, which run
        operations of :mod:`tiermem._ops` on it)."""
        return self._context

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine."""
        return self._context.database.engine

    @property
    def database(self) -> Database:
        """The engine with tiermem's transaction discipline (for extensions)."""
        return self._context.database

    def set_summarizer(self, summarizer: SummarizerLike | str | None) -> None:
        """Compress with ``summarizer`` from now on (``None``: the heuristic)."""
        self._context.summarizer = make_summarizer(summarizer)

    def update_config(self, **changes: Any) -> MemoryConfig:
        """Change configuration fields (validated); returns the new config."""
        self._context.config = self._context.config.replace(**changes)
        return self._context.config

    def with_config(self, **changes: Any) -> ConversationMemory:
        """This memory with its own configuration: ``changes`` applied (validated) to a
        copy of :attr:`config`, for a conversation that needs other budgets. The copy
        shares this memory's database, project, token counter, clock, summarizer,
        embeddings, background work and layers, and sends its signals as this memory
        does; its :meth:`update_config` and :meth:`set_summarizer` leave this memory's
        alone. Close this memory, not the copy: both use one connection pool."""
        config = self._context.config.replace(**changes)
        view = copy.copy(self)
        view.__run_on(dataclasses.replace(self._context, config=config))
        return view

    def __run_on(self, context: MemoryContext) -> None:
        """Run on ``context`` from now on (how a :meth:`with_config` copy gets its own)."""
        self._context = context
        self._feed = ChangeFeed(context)

    def on(self, name: str, receiver: Callable[..., Any]) -> Callable[[], None]:
        """Connect ``receiver`` to signal ``name`` of this memory only, held strongly;
        returns a callable that disconnects it."""
        return signals.connect(name, receiver, self)

    @property
    def feed(self) -> ChangeFeed:
        """The durable change feed of this memory's project: ``changes``,
        ``follow``, ``ack`` and their async twins (:mod:`tiermem.feed`)."""
        return self._feed

    @property
    def documents(self) -> DocumentStore:
        """JSON documents by namespace and key in this project (:mod:`tiermem.documents`)."""
        return DocumentStore(self._context)

    def history(self, session_id: str, **options: Any) -> TieredChatMessageHistory:
        """A LangChain ``BaseChatMessageHistory`` over one session (``summary_role=``)."""
        from .history import TieredChatMessageHistory  # deprecated base class: load lazily

        return TieredChatMessageHistory(self, validate_session_id(session_id), **options)

    def layers(
        self, scope: str = "default", *, max_working_entries: int | None = None
    ) -> LayeredMemory:
        """The working, episodic, semantic and procedural memory of ``scope`` (one
        per scope, shared in this process); ``max_working_entries`` defaults to 50."""
        return self._layers.get(self._context, scope, max_working_entries)

    def close(self) -> None:
        """Drain background compression and embedding and release the connection
        pool. (The parse cache of stored messages is the process's, shared by every
        memory and bounded: a close leaves it to the other memories.)"""
        self._context.background.drain()
        if self._context.embedder is not None:
            self._context.embedder.queue.drain()
        self._context.database.dispose()

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

    def add_message(
        self, session_id: str, message: BaseMessage, *, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Store any LangChain message; content blocks, tool calls, ids and ``additional_kwargs``
        round-trip exactly. ``InvalidContent`` for content that cannot be stored exactly or a
        long id, ``EntryTooLarge`` for message and ``metadata`` JSON over ``max_entry_chars``."""
        return run(write.add_message(self._context, session_id, message, metadata))

    async def aadd_message(
        self, session_id: str, message: BaseMessage, *, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Async :meth:`add_message`."""
        return await arun(write.add_message(self._context, session_id, message, metadata))

    def add_messages(
        self, session_id: str, messages: Iterable[BaseMessage], *, skip_existing: bool = False
    ) -> list[MemoryEntry]:
        """Store several messages in one transaction: all or none. ``skip_existing`` skips
        messages whose ``id`` the session holds (resuming never duplicates)."""
        op = write.add_messages(self._context, session_id, list(messages), skip_existing)
        return run(op).entries

    async def aadd_messages(
        self, session_id: str, messages: Iterable[BaseMessage], *, skip_existing: bool = False
    ) -> list[MemoryEntry]:
        """Async :meth:`add_messages`."""
        op = write.add_messages(self._context, session_id, list(messages), skip_existing)
        return (await arun(op)).entries

    def add_and_get_messages(
        self,
        session_id: str,
        messages: Iterable[BaseMessage],
        *,
        skip_existing: bool = False,
        expected_version: str | None = None,
        expected_last_id: str | None | EllipsisType = ...,
        query: str | None = None,
    ) -> ContextMessages:
        """:meth:`add_messages`, then :meth:`get_messages` (with ``query``), in one
        transaction (unless a compression or a recall follows); the next context.

        Args:
            expected_version: append only if the session is still at the ``version``
                of the context a read returned (no stale turn is stored).
            expected_last_id: deprecated: the newest message's id (``None``: none).

        Raises:
            StaleContext: the session changed since (nothing was written).
            ContextReadFailed: the messages were stored, but reading the context
                after the compression they triggered failed (do not add them again).
        """
        expect = write.Expected(expected_version, expected_last_id)
        op = turn.add_turn(self._context, session_id, list(messages), skip_existing, expect, query)
        return run(op)

    async def aadd_and_get_messages(
        self,
        session_id: str,
        messages: Iterable[BaseMessage],
        *,
        skip_existing: bool = False,
        expected_version: str | None = None,
        expected_last_id: str | None | EllipsisType = ...,
        query: str | None = None,
    ) -> ContextMessages:
        """Async :meth:`add_and_get_messages`."""
        expect = write.Expected(expected_version, expected_last_id)
        op = turn.add_turn(self._context, session_id, list(messages), skip_existing, expect, query)
        return await arun(op)

    def add_user_message(self, session_id: str, text: str, **metadata: Any) -> MemoryEntry:
        """Store a user message; keyword arguments are kept as entry metadata."""
        return run(write.add_text(self._context, session_id, "human", text, metadata))

    async def aadd_user_message(self, session_id: str, text: str, **metadata: Any) -> MemoryEntry:
        """Async :meth:`add_user_message`."""
        return await arun(write.add_text(self._context, session_id, "human", text, metadata))

    def add_assistant_message(self, session_id: str, text: str, **metadata: Any) -> MemoryEntry:
        """Store an assistant message; keyword arguments are kept as entry metadata."""
        return run(write.add_text(self._context, session_id, "ai", text, metadata))

    async def aadd_assistant_message(
        self, session_id: str, text: str, **metadata: Any
    ) -> MemoryEntry:
        """Async :meth:`add_assistant_message`."""
        return await arun(write.add_text(self._context, session_id, "ai", text, metadata))

    def add_tool_call(
        self, session_id: str, tool_name: str, args: Mapping[str, Any], call_id: str | None = None
    ) -> MemoryEntry:
        """Store an assistant tool call (``call_id`` generated when omitted)."""
        return run(write.add_tool_call(self._context, session_id, tool_name, args, call_id))

    async def aadd_tool_call(
        self, session_id: str, tool_name: str, args: Mapping[str, Any], call_id: str | None = None
    ) -> MemoryEntry:
        """Async :meth:`add_tool_call`."""
        return await arun(write.add_tool_call(self._context, session_id, tool_name, args, call_id))

    def add_tool_result(
        self, session_id: str, tool_name: str, output: str, call_id: str | None = None
    ) -> MemoryEntry:
        """Store a tool result answering ``call_id`` or, without one (``None`` or ``""``), the
        oldest unanswered call of ``tool_name`` (``InvalidContent`` if none is pending)."""
        return run(write.add_tool_result(self._context, session_id, tool_name, output, call_id))

    async def aadd_tool_result(
        self, session_id: str, tool_name: str, output: str, call_id: str | None = None
    ) -> MemoryEntry:
        """Async :meth:`add_tool_result`."""
        op = write.add_tool_result(self._context, session_id, tool_name, output, call_id)
        return await arun(op)

    def add_context(
        self, session_id: str, content: str, source: str, pinned: bool = False
    ) -> MemoryEntry:
        """Store context (a system message from ``source``); pinned context is never
        compressed nor left out (``BudgetExceeded`` if pins would pass ``max_tokens``)."""
        return run(write.add_context(self._context, session_id, content, source, pinned))

    async def aadd_context(
        self, session_id: str, content: str, source: str, pinned: bool = False
    ) -> MemoryEntry:
        """Async :meth:`add_context`."""
        return await arun(write.add_context(self._context, session_id, content, source, pinned))

    def rename_session(self, session_id: str, new_id: str) -> None:
        """Give a session a new id: its entries, summaries, tier, graph checkpoints and
        change-feed events move with it, in one transaction; then the
        ``session:renamed`` signal. ``SessionNotFound`` for an unknown session,
        ``SessionExists`` when ``new_id`` is taken (nothing changes)."""
        run(rename.rename(self._context, session_id, new_id))

    async def arename_session(self, session_id: str, new_id: str) -> None:
        """Async :meth:`rename_session`."""
        await arun(rename.rename(self._context, session_id, new_id))

    # Deleting: clear_session and forget (a person's data), in tiermem.forgetting.
    clear_session, aclear_session = forgetting.clear_session, forgetting.aclear_session
    forget, aforget = forgetting.forget, forgetting.aforget

    def get_messages(self, session_id: str, *, query: str | None = None) -> ContextMessages:
        """The context for a model, never over ``max_tokens``: the summaries as one system
        message, the active entries in order (when compression is behind, the oldest that do
        not fit are left out, still stored, and a system message says how many), and the
        kept originals ``query`` (default: the newest human message; ``""``: none) recalls,
        as one block before the newest human message (``recall_share``). ``BudgetExceeded``
        if pinned context alone is over ``max_tokens``."""
        return run(read.messages(self._context, session_id, query))

    async def aget_messages(self, session_id: str, *, query: str | None = None) -> ContextMessages:
        """Async :meth:`get_messages`."""
        return await arun(read.messages(self._context, session_id, query))

    def get_context_for_llm(self, session_id: str, *, query: str | None = None) -> str:
        """The context as text: "=== Previous Conversation Summaries ===" with time ranges,
        "=== Recent Conversation ===" and what ``query`` recalls, within ``max_tokens`` by
        :meth:`TokenCounter.count_text` (cut as :meth:`get_messages` is)."""
        return run(read.context_text(self._context, session_id, query))

    async def aget_context_for_llm(self, session_id: str, *, query: str | None = None) -> str:
        """Async :meth:`get_context_for_llm`."""
        return await arun(read.context_text(self._context, session_id, query))

    def get_active_entries(self, session_id: str) -> list[MemoryEntry]:
        """Entries not covered by a summary, in order."""
        return run(read.entries(self._context, session_id, include_compressed=False))

    async def aget_active_entries(self, session_id: str) -> list[MemoryEntry]:
        """Async :meth:`get_active_entries`."""
        return await arun(read.entries(self._context, session_id, include_compressed=False))

    def get_entries(self, session_id: str, include_compressed: bool = True) -> list[MemoryEntry]:
        """Every entry of a session in order (or only the active ones)."""
        return run(read.entries(self._context, session_id, include_compressed))

    async def aget_entries(
        self, session_id: str, include_compressed: bool = True
    ) -> list[MemoryEntry]:
        """Async :meth:`get_entries`."""
        return await arun(read.entries(self._context, session_id, include_compressed))

    def get_summaries(self, session_id: str) -> list[MemorySummary]:
        """The top-level summaries of a session, oldest first."""
        return run(read.summaries(self._context, session_id))

    async def aget_summaries(self, session_id: str) -> list[MemorySummary]:
        """Async :meth:`get_summaries`."""
        return await arun(read.summaries(self._context, session_id))

    def peek(self, session_id: str) -> SessionView:
        """The context text and counters of a session from one snapshot, recording no
        access (looking is not using). ``SessionNotFound`` for an unknown session."""
        return SessionView(*run(read.peek(self._context, session_id)))

    async def apeek(self, session_id: str) -> SessionView:
        """Async :meth:`peek`."""
        return SessionView(*await arun(read.peek(self._context, session_id)))

    def get_stats(self, session_id: str) -> SessionStats:
        """Counters of a session (from its row, no scan); not an access.
        ``SessionNotFound`` for an unknown session."""
        return run(read.stats(self._context, session_id))

    async def aget_stats(self, session_id: str) -> SessionStats:
        """Async :meth:`get_stats`."""
        return await arun(read.stats(self._context, session_id))

    def list_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionInfo]:
        """Sessions of this project, most recently accessed first; not an access."""
        return run(read.list_sessions(self._context, limit, offset))

    async def alist_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionInfo]:
        """Async :meth:`list_sessions`."""
        return await arun(read.list_sessions(self._context, limit, offset))

    def expand_summary(self, summary_id: int) -> list[MemoryEntry]:
        """The original entries a summary covers, in order (merged summaries expand to
        every original below them); not an access. ``SessionNotFound`` if none."""
        return run(read.expand_summary(self._context, summary_id))

    async def aexpand_summary(self, summary_id: int) -> list[MemoryEntry]:
        """Async :meth:`expand_summary`."""
        return await arun(read.expand_summary(self._context, summary_id))

    def search(
        self, query: str, session_id: str | None = None, limit: int = 10, *, window: int = 0
    ) -> list[SearchHit]:
        """Entries best matching ``query`` (stemmed BM25, fused with similarity given
        embeddings), originals included, best first; not an access."""
        return run(read.search(self._context, query, session_id, limit, window))

    async def asearch(
        self, query: str, session_id: str | None = None, limit: int = 10, *, window: int = 0
    ) -> list[SearchHit]:
        """Async :meth:`search`."""
        return await arun(read.search(self._context, query, session_id, limit, window))

    def compress(
        self, session_id: str, force: bool = False, *, keep: int | None = None
    ) -> CompressionResult | None:
        """Summarize the oldest active entries now: without ``force`` only when the session is
        over ``max_tokens`` or ``max_entries``, and down to ``compress_to``; with it, all but
        ``keep`` (default ``recent_window``). ``None`` when there is nothing to compress; once
        a round committed, a later round's failure is logged, not raised.

        Raises:
            SummarizationError: the summarizer failed; every entry stays active.
            CompressionInProgress: another worker holds the session's claim.
            CompressionConflict: the entries changed while the model ran.
        """
        return run(compressing.compress(self._context, session_id, force=force, keep=keep))

    async def acompress(
        self, session_id: str, force: bool = False, *, keep: int | None = None
    ) -> CompressionResult | None:
        """Async :meth:`compress`."""
        return await arun(compressing.compress(self._context, session_id, force=force, keep=keep))

    # Tiers, embeddings, projects: in tiermem.maintenance (old names kept here).
    track_access, atrack_access = maintenance.track_access, maintenance.atrack_access
    load_context, aload_context = maintenance.load_context, maintenance.aload_context
    recalculate_tiers = maintenance.recalculate_tiers
    arecalculate_tiers = maintenance.arecalculate_tiers
    get_tier_stats, aget_tier_stats = maintenance.get_tier_stats, maintenance.aget_tier_stats
    least_recently_used = maintenance.least_recently_used
    aleast_recently_used = maintenance.aleast_recently_used
    prune_expired, aprune_expired = maintenance.prune_expired, maintenance.aprune_expired
    embed_missing, aembed_missing = maintenance.embed_missing, maintenance.aembed_missing
    list_projects, alist_projects = maintenance.list_projects, maintenance.alist_projects

    def export_session(self, session_id: str) -> SessionState:
        """A deterministic, JSON round-trippable snapshot of a session; not an access.
        ``SessionNotFound`` for an unknown session."""
        return run(transfer.export_session(self._context, session_id))

    async def aexport_session(self, session_id: str) -> SessionState:
        """Async :meth:`export_session`."""
        return await arun(transfer.export_session(self._context, session_id))

    def import_session(
        self,
        state: SessionState | str | bytes,
        *,
        overwrite: bool = False,
        session_id: str | None = None,
    ) -> str:
        """Store an exported session (a ``SessionState`` or its JSON), validated first (the
        doctor's structural rules, ``max_entry_chars``, what both backends can store) and
        written all-or-nothing; ``overwrite`` replaces an existing session of that id
        atomically, ``session_id`` imports under another id. Returns the session id.
        ``ImportValidationError`` for invalid input or an existing session; ``StorageBusy``
        if other writers kept creating it meanwhile."""
        return run(transfer.import_session(self._context, state, overwrite, session_id))

    async def aimport_session(
        self,
        state: SessionState | str | bytes,
        *,
        overwrite: bool = False,
        session_id: str | None = None,
    ) -> str:
        """Async :meth:`import_session`."""
        return await arun(transfer.import_session(self._context, state, overwrite, session_id))
