"""The conversation tables (sessions, summaries, entries): persistence details, never
returned to callers. :mod:`tiermem._storage.tables` lists every table tiermem creates.

Counters on the session row are kept incrementally under the session lock, so
no operation ever has to scan a session's entries to know its totals:

* ``last_seq``: the highest ``seq`` allocated; seqs are dense, 1..last_seq.
* ``entry_count`` / ``entry_tokens``: every stored entry.
* ``active_count`` / ``active_tokens``: current entries not covered by a summary
  (a *retired* entry, one a later revision or removal superseded, is kept but no
  longer current: see ``EntryRow.retired_at``).
* ``summary_count`` / ``summary_tokens``: top-level summaries (what the model sees).

``context_tokens = active_tokens + summary_tokens`` is what ``get_messages``
hands the model (the summaries' system-message framing aside).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlmodel import Field, SQLModel

__all__ = [
    "EntryRow",
    "SessionRow",
    "SummaryRow",
    "dialect_insert",
    "entry_table",
    "session_table",
    "summary_table",
    "utc_column",
]


def utc_column() -> sa.DateTime:
    """A timestamp column type that keeps the time zone (tiermem stores UTC)."""
    return sa.DateTime(timezone=True)


class SessionRow(SQLModel, table=True):
    """One conversation of a project, with its counters and tier."""

    __tablename__ = "tiermem_session"
    __table_args__ = (
        sa.UniqueConstraint("project", "session_id", name="uq_tiermem_session_project_id"),
        sa.Index("ix_tiermem_session_tier", "project", "memory_tier"),
        # Tier statistics, least-recently-used lists and pruning scan a project by access time.
        sa.Index("ix_tiermem_session_project_accessed", "project", "last_accessed"),
    )

    pk: int | None = Field(default=None, primary_key=True)
    project: str = Field(max_length=255)
    session_id: str = Field(max_length=255)
    created_at: datetime = Field(sa_type=utc_column())
    last_accessed: datetime = Field(sa_type=utc_column())
    access_count: int = 0
    memory_tier: str = Field(default="active", max_length=16)
    last_seq: int = 0
    entry_count: int = 0
    entry_tokens: int = 0
    active_count: int = 0
    active_tokens: int = 0
    summary_count: int = 0
    summary_tokens: int = 0
    encoding: str = Field(max_length=64)
    #: JSON object {tool_call_id: tool_name} of assistant tool calls not yet answered,
    #: in the order they were made.
    pending_calls: str = Field(default="{}", sa_type=sa.Text)
    claim_token: str | None = Field(default=None, max_length=64)
    claim_expires_at: datetime | None = Field(default=None, sa_type=utc_column())
    failures: int = 0
    backoff_until: datetime | None = Field(default=None, sa_type=utc_column())
    #: The last seq compressed: compression takes a prefix, so every current,
    #: unpinned entry up to it is covered by the level-1 summary whose range holds
    #: its seq, and every active entry is after it or pinned. Compression moves it
    #: and rewrites no entry.
    compressed_seq: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class SummaryRow(SQLModel, table=True):
    """A summary of a contiguous seq range; ``parent_id`` is set once it is merged."""

    __tablename__ = "tiermem_summary"
    __table_args__ = (
        sa.Index("ix_tiermem_summary_session", "session_pk", "parent_id"),
        # Deleting a summary checks its children's foreign keys: without these the
        # database scans every summary and entry for each summary deleted.
        sa.Index(
            "ix_tiermem_summary_parent",
            "parent_id",
            sqlite_where=sa.text("parent_id IS NOT NULL"),
            postgresql_where=sa.text("parent_id IS NOT NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    session_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer, sa.ForeignKey("tiermem_session.pk", ondelete="CASCADE"), nullable=False
        )
    )
    content: str = Field(sa_type=sa.Text)
    level: int = 1
    first_seq: int
    last_seq: int
    entry_count: int
    token_count: int
    original_token_count: int
    created_at: datetime = Field(sa_type=utc_column())
    start_time: datetime = Field(sa_type=utc_column())
    end_time: datetime = Field(sa_type=utc_column())
    parent_id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.Integer, sa.ForeignKey("tiermem_summary.id"), nullable=True),
    )


class EntryRow(SQLModel, table=True):
    """One stored message; ``message`` is the exact ``message_to_dict`` JSON, with ``0``
    for its content when that is ``content`` itself, so the text is kept once (see
    :func:`tiermem._core.messages.hollow`)."""

    __tablename__ = "tiermem_entry"
    __table_args__ = (
        sa.UniqueConstraint("session_pk", "seq", name="uq_tiermem_entry_session_seq"),
        # The active entries are the session's entries after its compressed_seq (the
        # unique index reads them) and its pinned ones before it (this one does).
        sa.Index(
            "ix_tiermem_entry_pinned",
            "session_pk",
            "seq",
            sqlite_where=sa.text("pinned = 1"),
            postgresql_where=sa.text("pinned"),
        ),
        # Partial: lookups always name an id, and appends of messages without one
        # then never write to it.
        sa.Index(
            "ix_tiermem_entry_message_id",
            "session_pk",
            "message_id",
            sqlite_where=sa.text("message_id IS NOT NULL"),
            postgresql_where=sa.text("message_id IS NOT NULL"),
        ),
        sa.Index(
            "ix_tiermem_entry_summary",
            "summary_id",
            sqlite_where=sa.text("summary_id IS NOT NULL"),
            postgresql_where=sa.text("summary_id IS NOT NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True)
    session_pk: int = Field(
        sa_column=sa.Column(
            sa.Integer, sa.ForeignKey("tiermem_session.pk", ondelete="CASCADE"), nullable=False
        )
    )
    seq: int
    type: str = Field(max_length=16)
    role: str = Field(max_length=16)
    content: str = Field(sa_type=sa.Text)
    message: str = Field(sa_type=sa.Text)
    message_id: str | None = Field(default=None, max_length=255)
    timestamp: datetime = Field(sa_type=utc_column())
    token_count: int
    pinned: bool = False
    meta: str = Field(default="{}", sa_type=sa.Text)
    #: The level-1 summary of a compressed entry, where its row names it: a retired
    #: entry that was compressed when it was retired, an imported one, or one stored
    #: before migration 0025. Compression writes no entry: a current entry's summary is
    #: the one whose range holds its seq, up to its session's ``compressed_seq``
    #: (:mod:`tiermem._storage.coverage`).
    summary_id: int | None = Field(
        default=None,
        sa_column=sa.Column(sa.Integer, sa.ForeignKey("tiermem_summary.id"), nullable=True),
    )
    #: When the entry stopped being current (``None`` while it is): a graph's
    #: checkpoint revised or removed its message (:mod:`tiermem._ops.revisions`). A
    #: retired entry is kept (the checkpoints that hold it read it back) and
    #: exported, but no context, compression, search or recall sees it.
    retired_at: datetime | None = Field(default=None, sa_type=utc_column())


session_table: sa.Table = SessionRow.__table__  # type: ignore[attr-defined]
summary_table: sa.Table = SummaryRow.__table__  # type: ignore[attr-defined]
entry_table: sa.Table = EntryRow.__table__  # type: ignore[attr-defined]


def dialect_insert(conn: Connection, table: sa.Table) -> Any:
    """An INSERT of ``table`` with ``on_conflict_*`` (both dialects spell it the same)."""
    module = postgresql if conn.dialect.name == "postgresql" else sqlite
    return module.insert(table)
