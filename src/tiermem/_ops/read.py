"""The reading half of ``ConversationMemory``: context, entries, summaries, stats,
session listing, summary expansion and search.

The reads of a session's conversation (``get_messages``, ``get_context_for_llm``,
``get_entries``, ``get_active_entries``, ``get_summaries``) run in one transaction
that also records the access (see :meth:`ReadingMixin._op_read`). The inspection
reads (``get_stats``, ``list_sessions``, ``expand_summary``, ``search``) record
none, so monitoring or a search across the project never keeps a session from
ageing. Each method's async twin drives the same operation (:mod:`tiermem._ops`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from langchain_core.messages import BaseMessage
from sqlalchemy.engine import Connection

from .._core.messages import validate_session_id
from .._core.render import context_text, render_messages
from .._core.runner import Op, OpRunner
from .._storage import fts, store
from ..errors import InvalidArgument
from ..types import MemoryEntry, MemorySummary, SearchHit, SessionInfo, SessionStats

__all__ = ["MessageWindow", "ReadingMixin", "Window"]

T = TypeVar("T")
Window = tuple[list[MemorySummary], list[MemoryEntry]]
MessageWindow = store.MessageWindow
#: SQL integers are signed 64-bit: larger limits and offsets are clamped to this.
MAX_SQL_INT = 2**62


class ReadingMixin(OpRunner):
    """Reads of ``ConversationMemory``."""

    def _op_read(
        self, session_id: str, reader: Callable[[Connection, store.SessionRow], T], empty: T
    ) -> Op[T]:
        """Read inside one transaction that also records the access (and signals
        ``tier_changed`` when it woke the session).

        The access is written first: it locks the session row (the UPDATE on
        PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), and every write to a session's
        entries and summaries holds that lock, so the reads that follow see one state
        of the session even at READ COMMITTED. (REPEATABLE READ would make an access
        racing an append fail with serialization errors instead of waiting.)"""
        validate_session_id(session_id)
        now = self.now()

        def work(conn: Connection) -> tuple[T, str | None]:
            session = store.touch_session(conn, self.project, session_id, now)
            if session is None:
                return empty, None
            woken = store.activate(conn, session)
            return reader(conn, session), woken

        result, woken = self._db.run(work)
        yield from self._woken(session_id, woken)
        return result

    def _read_window(
        self, conn: Connection, session: store.SessionRow
    ) -> tuple[list[MemorySummary], list[MemoryEntry]]:
        return (
            store.read_summaries(conn, session, with_ids=False),
            store.read_entries(conn, session, active_only=True),
        )

    def _op_window(self, session_id: str) -> Op[Window]:
        empty: Window = ([], [])
        return (yield from self._op_read(session_id, self._read_window, empty))

    @staticmethod
    def _read_message_window(conn: Connection, session: store.SessionRow) -> MessageWindow:
        return store.read_message_window(conn, session)

    def _op_message_window(self, session_id: str) -> Op[MessageWindow]:
        empty: MessageWindow = ([], [])
        return (yield from self._op_read(session_id, self._read_message_window, empty))

    def _render(self, window: MessageWindow) -> list[BaseMessage]:
        """``window`` as the context a model gets, within ``max_tokens``."""
        return render_messages(*window, max_tokens=self.config.max_tokens, counter=self.counter)

    def _render_text(self, window: Window) -> str:
        """``window`` as the text context, within ``max_tokens``."""
        return context_text(*window, max_tokens=self.config.max_tokens, counter=self.counter)

    def get_messages(self, session_id: str) -> list[BaseMessage]:
        """The context for a model: the summaries as one system message, then
        the active entries in order, each tool call followed by its results.

        It never holds more than ``max_tokens`` (by :meth:`TokenCounter.count_messages`):
        when compression is behind, the oldest unpinned active entries that do not
        fit are left out of it (they stay stored, active and searchable) and the
        first system message says how many (see :mod:`tiermem.budget`).

        Raises:
            BudgetExceeded: pinned context alone is over ``max_tokens`` (lowered
                since it was pinned).
        """
        return self._render(self._run(self._op_message_window(session_id)))

    async def aget_messages(self, session_id: str) -> list[BaseMessage]:
        """Async :meth:`get_messages`."""
        return self._render(await self._arun(self._op_message_window(session_id)))

    def get_context_for_llm(self, session_id: str) -> str:
        """The context as text: "=== Previous Conversation Summaries ===" with
        time ranges, then "=== Recent Conversation ===", within ``max_tokens`` by
        :meth:`TokenCounter.count_text` (cut as :meth:`get_messages` is)."""
        return self._render_text(self._run(self._op_window(session_id)))

    async def aget_context_for_llm(self, session_id: str) -> str:
        """Async :meth:`get_context_for_llm`."""
        return self._render_text(await self._arun(self._op_window(session_id)))

    @staticmethod
    def _active(conn: Connection, session: store.SessionRow) -> list[MemoryEntry]:
        return store.read_entries(conn, session, active_only=True)

    @staticmethod
    def _all(conn: Connection, session: store.SessionRow) -> list[MemoryEntry]:
        return store.read_entries(conn, session, active_only=False)

    def get_active_entries(self, session_id: str) -> list[MemoryEntry]:
        """Entries not covered by a summary, in order."""
        return self._run(self._op_read(session_id, self._active, []))

    async def aget_active_entries(self, session_id: str) -> list[MemoryEntry]:
        """Async :meth:`get_active_entries`."""
        return await self._arun(self._op_read(session_id, self._active, []))

    def get_entries(self, session_id: str, include_compressed: bool = True) -> list[MemoryEntry]:
        """Every entry of a session in order (or only the active ones)."""
        return self._run(
            self._op_read(session_id, self._all if include_compressed else self._active, [])
        )

    async def aget_entries(
        self, session_id: str, include_compressed: bool = True
    ) -> list[MemoryEntry]:
        """Async :meth:`get_entries`."""
        return await self._arun(
            self._op_read(session_id, self._all if include_compressed else self._active, [])
        )

    @staticmethod
    def _summaries(conn: Connection, session: store.SessionRow) -> list[MemorySummary]:
        return store.read_summaries(conn, session)

    def get_summaries(self, session_id: str) -> list[MemorySummary]:
        """The top-level summaries of a session, oldest first."""
        return self._run(self._op_read(session_id, self._summaries, []))

    async def aget_summaries(self, session_id: str) -> list[MemorySummary]:
        """Async :meth:`get_summaries`."""
        return await self._arun(self._op_read(session_id, self._summaries, []))

    def _op_stats(self, session_id: str) -> Op[SessionStats]:
        validate_session_id(session_id)
        return self._db.run(
            lambda conn: store.session_stats(self._session(conn, session_id, lock=False)),
            write=False,
        )
        yield  # pragma: no cover

    def get_stats(self, session_id: str) -> SessionStats:
        """Counters of a session (from its row, no scan); not an access.

        Raises:
            SessionNotFound: for an unknown session.
        """
        return self._run(self._op_stats(session_id))

    async def aget_stats(self, session_id: str) -> SessionStats:
        """Async :meth:`get_stats`."""
        return await self._arun(self._op_stats(session_id))

    def _op_list(self, limit: int | None, offset: int) -> Op[list[SessionInfo]]:
        for name, value in (("limit", limit), ("offset", offset)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise InvalidArgument(f"{name} must be an int >= 0, got {value!r}")
        limit = None if limit is None else min(limit, MAX_SQL_INT)
        offset = min(offset, MAX_SQL_INT)
        return self._db.run(
            lambda conn: store.list_sessions(conn, self.project, limit, offset), write=False
        )
        yield  # pragma: no cover

    def list_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionInfo]:
        """Sessions of this project, most recently accessed first; not an access."""
        return self._run(self._op_list(limit, offset))

    async def alist_sessions(self, limit: int | None = None, offset: int = 0) -> list[SessionInfo]:
        """Async :meth:`list_sessions`."""
        return await self._arun(self._op_list(limit, offset))

    def _op_expand(self, summary_id: int) -> Op[list[MemoryEntry]]:
        if isinstance(summary_id, bool) or not isinstance(summary_id, int):
            raise InvalidArgument("summary_id must be an int")
        if not 1 <= summary_id < 2**63:
            raise InvalidArgument(f"summary_id must be a positive 64-bit int, got {summary_id}")

        def work(conn: Connection) -> list[MemoryEntry]:
            row, session = store.get_summary_row(conn, self.project, summary_id)
            return store.read_entries(
                conn,
                session,
                active_only=False,
                compressed_only=True,
                seq_range=(row["first_seq"], row["last_seq"]),
            )

        return self._db.run(work, write=False, snapshot=True)
        yield  # pragma: no cover

    def expand_summary(self, summary_id: int) -> list[MemoryEntry]:
        """The original entries a summary covers, in order (merged summaries
        expand to every original below them); not an access.

        Raises:
            SessionNotFound: if no such summary exists in this project.
        """
        return self._run(self._op_expand(summary_id))

    async def aexpand_summary(self, summary_id: int) -> list[MemoryEntry]:
        """Async :meth:`expand_summary`."""
        return await self._arun(self._op_expand(summary_id))

    def _op_search(self, query: str, session_id: str | None, limit: int) -> Op[list[SearchHit]]:
        from .search import search_entries

        if session_id is not None:
            validate_session_id(session_id)
        if not isinstance(query, str):
            raise InvalidArgument("query must be a str")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidArgument(f"limit must be an int >= 1, got {limit!r}")
        limit = min(limit, MAX_SQL_INT)
        now, policy = self.now(), self.config.tier_policy

        def work(conn: Connection) -> list[SearchHit]:
            # Entries are indexed in batches on SQLite: index the pending ones first,
            # so a search sees every committed entry.
            fts.flush(conn)
            return search_entries(
                conn, self.project, query, session_id, limit, now=now, policy=policy
            )

        # Counts, candidates and rows are read by separate statements: one snapshot.
        on_pg = self._db.is_postgres
        return self._db.run(work, write=not on_pg, snapshot=on_pg)
        yield  # pragma: no cover

    def search(self, query: str, session_id: str | None = None, limit: int = 10) -> list[SearchHit]:
        """Full-text search over conversation entries, compressed originals included,
        best first; not an access of the sessions searched or found."""
        return self._run(self._op_search(query, session_id, limit))

    async def asearch(
        self, query: str, session_id: str | None = None, limit: int = 10
    ) -> list[SearchHit]:
        """Async :meth:`search`."""
        return await self._arun(self._op_search(query, session_id, limit))
