"""Prebuilt statements of the hot path (append and read).

Building a SQLAlchemy statement costs more than executing it on SQLite, so the
statements every turn runs are built once here, with bound parameters.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from ..tiers import MemoryTier
from .schema import entry_table, session_table, summary_table

S, E, M = session_table.c, entry_table.c, summary_table.c

#: The session row of (:project, :session_id).
SELECT_SESSION = sa.select(session_table).where(
    S.project == sa.bindparam("project"), S.session_id == sa.bindparam("session_id")
)
#: The same, locked for the transaction (PostgreSQL).
SELECT_SESSION_FOR_UPDATE = SELECT_SESSION.with_for_update()

#: An access at :now, never before the session's ``created_at``: a writer reads its
#: clock before it waits for the row, and another process may create the session
#: meanwhile at a later time of its own clock (the server-clock form is in ``store``).
_ACCESSED = sa.case(
    (sa.bindparam("now", type_=S.last_accessed.type) < S.created_at, S.created_at),
    else_=sa.bindparam("now", type_=S.last_accessed.type),
)

#: Record an access of session :pk at :now. Accesses leave ``memory_tier`` out of
#: their SET clause: SQLite rewrites the entry of every index on a column an UPDATE
#: sets, even to its own value, and almost every access finds the session ACTIVE;
#: :data:`ACTIVATE` wakes the others.
TOUCH = (
    sa.update(session_table)
    .where(S.pk == sa.bindparam("pk_"))
    .values(last_accessed=_ACCESSED, access_count=S.access_count + 1)
)

#: Make session :pk ACTIVE unless it is already (then the row is not written).
ACTIVATE = (
    sa.update(session_table)
    .where(S.pk == sa.bindparam("pk_"), S.memory_tier != sa.bindparam("tier"))
    .values(memory_tier=sa.bindparam("tier"))
)

#: Insert entries, returning their ids in parameter order.
INSERT_ENTRIES = sa.insert(entry_table).returning(E.id, sort_by_parameter_order=True)

#: The ``compressed_seq`` of session :pk (for statements of that session's entries).
COMPRESSED_UP_TO = sa.select(S.compressed_seq).where(S.pk == sa.bindparam("pk_")).scalar_subquery()
#: The ``compressed_seq`` of the session of the entry a statement reads (correlated to
#: the entry table of the statement it is in; an alias, so that a statement joining
#: the session table keeps its own).
_SESSION_OF_ENTRY = session_table.alias("compressed_session")
ENTRY_COMPRESSED_UP_TO = (
    sa.select(_SESSION_OF_ENTRY.c.compressed_seq)
    .where(_SESSION_OF_ENTRY.c.pk == E.session_pk)
    .scalar_subquery()
)

#: Where each session's level-1 summaries end (0 without any), correlated to the
#: session table of the statement it is in: what its ``compressed_seq`` must be.
LEVEL_ONE_END = (
    sa.select(sa.func.coalesce(sa.func.max(M.last_seq), 0))
    .where(M.session_pk == S.pk, M.level == 1)
    .scalar_subquery()
)


def in_prefix(prefix: sa.ColumnElement[Any]) -> sa.ColumnElement[bool]:
    """Whether an entry is current, unpinned and at or before ``prefix`` (its session's
    ``compressed_seq``): one a level-1 summary covers though its row names none (see
    :mod:`tiermem._storage.coverage`)."""
    return sa.and_(E.pinned.is_(False), E.retired_at.is_(None), E.seq <= prefix)


#: Whether an entry is compressed: its row names its summary (a retired entry, or
#: one imported or stored before migration 0025), or its session's prefix covers it.
COMPRESSED = sa.or_(E.summary_id.is_not(None), in_prefix(ENTRY_COMPRESSED_UP_TO))
#: Whether an entry is active: current (not retired) and not compressed.
ACTIVE = sa.and_(
    E.retired_at.is_(None),
    E.summary_id.is_(None),
    sa.or_(E.pinned.is_(True), E.seq > ENTRY_COMPRESSED_UP_TO),
)

#: The active entries of session :pk, in two parts that each read an index range:
#: the unpinned ones after its compressed prefix (the unique (session, seq) index),
#: and the pinned ones (the partial index of pinned entries; a pinned entry is never
#: compressed). One condition with OR would read every entry of the session.
_ACTIVE_AFTER = sa.and_(
    E.session_pk == sa.bindparam("pk_"),
    E.seq > COMPRESSED_UP_TO,
    E.retired_at.is_(None),
    E.summary_id.is_(None),
    E.pinned.is_(False),
)
_ACTIVE_PINNED = sa.and_(
    E.session_pk == sa.bindparam("pk_"),
    E.pinned == sa.true(),
    E.retired_at.is_(None),
    E.summary_id.is_(None),
)

#: Active entries of session :pk in seq order.
SELECT_ACTIVE = sa.union_all(
    sa.select(entry_table).where(_ACTIVE_AFTER),
    sa.select(entry_table).where(_ACTIVE_PINNED),
).order_by(sa.literal_column("seq"))


def _window_entries(where: sa.ColumnElement[bool]) -> sa.Select[Any]:
    return sa.select(
        sa.literal_column("1"),
        E.seq,
        sa.literal_column("0"),
        E.id,
        E.message,
        E.content,
        E.token_count,
        sa.cast(E.pinned, sa.Integer),
    ).where(where)


#: All ``get_messages`` reads of session :pk, in one statement: the top-level
#: summaries (kind 0: id and text, oldest first) and the stored messages of the
#: active entries with their text (kind 1, in seq order; see
#: :func:`tiermem._core.messages.stored_message`), interleaved by seq (the reader tells them
#: apart by kind). Ordered by the first seq alone: top-level summaries cover disjoint
#: seqs (so no two share one, and none an active entry's), and SQLite then merges
#: the parts, each read in the order of its index, instead of sorting every message
#: body anew each turn (ordering by kind or level too makes it sort them).
SELECT_MESSAGE_WINDOW = sa.union_all(
    sa.select(
        sa.literal_column("0").label("kind"),
        M.first_seq.label("k1"),
        M.level.label("k2"),
        M.id.label("ref"),
        M.content.label("body"),
        sa.cast(sa.null(), sa.Text).label("text"),
        M.token_count.label("tokens"),
        sa.literal_column("0").label("pinned"),
    ).where(M.session_pk == sa.bindparam("pk_"), M.parent_id.is_(None)),
    _window_entries(_ACTIVE_AFTER),
    _window_entries(_ACTIVE_PINNED),
).order_by(sa.literal_column("k1"))

#: Tokens of the current pinned entries of session :pk.
SELECT_PINNED_TOKENS = sa.select(sa.func.coalesce(sa.func.sum(E.token_count), 0)).where(
    E.session_pk == sa.bindparam("pk_"), E.pinned.is_(True), E.retired_at.is_(None)
)

#: Ids and seqs of the compressed entries :first..:last of session :pk, in seq order.
SELECT_COVERED = (
    sa.select(E.id, E.seq)
    .where(
        E.session_pk == sa.bindparam("pk_"),
        E.seq.between(sa.bindparam("first"), sa.bindparam("last")),
        sa.or_(E.summary_id.is_not(None), in_prefix(COMPRESSED_UP_TO)),
    )
    .order_by(E.seq)
)

#: Top-level summaries of session :pk, oldest first.
SELECT_TOP_SUMMARIES = (
    sa.select(summary_table)
    .where(M.session_pk == sa.bindparam("pk_"), M.parent_id.is_(None))
    .order_by(M.first_seq, M.level)
)

_ACCESS = {"last_accessed": _ACCESSED, "access_count": S.access_count + 1}
# UPDATE statements may not bind parameters named like columns.
_BY_ID = (S.project == sa.bindparam("b_project"), S.session_id == sa.bindparam("b_session_id"))

#: Record an access of (:project, :session_id) and return the row (locks it on PostgreSQL).
TOUCH_RETURNING = sa.update(session_table).where(*_BY_ID).values(**_ACCESS).returning(session_table)

#: PostgreSQL: :data:`TOUCH_RETURNING`, also letting the transaction commit without
#: waiting for the disk when the session is ACTIVE, in the same round trip: such an
#: access writes nothing but its record (see ``database.commit_without_waiting``); one
#: that wakes a session keeps the configured commit, since it writes an event. The
#: setting comes back as an extra column, :data:`COMMIT_MODE`.
COMMIT_MODE = "tiermem_commit_mode"
TOUCH_RETURNING_RELAXED = TOUCH_RETURNING.returning(
    sa.func.set_config(
        "synchronous_commit",
        sa.case(
            (S.memory_tier == MemoryTier.ACTIVE.value, "off"),
            else_=sa.func.current_setting("synchronous_commit"),
        ),
        True,
    ).label(COMMIT_MODE)
)


def _counted(n: sa.ColumnElement[int], tokens: sa.ColumnElement[int]) -> dict[str, Any]:
    """The counters of a session that ``n`` more entries of ``tokens`` tokens change."""
    return {
        "last_seq": S.last_seq + n,
        "entry_count": S.entry_count + n,
        "entry_tokens": S.entry_tokens + tokens,
        "active_count": S.active_count + n,
        "active_tokens": S.active_tokens + tokens,
    }


#: Allocate :n seqs, add :n entries of :tokens tokens to the counters, record the
#: access, and return the updated row: one statement per append.
RESERVE = (
    sa.update(session_table)
    .where(*_BY_ID)
    .values(**_counted(sa.bindparam("n"), sa.bindparam("tokens")), **_ACCESS)
    .returning(session_table)
)

#: Give back :n seqs and :tokens tokens that :data:`RESERVE` counted for entries of
#: session :pk that were not appended after all; returns the row.
RELEASE = (
    sa.update(session_table)
    .where(S.pk == sa.bindparam("pk_"))
    .values(**_counted(-sa.bindparam("n"), -sa.bindparam("tokens")))
    .returning(session_table)
)


def ids_type(
    dialect: str, item: sa.types.TypeEngine[Any] | None = None
) -> sa.types.TypeEngine[Any]:
    """The type of a parameter holding many ids (integers, or ``item``): an array on
    PostgreSQL, a JSON array (text) on SQLite."""
    if dialect == "postgresql":
        return postgresql.ARRAY(item if item is not None else sa.Integer())
    return sa.Text()


def ids_value(dialect: str, ids: Sequence[Any]) -> Any:
    """``ids`` as a parameter of :func:`ids_type` takes them."""
    return list(ids) if dialect == "postgresql" else json.dumps(list(ids))


def in_ids(
    dialect: str, column: sa.ColumnElement[Any], ids: sa.BindParameter[Any]
) -> sa.ColumnElement[bool]:
    """``column IN ids``, ``ids`` one parameter of :func:`ids_type`, however many ids
    it holds: expanding thousands of placeholders per statement would cost more than
    the statement, and a prebuilt statement keeps one parameter."""
    if dialect == "postgresql":
        return column == sa.any_(ids)
    values = sa.func.json_each(ids).table_valued("value")
    return column.in_(sa.select(values.c.value))


@functools.cache
def select_known_entries(dialect: str) -> sa.Select[Any]:
    """Seq and message id of the entries of session :pk whose message id is among
    :ids (as stored, one parameter: :func:`ids_value`) or whose seq is :seq: what an
    append checks under the session's lock (resent messages, and whether the
    session's newest message is still the one its caller expects)."""
    ids = sa.bindparam("ids", type_=ids_type(dialect, sa.Text()))
    return sa.select(E.seq, E.message_id).where(
        E.session_pk == sa.bindparam("pk_"),
        sa.or_(E.seq == sa.bindparam("seq"), in_ids(dialect, E.message_id, ids)),
    )


