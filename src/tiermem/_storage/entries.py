"""The writes of the entries table (``tiermem_entry``): an append's rows with their
change-feed events, an import's rows in batches, the count of the entries a
compression covers (it writes none: see :mod:`tiermem._storage.coverage`), and the
mark of retired ones (:mod:`tiermem._storage.retired`). No
other module writes the table but the session delete cascade
(:mod:`tiermem._storage.cascade`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..types import MemoryEntry
from . import _fast as _driver
from . import coverage, events
from . import failpoints as _failpoints
from . import statements as _sql
from .schema import entry_table

__all__ = [
    "ENTRIES_PER_STATEMENT",
    "IMPORT_BATCH",
    "import_rows",
    "insert",
    "count_covered",
    "mark_retired",
]

#: Entries per PostgreSQL statement that inserts them with their events (14
#: parameters each).
ENTRIES_PER_STATEMENT = 1_000

#: Rows per statement of an import.
IMPORT_BATCH = 500


def insert(
    conn: Connection,
    rows: Sequence[Mapping[str, Any]],
    announced: events.EntryEvents | None,
    build: Callable[[Sequence[int]], list[MemoryEntry]],
) -> list[MemoryEntry]:
    """An append's insert: entry rows (all with the same columns) and their
    ``announced`` events; the entries in order, made by ``build`` from the ids the
    rows got."""
    if conn.dialect.name != "sqlite":
        if announced is None:  # one multi-row INSERT ... RETURNING
            return build(list(conn.execute(_sql.INSERT_ENTRIES, list(rows)).scalars()))
        # The events' payloads are made before the insert (they do not read the id).
        unsaved = build([0] * len(rows))
        parts = [announced.parts(entry) for entry in unsaved]
        # The entries and their events in one statement: the feed costs an append no
        # round trip of its own. In chunks, in seq order, so that a long batch stays
        # within the 65,535 parameters a statement takes.
        ids: list[int] = []
        for start in range(0, len(rows), ENTRIES_PER_STATEMENT):
            chunk = rows[start : start + ENTRIES_PER_STATEMENT]
            feed_sql, feed_args = events.entry_events_sql(
                announced,
                [row["seq"] for row in chunk],
                parts[start : start + ENTRIES_PER_STATEMENT],
            )
            columns = tuple(chunk[0])
            values = ", ".join(["(" + ", ".join(["%s"] * len(columns)) + ")"] * len(chunk))
            sql = (
                f"WITH new AS (INSERT INTO tiermem_entry ({', '.join(columns)}) "
                f"VALUES {values} RETURNING id, seq), {feed_sql} SELECT id FROM new ORDER BY seq"
            )
            args = [row[column] for row in chunk for column in columns]
            ids += [row[0] for row in conn.exec_driver_sql(sql, tuple(args + feed_args))]
        return [
            dataclasses.replace(entry, id=entry_id)
            for entry, entry_id in zip(unsaved, ids, strict=True)
        ]
    # A statement per row costs SQLite less than building a multi-row one. The
    # entries are made once, with their ids, and their events follow.
    stored = build(
        [
            _driver.fetch_rows(conn, _sql.INSERT_ENTRIES, row, column_keys=tuple(row))[0][0]
            for row in rows
        ]
    )
    if announced is not None:
        parts = [announced.parts(entry) for entry in stored]
        events.insert_for_entries(conn, announced, parts, [entry.id for entry in stored])
    return stored


def import_rows(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """An import's insert: entry rows as exported (their summary links included), in
    batches of :data:`IMPORT_BATCH`; no events (the import records its own)."""
    for start in range(0, len(rows), IMPORT_BATCH):
        conn.execute(sa.insert(entry_table), list(rows[start : start + IMPORT_BATCH]))
        _failpoints.hit("import.mid_batch")


def count_covered(conn: Connection, session_pk: int, last_seq: int) -> int:
    """How many entries a compression of session ``session_pk`` up to ``last_seq``
    covers: its unpinned active entries up to that seq (the compression itself only
    moves the session's ``compressed_seq``; no entry is written)."""
    values = {"pk_": session_pk, "last": last_seq}
    return int(_driver.fetch_rows(conn, _sql.COUNT_COVERED, values)[0][0])


def mark_retired(
    conn: Connection, session_pk: int, entry_ids: Sequence[int], now: datetime
) -> list[tuple[int, int, bool]]:
    """Mark the session's current entries among ``entry_ids`` retired at ``now``;
    (entry id, tokens, compressed) of each one marked."""
    row = entry_table.c
    # A compressed entry's summary is read off the ranges while it is current; once
    # retired, its row says it (see coverage).
    marked = conn.execute(
        sa.update(entry_table)
        .where(row.session_pk == session_pk, row.id.in_(list(entry_ids)), row.retired_at.is_(None))
        .values(retired_at=now, summary_id=coverage.SUMMARY_OF)
        .returning(row.id, row.token_count, row.summary_id)
    )
    return [(int(pk), int(tokens), summary is not None) for pk, tokens, summary in marked]
