"""Retiring entries (``EntryRow.retired_at``): an entry superseded by a revision of
its message, or by its removal, stops being current but is kept, for the graph
checkpoints that hold it (:mod:`tiermem._ops.revisions` decides which)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._core.messages import load_text
from . import entries, sessions
from .schema import entry_table
from .vector_schema import entry_vector_table

__all__ = ["entry_message_ids", "retire"]

E, V = entry_table.c, entry_vector_table.c


def retire(conn: Connection, session_pk: int, entry_ids: Iterable[int], now: datetime) -> int:
    """Mark the session's current entries among ``entry_ids`` retired at ``now``, in
    the caller's transaction; returns how many were.

    Those still active leave the session's active counters (compression and the
    context count only current entries); their vectors are dropped, so a search by
    meaning never spends a place on them. A compressed entry stays linked to its
    summary, whose text was written already."""
    ids = sorted(set(entry_ids))
    if not ids:
        return 0
    retired = entries.mark_retired(conn, session_pk, ids, now)
    active = [tokens for _, tokens, compressed in retired if not compressed]
    if active:
        sessions.leave_active(conn, session_pk, len(active), sum(active))
    if retired:
        doomed = [entry_id for entry_id, _, _ in retired]
        conn.execute(sa.delete(entry_vector_table).where(V.entry_id.in_(doomed)))
    return len(retired)


def entry_message_ids(conn: Connection, entry_ids: Iterable[int]) -> dict[int, str | None]:
    """The message id of each entry of ``entry_ids`` (``None``: its message has none)."""
    ids = sorted(set(entry_ids))
    if not ids:
        return {}
    query = sa.select(E.id, E.message_id).where(E.id.in_(ids))
    return {int(pk): None if mid is None else load_text(mid) for pk, mid in conn.execute(query)}