#: Replace the pending tool calls of session :pk.
SET_PENDING = (
    sa.update(session_table)
    .where(S.pk == sa.bindparam("pk_"))
    .values(pending_calls=sa.bindparam("pending"))
)

#: Take the compression claim of session :pk.
CLAIM = (
    sa.update(session_table)
    .where(S.pk == sa.bindparam("pk_"))
    .values(claim_token=sa.bindparam("token"), claim_expires_at=sa.bindparam("expires"))
)

#: Insert summary rows (all columns as parameters), returning their ids in parameter order.
INSERT_SUMMARY = sa.insert(summary_table).returning(M.id, sort_by_parameter_order=True)

#: Make summary :child a child of summary :parent (run as an executemany).
SET_PARENT = (
    sa.update(summary_table)
    .where(M.id == sa.bindparam("child"))
    .values(parent_id=sa.bindparam("parent"))
)

#: How many entries a compression up to seq :last of session :pk covers: its
#: unpinned active entries up to :last (retired ones stay out, as pinned ones do).
COUNT_COVERED = sa.select(sa.func.count()).where(
    E.session_pk == sa.bindparam("pk_"),
    E.seq > COMPRESSED_UP_TO,
    E.seq <= sa.bindparam("last"),
    E.pinned.is_(False),
    E.retired_at.is_(None),
    E.summary_id.is_(None),
)

#: Drop the claim after a successful compression and store the new counters.
FINISH_CLAIM = (
    sa.update(session_table)
    .where(S.pk == sa.bindparam("pk_"))
    .values(
        claim_token=None,
        claim_expires_at=None,
        failures=0,
        backoff_until=None,
        active_count=sa.bindparam("active_count"),
        active_tokens=sa.bindparam("active_tokens"),
        summary_count=sa.bindparam("summary_count"),
        summary_tokens=sa.bindparam("summary_tokens"),
        compressed_seq=sa.bindparam("compressed_seq"),
    )
)
