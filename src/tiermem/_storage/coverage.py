"""Which summary covers an entry.

Compression takes a prefix of a session's current, unpinned entries. It stores a
level-1 summary with that prefix's seq range and moves the session's
``compressed_seq`` to the range's end, and it writes no entry: on PostgreSQL a row
written again leaves its old version behind until a vacuum, with a new entry in each
of its indexes, and rewriting each compressed entry came to a sixth of what a
``TieredSaver`` thread of 500-character messages stored. So a current entry's
summary is read off the ranges: the level-1 summary whose range holds its seq, when
it is unpinned. A retired entry keeps the summary it had when it was retired in its
row's ``summary_id`` (the retirement writes the row anyway), as do imported entries
(an import writes every row anyway, and the doctor then reads what the export said)
and the compressed entries stored before migration 0025.

:data:`SUMMARY_OF` says it in SQL, for the statement that retires entries;
:func:`summary_ids` gives it for rows read in bulk, from one read of the ranges
(:func:`covering` for rows whose ranges the caller holds).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import _fast as _driver
from . import sessions
from . import statements as _sql
from .rows import EntryRecord
from .schema import entry_table, session_table, summary_table

__all__ = [
    "PINNED_INDEX",
    "SUMMARY_OF",
    "Ranges",
    "covering",
    "install",
    "level_one_ranges",
    "summary_ids",
]

E = entry_table.c
_SUMMARY = summary_table.alias("covering_summary")

#: The summary of an entry (``NULL`` when it is not compressed), for statements that
#: read or write ``tiermem_entry`` rows: the one its row names, else, for a current
#: unpinned entry within its session's compressed prefix, the level-1 summary whose
#: range holds its seq.
SUMMARY_OF = sa.case(
    (E.summary_id.is_not(None), E.summary_id),
    (
        _sql.in_prefix(_sql.ENTRY_COMPRESSED_UP_TO),
        sa.select(_SUMMARY.c.id)
        .where(
            _SUMMARY.c.session_pk == E.session_pk,
            _SUMMARY.c.level == 1,
            _SUMMARY.c.first_seq <= E.seq,
            _SUMMARY.c.last_seq >= E.seq,
        )
        .scalar_subquery(),
    ),
    else_=sa.null(),
)

#: A session's compressed prefix: its ``compressed_seq``, and its level-1 summaries in
#: seq order (their first seqs, and (last seq, id) of each).
Ranges = tuple[int, list[int], list[tuple[int, int]]]


@functools.cache
def _select_level_one(dialect: str) -> sa.Select[Any]:
    """The compressed prefix and level-1 summaries of the sessions :pks (one
    parameter, :func:`tiermem._storage.statements.ids_value`), built once: a read of
    search hits runs it, and building it each time cost more than running it."""
    M, S = summary_table.c, session_table.c
    pks = sa.bindparam("pks", type_=_sql.ids_type(dialect))
    return (
        sa.select(M.session_pk, S.compressed_seq, M.first_seq, M.last_seq, M.id)
        .join(session_table, S.pk == M.session_pk)
        .where(_sql.in_ids(dialect, M.session_pk, pks), M.level == 1)
        .order_by(M.session_pk, M.first_seq)
    )


def level_one_ranges(conn: Connection, session_pks: Iterable[int]) -> dict[int, Ranges]:
    """The compressed prefix of each session of ``session_pks`` that has summaries."""
    pks = sorted(set(session_pks))
    if not pks:
        return {}
    dialect = conn.dialect.name
    rows = _driver.fetch_rows(
        conn, _select_level_one(dialect), {"pks": _sql.ids_value(dialect, pks)}
    )
    ranges: dict[int, Ranges] = {}
    for pk, prefix, first, last, summary_id in rows:
        _, firsts, rest = ranges.setdefault(int(pk), (int(prefix), [], []))
        firsts.append(int(first))
        rest.append((int(last), int(summary_id)))
    return ranges


def covering(ranges: Ranges | None, seq: int) -> int | None:
    """The id of the level-1 summary that covers a current, unpinned entry at ``seq``:
    the one whose range holds it, within the compressed prefix (ranges are disjoint)."""
    if ranges is None:
        return None
    prefix, firsts, rest = ranges
    at = bisect.bisect_right(firsts, seq) - 1
    if seq > prefix or at < 0:
        return None
    last, summary_id = rest[at]
    return summary_id if seq <= last else None


def _may_be_covered(row: EntryRecord) -> bool:
    return row.summary_id is None and row.retired_at is None and not row.pinned


def summary_ids(conn: Connection, rows: Sequence[EntryRecord]) -> list[int | None]:
    """The summary of each of ``rows`` (``None`` for an entry not compressed): the one
    its row names, else its range's, from one read of the ranges."""
    pks = {row.session_pk for row in rows if _may_be_covered(row)}
    ranges = level_one_ranges(conn, pks)
    return [
        covering(ranges.get(row.session_pk), row.seq) if _may_be_covered(row) else row.summary_id
        for row in rows
    ]


#: The index of each session's pinned entries (never compressed, so always active).
PINNED_INDEX = "ix_tiermem_entry_pinned"
#: The index of (session, summary, seq) that compression's writes kept up before.
_SUMMARY_INDEX = "ix_tiermem_entry_active"


def install(conn: Connection) -> None:
    """Give a database made before migration 0025 what compression now needs, as the
    migration does: each session's ``compressed_seq`` (the end of its level-1
    summaries) and the index of pinned entries in place of the index of (session,
    summary, seq). ``create_tables`` runs it on a database's first use by this
    version, so one not migrated yet keeps working; it changes nothing once done."""
    inspector = sa.inspect(conn)
    if not inspector.has_table(session_table.name) or not inspector.has_table(entry_table.name):
        return
    columns = {str(column["name"]) for column in inspector.get_columns(session_table.name)}
    if "compressed_seq" not in columns:
        conn.exec_driver_sql(
            "ALTER TABLE tiermem_session ADD COLUMN compressed_seq INTEGER NOT NULL DEFAULT 0"
        )
        sessions.set_compressed_seqs(conn)
    indexes = {str(index["name"]) for index in inspector.get_indexes(entry_table.name)}
    if PINNED_INDEX not in indexes:
        pinned = "pinned" if conn.dialect.name == "postgresql" else "pinned = 1"
        conn.exec_driver_sql(
            f"CREATE INDEX {PINNED_INDEX} ON tiermem_entry (session_pk, seq) WHERE {pinned}"
        )
    if _SUMMARY_INDEX in indexes:
        conn.exec_driver_sql(f"DROP INDEX {_SUMMARY_INDEX}")
