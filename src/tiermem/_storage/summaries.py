"""The summary table: reading summaries, and the one path that writes them.

A summary row is built and inserted by :func:`insert_summaries` alone, whether a
compression (:func:`commit_summary`), a merge (:func:`commit_merge`) or an import
(:mod:`tiermem._storage.imports`) writes it. Compression and merges take a claim on
the session first (:func:`claim`), call the model outside any transaction, then
commit here only if the claim is still theirs and every entry is unchanged.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._core.clock import as_utc
from .._core.messages import load_text, store_text
from ..errors import (
    CompressionConflict,
    CompressionInProgress,
    SessionNotFound,
)
from ..types import MemoryEntry, MemorySummary
from . import _fast as _driver
from . import entries as entries_table
from . import failpoints as _failpoints
from . import sessions
from . import statements as _sql
from .rows import SessionRecord, SummaryRecord
from .schema import entry_table, session_table, summary_table
from .sessions import get_session

__all__ = [
    "NewSummary",
    "claim",
    "commit_merge",
    "commit_summary",
    "get_summary_row",
    "insert_summaries",
    "link_parents",
    "read_summaries",
    "release_failed_claim",
]

S, E, M = session_table.c, entry_table.c, summary_table.c


# --------------------------------------------------------------------------- summaries


def read_summaries(
    conn: Connection, session: SessionRecord, *, top_only: bool = True, with_ids: bool = True
) -> list[MemorySummary]:
    """Summaries of a session, oldest first (top-level only by default)."""
    sid = session.session_id
    if top_only and not with_ids and not session.summary_count:
        return []
    if top_only and not with_ids:
        top = _driver.fetch(conn, _sql.SELECT_TOP_SUMMARIES, {"pk_": session.pk})
        return [_summary(sid, SummaryRecord.from_row(row), ()) for row in top]
    query = (
        sa.select(summary_table).where(M.session_pk == session.pk).order_by(M.first_seq, M.level)
    )
    if top_only:
        query = query.where(M.parent_id.is_(None))
    rows = [SummaryRecord.from_row(row) for row in conn.execute(query).mappings()]
    ids_by_summary: dict[int, list[int]] = {row.id: [] for row in rows}
    if with_ids and rows:
        lo = min(row.first_seq for row in rows)
        hi = max(row.last_seq for row in rows)
        ids, seqs = _covered(conn, session.pk, lo, hi)
        for row in rows:  # each span is a slice of the seq-ordered list
            start = bisect.bisect_left(seqs, row.first_seq)
            end = bisect.bisect_right(seqs, row.last_seq)
            ids_by_summary[row.id] = ids[start:end]
    return [_summary(sid, row, ids_by_summary[row.id]) for row in rows]


def _covered(conn: Connection, pk: int, first: int, last: int) -> tuple[list[int], list[int]]:
    """Ids and seqs of the compressed entries with seqs ``first..last``, in seq order."""
    rows = _driver.fetch_rows(conn, _sql.SELECT_COVERED, {"pk_": pk, "first": first, "last": last})
    return [row[0] for row in rows], [row[1] for row in rows]


def _summary(session_id: str, row: SummaryRecord, entry_ids: Sequence[int]) -> MemorySummary:
    original = row.original_token_count
    return MemorySummary(
        id=row.id,
        session_id=session_id,
        content=load_text(row.content),
        original_entry_ids=tuple(entry_ids),
        token_count=row.token_count,
        original_token_count=original,
        compression_ratio=row.token_count / original if original else 0.0,
        created_at=as_utc(row.created_at),
        time_range=(as_utc(row.start_time), as_utc(row.end_time)),
        level=row.level,
        first_seq=row.first_seq,
        last_seq=row.last_seq,
        parent_id=row.parent_id,
    )


def get_summary_row(
    conn: Connection, project: str, summary_id: int
) -> tuple[SummaryRecord, SessionRecord]:
    """A summary and its session.

    Raises:
        SessionNotFound: if no summary has that id in the project.
    """
    row = conn.execute(
        sa.select(S.session_id, summary_table)
        .join(session_table, S.pk == M.session_pk)
        .where(M.id == summary_id, S.project == project)
    ).first()
    if row is None:
        raise SessionNotFound(f"no summary {summary_id} in project {project!r}")
    sid, *columns = row
    return SummaryRecord(*columns), get_session(conn, project, sid, lock=False)


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True, slots=True)
class NewSummary:
    """A summary row to insert: every column but its id, session and parent.

    Attributes:
        entry_count: the entries it covers, directly or through merged summaries.
        original_token_count: the tokens of what it summarizes (its entries, or
            its children for a merge).
    """

    content: str
    level: int
    first_seq: int
    last_seq: int
    entry_count: int
    token_count: int
    original_token_count: int
    created_at: datetime
    start_time: datetime
    end_time: datetime

    def stored(self, session_id: str, summary_id: int, entry_ids: Sequence[int]) -> MemorySummary:
        """The summary as callers see it once stored with ``summary_id``."""
        return MemorySummary(
            id=summary_id,
            session_id=session_id,
            content=self.content,
            original_entry_ids=tuple(entry_ids),
            token_count=self.token_count,
            original_token_count=self.original_token_count,
            compression_ratio=self.token_count / self.original_token_count
            if self.original_token_count
            else 0.0,
            created_at=self.created_at,
            time_range=(self.start_time, self.end_time),
            level=self.level,
            first_seq=self.first_seq,
            last_seq=self.last_seq,
        )


def insert_summaries(
    conn: Connection, session_pk: int, summaries: Sequence[NewSummary]
) -> list[int]:
    """Insert top-level summaries (no parent yet) of one session; their ids, in order.

    One summary is one statement (on SQLite through the driver); many are one
    executemany, which SQLAlchemy sends as a few multi-row INSERTs.
    """
    rows = [
        {
            "session_pk": session_pk,
            "content": store_text(summary.content),
            "level": summary.level,
            "first_seq": summary.first_seq,
            "last_seq": summary.last_seq,
            "entry_count": summary.entry_count,
            "token_count": summary.token_count,
            "original_token_count": summary.original_token_count,
            "created_at": summary.created_at,
            "start_time": summary.start_time,
            "end_time": summary.end_time,
            "parent_id": None,
        }
        for summary in summaries
    ]
    if len(rows) == 1:
        (row,) = _driver.fetch_rows(conn, _sql.INSERT_SUMMARY, rows[0], column_keys=tuple(rows[0]))
        return [row[0]]
    if not rows:
        return []
    return list(conn.execute(_sql.INSERT_SUMMARY, rows).scalars())


def link_parents(conn: Connection, links: Sequence[tuple[int, int]]) -> None:
    """Set the parent of each ``(child id, parent id)`` pair, in one executemany."""
    if links:
        conn.execute(
            _sql.SET_PARENT, [{"child": child, "parent": parent} for child, parent in links]
        )


# --------------------------------------------------------------------------- compression


#: Consecutive failures counted for the backoff (see :func:`release_failed_claim`).
_MAX_COUNTED_FAILURES = 1024


def claim(conn: Connection, session: SessionRecord, token: str, now: datetime, ttl: float) -> None:
    """Take the session's compression claim (a lease that expires after ``ttl`` s).

    Raises:
        CompressionInProgress: if another live claim holds the session.
    """
    expires = session.claim_expires_at
    if session.claim_token and expires is not None and as_utc(expires) > now:
        raise CompressionInProgress(
            f"session {session.session_id!r} is being compressed by another worker"
        )
    expires_at = now + timedelta(seconds=ttl)
    sessions.set_claim(conn, session.pk, token, expires_at)


def release_failed_claim(
    conn: Connection,
    session: SessionRecord,
    token: str,
    now: datetime,
    backoff: tuple[float, float],
) -> None:
    """Drop our claim after a failure and back off automatic compression: ``backoff``
    is (base, max) seconds, the pause doubling per consecutive failure up to max."""
    if session.claim_token != token:
        return
    # The count saturates where doubling would leave the float range (2.0 ** 1024
    # overflows); backoff_max caps the pause long before that.
    failures = min(session.failures + 1, _MAX_COUNTED_FAILURES)
    pause = min(backoff[0] * 2.0 ** (failures - 1), backoff[1])
    sessions.drop_claim(conn, session.pk, failures, now + timedelta(seconds=pause))


def _check_claim(session: SessionRecord, token: str) -> None:
    if session.claim_token != token:
        raise CompressionConflict(
            f"the compression claim of session {session.session_id!r} expired and was "
            "taken by another worker; nothing was written"
        )


def commit_summary(
    conn: Connection,
    session: SessionRecord,
    token: str,
    entries: Sequence[MemoryEntry],
    content: str,
    token_count: int,
    now: datetime,
) -> tuple[MemorySummary, SessionRecord]:
    """Store the summary of ``entries`` and cover them, if they are still active.

    Raises:
        CompressionConflict: the claim was lost or the entries changed.
    """
    _check_claim(session, token)
    original = sum(entry.token_count for entry in entries)
    new = NewSummary(
        content=content,
        level=1,
        first_seq=entries[0].seq,
        last_seq=entries[-1].seq,
        entry_count=len(entries),
        token_count=token_count,
        original_token_count=original,
        created_at=now,
        start_time=entries[0].timestamp,
        end_time=entries[-1].timestamp,
    )
    (summary_id,) = insert_summaries(conn, session.pk, [new])
    _failpoints.hit("compress.after_summary_insert")
    # The entries stay as they are: moving the session's compressed_seq past them
    # (finish_claim below) is what covers them (see coverage).
    covered = entries_table.count_covered(conn, session.pk, new.last_seq)
    if covered != len(entries) or new.first_seq <= session.compressed_seq:
        raise CompressionConflict("the entries changed while the summarizer ran; nothing written")
    _failpoints.hit("compress.after_link")
    counted = dataclasses.replace(
        session,
        active_count=session.active_count - len(entries),
        active_tokens=session.active_tokens - original,
        summary_count=session.summary_count + 1,
        summary_tokens=session.summary_tokens + token_count,
        compressed_seq=new.last_seq,
    )
    summary = new.stored(session.session_id, summary_id, [entry.id for entry in entries])
    return summary, sessions.finish_claim(conn, counted)


def commit_merge(
    conn: Connection,
    session: SessionRecord,
    token: str,
    children: Sequence[MemorySummary],
    content: str,
    token_count: int,
    now: datetime,
) -> tuple[MemorySummary, SessionRecord]:
    """Store a higher-level summary of ``children`` (still top-level) and link them.

    Raises:
        CompressionConflict: the claim was lost or the summaries changed.
    """
    _check_claim(session, token)
    original = sum(child.token_count for child in children)
    # Neither the plan nor this commit reads the ids of the entries under the merged
    # summary: they are every entry of the conversation so far, and reading them made
    # each merge cost O(conversation). Its entry count is its children's.
    child_ids = [child.id for child in children]
    entry_count = conn.execute(
        sa.select(sa.func.coalesce(sa.func.sum(M.entry_count), 0)).where(
            M.session_pk == session.pk, M.id.in_(child_ids)
        )
    ).scalar_one()
    new = NewSummary(
        content=content,
        level=max(child.level for child in children) + 1,
        first_seq=children[0].first_seq,
        last_seq=children[-1].last_seq,
        entry_count=entry_count,
        token_count=token_count,
        original_token_count=original,
        created_at=now,
        start_time=children[0].time_range[0],
        end_time=children[-1].time_range[1],
    )
    (summary_id,) = insert_summaries(conn, session.pk, [new])
    linked = conn.execute(
        sa.update(summary_table)
        .where(
            M.session_pk == session.pk,
            M.id.in_(child_ids),
            M.parent_id.is_(None),
        )
        .values(parent_id=summary_id)
    ).rowcount
    if linked != len(children):
        raise CompressionConflict("the summaries changed while the summarizer ran")
    counted = dataclasses.replace(
        session,
        summary_count=session.summary_count - len(children) + 1,
        summary_tokens=session.summary_tokens - original + token_count,
    )
    summary = new.stored(session.session_id, summary_id, ())  # get_summaries() lists them
    return summary, sessions.finish_claim(conn, counted)
