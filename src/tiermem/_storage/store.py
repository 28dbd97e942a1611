"""SQL operations on one open transaction. Every function takes a ``Connection``
already inside the transaction that ``Database.run`` opened; none commits.

Statements are set-based and touch only the rows an operation needs: appends
read and update one session row, reads select the active entries as the seqs after
the session's compressed prefix and its pinned ones (see
:mod:`tiermem._storage.coverage`), each an index range, so cost follows the active
window, never the length of the whole conversation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import sqlalchemy as sa
from langchain_core.messages import BaseMessage, ToolMessage
from sqlalchemy.engine import Connection

from .._core.clock import as_utc
from .._core.messages import (
    deserialize,
    load_text,
    store_text,
    stored_message,
    tool_call_ids,
    tool_call_names,
)
from .._core.render import SummaryText, WindowEntry
from ..errors import (
    InvalidContent,
)
from ..types import EntryType, MemoryEntry
from . import _fast as _driver
from . import coverage, events, fts, sessions
from . import entries as entries_table
from . import failpoints as _failpoints
from . import statements as _sql
from .rows import EntryRecord, SessionRecord
from .schema import entry_table, session_table, summary_table

S, E, M = session_table.c, entry_table.c, summary_table.c

#: Entries are indexed for search in batches (:mod:`tiermem._storage.fts`): an append
#: indexes every pending entry when the ids it was given cross a multiple of this.
#: Ids are shared by all sessions, so a flush comes every 64 entries stored
#: anywhere and never finds more than about 64 pending, however many short
#: sessions there are (a per-session cadence would let sessions shorter than the
#: batch pile up unindexed entries for one unlucky append to index). FTS5 writes a
#: segment per flush and merges segments later: 64 entries a flush cost a turn about
#: 3 % less than 16, and a search then indexes at most 63 (about 1.5 ms).
FTS_BATCH = 64


@dataclass(frozen=True, slots=True)
class NewEntry:
    """An entry validated and counted, ready to insert (built outside the transaction)."""

    message: BaseMessage
    type: EntryType
    role: str
    content: str
    #: The JSON :func:`tiermem._core.messages.serialize` made of the message.
    message_json: str
    #: What the row keeps of it (:func:`tiermem._core.messages.hollow`).
    stored_json: str
    token_count: int
    pinned: bool
    metadata_json: str


# --------------------------------------------------------------------------- entries


def append(
    conn: Connection,
    session: SessionRecord,
    entries: Sequence[NewEntry],
    now: datetime,
    announced: events.EntryEvents | None = None,
) -> tuple[list[MemoryEntry], SessionRecord]:
    """Insert ``entries`` into the seqs :func:`reserve` allocated (``session`` is the
    row it returned), with their ``announced`` events, and record their tool calls.

    Returns the stored entries and the session row as the append leaves it.

    Raises:
        InvalidContent: a tool result without a pending call, or a reused call id.
    """
    if any(entry.type in (EntryType.TOOL_CALL, EntryType.TOOL_RESULT) for entry in entries):
        pending: dict[str, str] = json.loads(session.pending_calls)
        for entry in entries:
            _check_tool_pairing(entry.message, pending)
        # In the order the calls were made: a result without a call id answers
        # the oldest pending call of its tool.
        session = sessions.set_pending_calls(conn, session, json.dumps(pending))
    first_seq = session.last_seq - len(entries) + 1
    rows: list[dict[str, Any]] = [
        {
            "session_pk": session.pk,
            "seq": first_seq + offset,
            "type": entry.type.value,
            "role": entry.role,
            "content": store_text(entry.content),
            "message": entry.stored_json,
            "message_id": None if entry.message.id is None else store_text(entry.message.id),
            "timestamp": now,
            "token_count": entry.token_count,
            "pinned": entry.pinned,
            "meta": entry.metadata_json,
        }
        for offset, entry in enumerate(entries)
    ]

    def build(ids: Sequence[int]) -> list[MemoryEntry]:
        return [
            entry_from_row(
                session.session_id, EntryRecord(id=entry_id, summary_id=None, **row), entry.message
            )
            for row, entry, entry_id in zip(rows, entries, ids, strict=True)
        ]

    stored = entries_table.insert(conn, rows, announced, build)
    if (stored[0].id - 1) // FTS_BATCH != stored[-1].id // FTS_BATCH:
        fts.flush(conn)
    _failpoints.hit("append.after_insert")
    return stored, session


def pinned_tokens(conn: Connection, session_pk: int) -> int:
    """Tokens of the pinned context of a session (pinned entries stay active)."""
    rows = _driver.fetch_rows(conn, _sql.SELECT_PINNED_TOKENS, {"pk_": session_pk})
    return int(rows[0][0] or 0)


def _check_tool_pairing(message: BaseMessage, pending: dict[str, str]) -> None:
    if isinstance(message, ToolMessage):
        if pending.pop(message.tool_call_id, None) is None:
            raise InvalidContent(
                f"tool result {message.tool_call_id!r} answers no pending tool call of this "
                "session; add the assistant's tool call first"
            )
    for call_id, name in zip(tool_call_ids(message), tool_call_names(message), strict=True):
        if call_id in pending:
            raise InvalidContent(f"tool call id {call_id!r} is already pending")
        pending[call_id] = name


def stored_message_ids(
    conn: Connection, project: str, session_id: str, ids: Sequence[str]
) -> set[str]:
    """Which of ``ids`` are stored in the session (none if it does not exist)."""
    stored = [store_text(value) for value in ids]  # as the append stored them
    query = (
        sa.select(E.message_id)
        .join(session_table, S.pk == E.session_pk)
        .where(S.project == project, S.session_id == session_id, E.message_id.in_(stored))
    )
    return {load_text(value) for value in conn.execute(query).scalars() if value is not None}


def known_entries(
    conn: Connection, pk: int, ids: Sequence[str], seq: int
) -> tuple[set[str], str | None]:
    """Which of ``ids`` session ``pk`` holds already, and the message id of its entry
    ``seq`` (``None`` when it has none or no such entry): one statement."""
    dialect = conn.dialect.name
    stored = _sql.ids_value(dialect, [store_text(value) for value in ids])
    rows = _driver.fetch_rows(
        conn, _sql.select_known_entries(dialect), {"pk_": pk, "ids": stored, "seq": seq}
    )
    known = {load_text(message_id) for _, message_id in rows if message_id is not None}
    at_seq = next((message_id for row_seq, message_id in rows if row_seq == seq), None)
    return known & set(ids), None if at_seq is None else load_text(at_seq)


def entry_from_row(
    session_id: str,
    row: EntryRecord,
    message: BaseMessage | None = None,
    *,
    fresh: bool = True,
    summary_id: int | None = None,
) -> MemoryEntry:
    """The public view of an entry row of session ``session_id`` (``message``: its
    message when the caller has it already, else it is parsed from the row;
    ``summary_id``: its summary when its row does not name it, see
    :func:`tiermem._storage.coverage.summary_ids`)."""
    meta = row.meta
    if summary_id is None:
        summary_id = row.summary_id
    return MemoryEntry(
        id=row.id,
        session_id=session_id,
        seq=row.seq,
        type=EntryType(row.type),
        role=row.role,
        content=load_text(row.content),
        timestamp=as_utc(row.timestamp),
        token_count=row.token_count,
        compressed=summary_id is not None,
        summary_id=summary_id,
        metadata={} if meta == "{}" else json.loads(meta),
        pinned=bool(row.pinned),
        message=(
            message
            if message is not None
            else deserialize(stored_message(row.message, row.content), fresh=fresh)
        ),
        retired_at=None if row.retired_at is None else as_utc(row.retired_at),
    )


def read_entries(
    conn: Connection,
    session: SessionRecord,
    *,
    active_only: bool,
    seq_range: tuple[int, int] | None = None,
    compressed_only: bool = False,
    fresh: bool = True,
) -> list[MemoryEntry]:
    """Entries of a session in seq order.

    With ``fresh=False`` entries share their messages with the parse cache: only
    for tiermem's own read-only use (planning a compression), never for callers.
    """
    sid = session.session_id
    if active_only and seq_range is None:  # the hot path: a prebuilt statement
        rows = _driver.fetch_rows(conn, _sql.SELECT_ACTIVE, {"pk_": session.pk})
        return [entry_from_row(sid, EntryRecord(*row), fresh=fresh) for row in rows]
    query = sa.select(entry_table).where(E.session_pk == session.pk).order_by(E.seq)
    if active_only:
        query = query.where(_sql.ACTIVE)
    if compressed_only:
        query = query.where(_sql.COMPRESSED)
    if seq_range is not None:
        query = query.where(E.seq.between(*seq_range))
    records = [EntryRecord(*row) for row in conn.execute(query)]
    if active_only:
        return [entry_from_row(sid, record) for record in records]
    covered = coverage.summary_ids(conn, records)
    return [
        entry_from_row(sid, record, summary_id=summary)
        for record, summary in zip(records, covered, strict=True)
    ]


#: The version of a session that does not exist (see :func:`session_version`).
NO_SESSION_VERSION = "0:0:0"
_MICROSECOND = timedelta(microseconds=1)
_EPOCH = datetime(1, 1, 1, tzinfo=UTC)  # every allowed clock is later: no sign


class MessageWindow(NamedTuple):
    """What ``get_messages`` renders: the top-level summaries and the active messages,
    and the version of the session they show."""

    summaries: list[SummaryText]
    messages: list[WindowEntry]
    version: str = NO_SESSION_VERSION


def session_version(session: SessionRecord, last_seq: int | None = None) -> str:
    """The session's version (at ``last_seq``, by default its last): its row, when it
    was created (SQLite may give a session made anew the row of the one cleared) and
    its last seq, so it changes with every append and when the session is cleared
    and made anew; compression keeps it."""
    created = (as_utc(session.created_at) - _EPOCH) // _MICROSECOND
    seq = session.last_seq if last_seq is None else last_seq
    return f"{session.pk}:{created}:{seq}"


def read_message_window(conn: Connection, session: SessionRecord) -> MessageWindow:
    """The top-level summaries (ids and texts) and the messages of the active entries:
    everything ``get_messages`` shows, in one statement that parses nothing else."""
    summaries: list[SummaryText] = []
    messages: list[WindowEntry] = []
    for kind, _k1, _k2, ref, body, text, tokens, pinned in _driver.fetch_rows(
        conn, _sql.SELECT_MESSAGE_WINDOW, {"pk_": session.pk}
    ):
        if kind == 0:
            summaries.append(SummaryText(ref, load_text(body), tokens))
        else:
            message = deserialize(stored_message(body, text))
            messages.append(WindowEntry(message, tokens, bool(pinned)))
    return MessageWindow(summaries, messages, session_version(session))


def out_of_view_last_id(conn: Connection, project: str, session_id: str, cut: int) -> int | None:
    """The id of a session's newest entry that a context may not show: the newest
    compressed one, or the one at seq ``cut`` (see :func:`left_out_until`) if newer.
    A session's entry ids grow with its seqs (each is inserted under the session's
    lock, in seq order), so no entry out of view has a larger id; ``None`` when no
    entry is out of view."""
    compressed = conn.execute(
        sa.select(S.compressed_seq).where(S.project == project, S.session_id == session_id)
    ).scalar()
    seq = max(int(compressed or 0), cut)
    if not seq:
        return None
    found = conn.execute(
        sa.select(E.id)
        .join(session_table, S.pk == E.session_pk)
        .where(S.project == project, S.session_id == session_id, E.seq == seq)
    ).scalar()
    return None if found is None else int(found)


def left_out_until(conn: Connection, project: str, session_id: str, left_out: int) -> int:
    """The seq of the newest of a session's ``left_out`` oldest active unpinned entries
    (those a context cut to its budget leaves out); 0 when none is."""
    if left_out <= 0:
        return 0
    seq = conn.execute(
        sa.select(E.seq)
        .join(session_table, S.pk == E.session_pk)
        .where(
            S.project == project,
            S.session_id == session_id,
            E.seq > S.compressed_seq,  # unpinned and active: after the compressed prefix
            E.retired_at.is_(None),
            E.summary_id.is_(None),
            sa.not_(E.pinned),
        )
        .order_by(E.seq)
        .offset(left_out - 1)
        .limit(1)
    ).scalar()
    return int(seq or 0)
