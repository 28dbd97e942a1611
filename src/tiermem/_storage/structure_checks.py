"""The structural pass of the doctor (:mod:`tiermem._storage.checks`): the rules an
import also enforces (:mod:`tiermem._core.structure`), run over each session's
summaries and the structural columns of its entries, read in one ordered pass."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._core.clock import as_utc
from .._core.messages import load_text
from .._core.packing import unpack
from .._core.structure import EntryFacts, SummaryFacts, session_problems, unanswered_calls
from . import coverage
from .schema import entry_table, session_table, summary_table

__all__ = ["structure"]

S, E, M = session_table.c, entry_table.c, summary_table.c

#: Entry types whose stored message the structural pass reads (for its tool calls).
_TOOL_TYPES = ("tool_call", "tool_result")
#: Entry rows fetched at a time by the structural pass.
_BATCH = 2_000


def structure(conn: Connection) -> list[str]:
    """The structural rules an import also enforces (:mod:`tiermem._core.structure`),
    session by session (by row: two projects may both have a session ``chat-1``),
    and ``pending_calls`` against the calls left unanswered."""
    summaries = _summary_rows(conn)
    sessions = conn.execute(
        sa.select(S.pk, S.session_id, S.pending_calls, S.compressed_seq).order_by(S.pk)
    ).all()
    message = sa.case((E.type.in_(_TOOL_TYPES), E.message), else_=sa.null())
    rows = conn.execute(
        sa.select(
            E.session_pk,
            E.seq,
            E.pinned,
            E.summary_id,
            E.timestamp,
            E.type,
            message,
            E.retired_at.is_not(None),
        )
        .order_by(E.session_pk, E.seq)
        .execution_options(yield_per=_BATCH)
    )
    problems: list[str] = []
    try:
        groups = itertools.groupby(rows, key=lambda row: int(row[0]))
        group = next(groups, None)
        for pk, sid, pending, prefix in sessions:
            while group is not None and group[0] < pk:  # entries of no session: see checks
                group = next(groups, None)
            entries = list(group[1]) if group is not None and group[0] == pk else []
            problems += _session_structure(
                sid, pending, int(prefix), summaries.get(pk, []), entries
            )
    finally:
        rows.close()  # entries of no session may be left unread (a server-side cursor)
    return problems


def _summary_rows(conn: Connection) -> dict[int, list[Any]]:
    """Every summary, by session pk, in the order of an export (first seq, level)."""
    summaries: defaultdict[int, list[Any]] = defaultdict(list)
    query = sa.select(
        M.session_pk,
        M.id,
        M.level,
        M.first_seq,
        M.last_seq,
        M.parent_id,
        M.created_at,
        M.content,
        M.token_count,
        M.original_token_count,
    ).order_by(M.session_pk, M.first_seq, M.level, M.id)
    for row in conn.execute(query):
        summaries[row[0]].append(row)
    return summaries


def _summary_of(row: Sequence[Any], ranges: coverage.Ranges) -> int | None:
    """The summary of a structure row (pk, seq, pinned, summary_id, time, type,
    message, retired): the one it names, else the range's for a current unpinned one."""
    if row[3] is not None or row[2] or row[7]:
        return None if row[3] is None else int(row[3])
    return coverage.covering(ranges, row[1])


def _session_structure(
    sid: str,
    pending: str | None,
    prefix: int,
    summary_rows: Sequence[Any],
    entry_rows: Sequence[Any],
) -> list[str]:
    positions = {row[1]: position for position, row in enumerate(summary_rows)}
    nowhere = len(summary_rows)  # the position of a summary not in this session
    level_one = [(row[3], row[4], row[1]) for row in summary_rows if row[2] == 1]
    ranges = (
        prefix,
        [first for first, _, _ in level_one],
        [(last, summary) for _, last, summary in level_one],
    )
    summaries = [
        SummaryFacts(
            level=row[2],
            first_seq=row[3],
            last_seq=row[4],
            parent=None if row[5] is None else positions.get(row[5], nowhere),
            created_at=as_utc(row[6]),
            content=load_text(row[7]),
            tokens=row[8],
            original_tokens=row[9],
        )
        for row in summary_rows
    ]
    entries = [
        EntryFacts(
            row[1],
            bool(row[2]),
            None
            if (summary := _summary_of(row, ranges)) is None
            else positions.get(summary, nowhere),
            as_utc(row[4]),
            *_tool_facts(row[5], row[6]),
            retired=bool(row[7]),
        )
        for row in entry_rows
    ]
    problems = []
    for problem in session_problems(entries, summaries):
        if problem.kind == "entries":
            names = [f"entry seq {entries[position].seq}" for position in problem.where]
        else:
            names = [f"summary {summary_rows[position][1]}" for position in problem.where]
        where = f" {' and '.join(names)}" if names else ""
        problems.append(f"{problem.invariant} session {sid!r}{where}: {problem.message}")
    unanswered = unanswered_calls(entries)
    if json.loads(pending or "{}") != unanswered:
        problems.append(
            f"I5 session {sid!r}: pending_calls {pending} do not match the unanswered "
            f"calls {json.dumps(unanswered, sort_keys=True)}"
        )
    return problems


def _tool_facts(kind: str, raw: str | None) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """The tool calls an entry makes and the call it answers, from its stored JSON
    (a message that does not load is reported by the deep checks)."""
    if raw is None:
        return (), None
    try:
        data = json.loads(unpack(raw))["data"]
        if kind == "tool_call":
            calls = data.get("tool_calls") or []
            # A call without an id is never answered and pairs with nothing.
            return tuple((c["id"], c.get("name") or "") for c in calls if c.get("id")), None
        return (), str(data.get("tool_call_id") or "")
    except (ValueError, KeyError, TypeError, AttributeError):
        return (), None
