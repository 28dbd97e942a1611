"""A search hit's neighbouring turns (:attr:`~tiermem.types.SearchHit.window`), read in
one statement for every hit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..types import MemoryEntry, SearchHit
from . import coverage
from .rows import EntryRecord
from .schema import entry_table, session_table
from .store import entry_from_row

__all__ = ["with_windows"]

S, E = session_table.c, entry_table.c


def with_windows(
    conn: Connection, project: str, hits: Sequence[SearchHit], window: int
) -> list[SearchHit]:
    """``hits`` with the ``window`` entries before and after each (see
    :attr:`SearchHit.window`), read in one statement."""
    if not hits or window <= 0:
        return list(hits)
    spans = [
        sa.and_(
            S.session_id == hit.entry.session_id,
            E.seq.between(hit.entry.seq - window, hit.entry.seq + window),
        )
        for hit in hits
    ]
    rows = conn.execute(
        sa.select(S.session_id, entry_table)
        .join(session_table, S.pk == E.session_pk)
        .where(S.project == sa.bindparam("project"), sa.or_(*spans), E.retired_at.is_(None))
        .order_by(E.session_pk, E.seq),
        {"project": project},
    )
    read = [(str(sid), EntryRecord(*columns)) for sid, *columns in rows]
    covered = coverage.summary_ids(conn, [record for _, record in read])
    around: dict[str, list[MemoryEntry]] = {}
    for (sid, record), summary in zip(read, covered, strict=True):
        around.setdefault(sid, []).append(entry_from_row(sid, record, summary_id=summary))
    return [
        replace(
            hit,
            window=tuple(
                entry
                for entry in around.get(hit.entry.session_id, [])
                if abs(entry.seq - hit.entry.seq) <= window
            ),
        )
        for hit in hits
    ]
