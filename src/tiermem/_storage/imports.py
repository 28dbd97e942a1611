"""Writing a validated import: the session row, its summaries and entries, in
the caller's transaction (:mod:`tiermem._ops.transfer` validates and counts)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from langchain_core.messages import BaseMessage
from sqlalchemy.engine import Connection

from .._core.messages import hollow, render_text, store_text
from ..errors import ImportValidationError, SessionNotFound, StorageBusy
from ..state import SessionState
from ..tiers import MemoryTier, calculate_tier
from . import cascade, entries, fts, sessions, summaries

__all__ = ["ImportPlan"]


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """A validated export, counted and ready to write."""

    state: SessionState
    session_id: str
    messages: list[BaseMessage]
    message_texts: list[str]
    metadata_texts: list[str]
    entry_tokens: list[int]
    summary_tokens: list[int]
    original_tokens: list[int]
    entry_counts: list[int]
    pending_calls: dict[str, str]
    encoding: str

    def write(self, conn: Connection, project: str, *, overwrite: bool, now: datetime) -> None:
        """Insert the session in the open transaction (replacing it if ``overwrite``).

        Raises:
            ImportValidationError: if the session exists and ``overwrite`` is false.
        """
        pk = self._session_row(conn, project, overwrite=overwrite, now=now)
        state = self.state
        if conn.dialect.name == "postgresql":
            # The INSERTs below run once per row: one generic plan serves every row (the
            # transaction's forced custom plans would plan each row afresh).
            conn.exec_driver_sql("SET LOCAL plan_cache_mode = auto")
        # Every summary in one statement, then every parent link in one more.
        ids = summaries.insert_summaries(
            conn,
            pk,
            [
                summaries.NewSummary(
                    content=summary.content,
                    level=summary.level,
                    first_seq=summary.first_seq,
                    last_seq=summary.last_seq,
                    entry_count=self.entry_counts[position],
                    token_count=self.summary_tokens[position],
                    original_token_count=self.original_tokens[position],
                    created_at=summary.created_at,
                    start_time=summary.start_time,
                    end_time=summary.end_time,
                )
                for position, summary in enumerate(state.summaries)
            ],
        )
        summaries.link_parents(
            conn,
            [
                (ids[position], ids[summary.parent])
                for position, summary in enumerate(state.summaries)
                if summary.parent is not None
            ],
        )
        rows = [
            {
                "session_pk": pk,
                "seq": entry.seq,
                "type": entry.type.value,
                "role": entry.role,
                "content": store_text(text),
                "message": hollow(message_text, message, text),
                "message_id": None if message.id is None else store_text(message.id),
                "timestamp": entry.timestamp,
                "token_count": tokens,
                "pinned": entry.pinned,
                "meta": metadata_text,
                "summary_id": ids[entry.summary] if entry.summary is not None else None,
                "retired_at": entry.retired_at,
            }
            for entry, message, message_text, metadata_text, tokens, text in zip(
                state.entries,
                self.messages,
                self.message_texts,
                self.metadata_texts,
                self.entry_tokens,
                map(render_text, self.messages),
                strict=True,
            )
        ]
        entries.import_rows(conn, rows)
        fts.flush(conn)  # an import indexes its own entries, however many

    def _session_row(
        self, conn: Connection, project: str, *, overwrite: bool, now: datetime
    ) -> int:
        """Insert the session row (deleting the one it replaces); its pk.

        The existing row is locked before it is deleted, so an import replacing it
        waits for a concurrent import or append of the session to commit. A row
        created by another transaction after the lookup (the insert finds it when
        that transaction commits) is looked up again and replaced in turn.
        """
        state = self.state
        active = [
            tokens
            for entry, tokens in zip(state.entries, self.entry_tokens, strict=True)
            if entry.summary is None and entry.retired_at is None
        ]
        top = [i for i, summary in enumerate(state.summaries) if summary.parent is None]
        # A last_accessed in the future (another host's clock) is clamped to now.
        last_accessed = min(state.last_accessed, now)
        for _ in range(_SESSION_ROUNDS):
            try:
                existing = sessions.get_session(conn, project, self.session_id)
            except SessionNotFound:
                existing = None
            if existing is not None:
                if not overwrite:
                    raise ImportValidationError(
                        f"session {self.session_id!r} exists; pass overwrite=True to replace it",
                        path="$.session_id",
                    )
                cascade.delete_sessions(conn, [existing.pk])
            pk = sessions.insert_imported(
                conn,
                {
                    "project": project,
                    "session_id": self.session_id,
                    "created_at": min(state.created_at, last_accessed),
                    "last_accessed": last_accessed,
                    "access_count": state.access_count,
                    "memory_tier": MemoryTier.ACTIVE.value
                    if existing is not None
                    else calculate_tier(last_accessed, now).value,
                    "last_seq": len(state.entries),
                    "entry_count": len(state.entries),
                    "entry_tokens": sum(self.entry_tokens),
                    "active_count": len(active),
                    "active_tokens": sum(active),
                    "summary_count": len(top),
                    "summary_tokens": sum(self.summary_tokens[i] for i in top),
                    "encoding": self.encoding,
                    "pending_calls": json.dumps(self.pending_calls),  # in call order, as appends
                    "compressed_seq": max(
                        (summary.last_seq for summary in state.summaries if summary.level == 1),
                        default=0,
                    ),
                },
            )
            if pk is not None:
                return pk
        raise StorageBusy(
            f"session {self.session_id!r} was created again by other writers while importing; "
            "retry later"
        )


#: Lookups of the session row an import makes before giving up: a second one finds a
#: row another transaction created meanwhile; more only under a stream of such races.
_SESSION_ROUNDS = 5
