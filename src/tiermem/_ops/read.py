"""Reading operations: the context, entries, summaries, stats, the session
list, summary expansion and search.

The reads of a session's conversation (:func:`messages`, :func:`context_text`,
:func:`entries`, :func:`summaries`) run in one transaction that also records the
access (see :func:`read_session`). The inspection reads (:func:`stats`,
:func:`list_sessions`, :func:`expand_summary`, :func:`search`) record none, so
monitoring or a search across the project never keeps a session from ageing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from .._core.context import MemoryContext
from .._core.messages import validate_session_id
from .._core.render import context_text as render_text
from .._core.runner import Op
from .._core.validate import MAX_SQL_INT, check_int, check_optional_int
from .._storage import sessions, store
from .._storage import summaries as summary_rows
from .._storage.database import Connection
from .._storage.rows import SessionRecord
from .._storage.windows import with_windows
from ..errors import InvalidArgument
from ..events import Event
from ..types import (
    ContextMessages,
    MemoryEntry,
    MemorySummary,
    SearchHit,
    SessionInfo,
    SessionStats,
)
from . import feed, recall
from .embed import query_vector

#: The most entries a search hit brings on each side.
MAX_WINDOW = 50

__all__ = [
    "MessageWindow",
    "Window",
    "context_text",
    "entries",
    "expand_summary",
    "list_sessions",
    "message_window",
    "messages",
    "peek",
    "read_session",
    "render_window",
    "search",
    "stats",
    "summaries",
]

T = TypeVar("T")
Window = tuple[list[MemorySummary], list[MemoryEntry]]
MessageWindow = store.MessageWindow


def read_session(
    ctx: MemoryContext,
    session_id: str,
    reader: Callable[[Connection, SessionRecord], T],
    empty: T,
) -> Op[T]:
    """Read inside one transaction that also records the access (and signal
    ``tier_changed`` when it woke the session); ``empty`` for an unknown session.

    The access is written first: it locks the session row (the UPDATE on
    PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite), and every write to a session's
    entries and summaries holds that lock, so the reads that follow see one state
    of the session even at READ COMMITTED. (REPEATABLE READ would make an access
    racing an append fail with serialization errors instead of waiting.)"""
    validate_session_id(session_id)
    now = ctx.now()

    def work(conn: Connection) -> tuple[T, list[Event]]:
        session = sessions.touch_session(conn, ctx.project, session_id, now)
        if session is None:
            return empty, []
        # An ACTIVE session's access commits without waiting for the disk (set by
        # touch_session); waking one writes a tier_changed event, committed as usual.
        session, woken = sessions.activate(conn, session)
        pending = feed.woken(ctx, session_id, woken)
        return reader(conn, session), pending

    return (yield from feed.transact_recorded(ctx, work))


def _window(conn: Connection, session: SessionRecord) -> Window:
    return (
        summary_rows.read_summaries(conn, session, with_ids=False),
        store.read_entries(conn, session, active_only=True),
    )


def message_window(ctx: MemoryContext, session_id: str) -> Op[MessageWindow]:
    """The summaries and active entries :func:`messages` renders (an access)."""
    empty = MessageWindow([], [])
    return (yield from read_session(ctx, session_id, store.read_message_window, empty))


def render_window(
    ctx: MemoryContext, session_id: str, window: MessageWindow, query: str | None
) -> Op[ContextMessages]:
    """``window`` as the context a model gets, with what ``query`` recalls, within
    ``max_tokens``, and the version of the session it shows."""
    rendered = yield from recall.render_recalled(ctx, session_id, window, query)
    return ContextMessages(rendered.messages, window.version)


def messages(ctx: MemoryContext, session_id: str, query: str | None) -> Op[ContextMessages]:
    """The context for a model (see ``ConversationMemory.get_messages``)."""
    query = recall.check_query(query)
    window = yield from message_window(ctx, session_id)
    return (yield from render_window(ctx, session_id, window, query))


def context_text(ctx: MemoryContext, session_id: str, query: str | None) -> Op[str]:
    """The context as text (see ``ConversationMemory.get_context_for_llm``)."""
    query = recall.check_query(query)
    empty: Window = ([], [])
    summaries, active = yield from read_session(ctx, session_id, _window, empty)

    def render(summaries: list[MemorySummary], active: list[MemoryEntry], budget: int) -> str:
        return render_text(summaries, active, max_tokens=budget, counter=ctx.counter)

    return (yield from recall.text_with_recall(ctx, session_id, summaries, active, query, render))


def _active(conn: Connection, session: SessionRecord) -> list[MemoryEntry]:
    return store.read_entries(conn, session, active_only=True)


def _all(conn: Connection, session: SessionRecord) -> list[MemoryEntry]:
    return store.read_entries(conn, session, active_only=False)


def entries(ctx: MemoryContext, session_id: str, include_compressed: bool) -> Op[list[MemoryEntry]]:
    """Every entry of a session in order, or only the active ones (an access)."""
    empty: list[MemoryEntry] = []
    return (
        yield from read_session(ctx, session_id, _all if include_compressed else _active, empty)
    )


def _summaries(conn: Connection, session: SessionRecord) -> list[MemorySummary]:
    return summary_rows.read_summaries(conn, session)


def summaries(ctx: MemoryContext, session_id: str) -> Op[list[MemorySummary]]:
    """The top-level summaries of a session, oldest first (an access)."""
    empty: list[MemorySummary] = []
    return (yield from read_session(ctx, session_id, _summaries, empty))


def stats(ctx: MemoryContext, session_id: str) -> Op[SessionStats]:
    """Counters of a session, from its row; not an access."""
    validate_session_id(session_id)
    return (
        yield from ctx.transact(
            lambda conn: sessions.session_stats(
                sessions.get_session(conn, ctx.project, session_id, lock=False)
            ),
            write=False,
        )
    )


def list_sessions(ctx: MemoryContext, limit: int | None, offset: int) -> Op[list[SessionInfo]]:
    """Sessions of the project, most recently accessed first; not an access."""
    limit = check_optional_int("limit", limit)
    offset = check_int("offset", offset)
    limit = None if limit is None else min(limit, MAX_SQL_INT)
    offset = min(offset, MAX_SQL_INT)
    return (
        yield from ctx.transact(
            lambda conn: sessions.list_sessions(conn, ctx.project, limit, offset), write=False
        )
    )


def expand_summary(ctx: MemoryContext, summary_id: int) -> Op[list[MemoryEntry]]:
    """The original entries a summary covers, in order; not an access."""
    if isinstance(summary_id, bool) or not isinstance(summary_id, int):
        raise InvalidArgument("summary_id must be an int")
    if not 1 <= summary_id < 2**63:
        raise InvalidArgument(f"summary_id must be a positive 64-bit int, got {summary_id}")

    def work(conn: Connection) -> list[MemoryEntry]:
        row, session = summary_rows.get_summary_row(conn, ctx.project, summary_id)
        return store.read_entries(
            conn,
            session,
            active_only=False,
            compressed_only=True,
            seq_range=(row.first_seq, row.last_seq),
        )

    return (yield from ctx.transact(work, write=False, snapshot=True))


def search(
    ctx: MemoryContext, query: str, session_id: str | None, limit: int, window: int = 0
) -> Op[list[SearchHit]]:
    """Search over entries, compressed originals included, each hit with ``window``
    entries around it; not an access."""
    if session_id is not None:
        validate_session_id(session_id)
    if not isinstance(query, str):
        raise InvalidArgument("query must be a str")
    limit = min(check_int("limit", limit, minimum=1), MAX_SQL_INT)
    window = check_int("window", window, minimum=0, maximum=MAX_WINDOW)
    now = ctx.now()
    vector = yield from query_vector(ctx, query)

    def work(conn: Connection) -> list[SearchHit]:
        hits = recall.find(ctx, conn, query, session_id, limit, vector, now)
        return with_windows(conn, ctx.project, hits, window)

    # Counts, candidates and rows are read by separate statements: one snapshot.
    on_pg = ctx.database.is_postgres
    return (yield from ctx.transact(work, write=not on_pg, snapshot=on_pg))


def peek(ctx: MemoryContext, session_id: str) -> Op[tuple[str, SessionStats]]:
    """A session's context text and counters from one snapshot, without recording
    an access (an operator looking at a session does not keep it alive).

    Raises:
        SessionNotFound: for an unknown session.
    """
    validate_session_id(session_id)

    def work(conn: Connection) -> tuple[str, SessionStats]:
        session = sessions.get_session(conn, ctx.project, session_id, lock=False)
        text = render_text(
            summary_rows.read_summaries(conn, session, with_ids=False),
            store.read_entries(conn, session, active_only=True),
            max_tokens=ctx.config.max_tokens,
            counter=ctx.counter,
        )
        return text, sessions.session_stats(session)

    return (yield from ctx.transact(work, write=False, snapshot=True))
