"""Full-text search over conversation entries (compressed originals included), and
the PostgreSQL candidates of every full-text search (entries, layer items).

The database finds the rows containing any of the query's words (see
:mod:`tiermem._storage.fts`: stemmed, stopwords left out) and scores each with
BM25 (k1 = 1.2, b = 0.75): on SQLite FTS5's ``bm25()``, whose statistics are
those of the whole index; on PostgreSQL the same formula in Python over which
query words each candidate holds (a term frequency of 1: reading frequencies
from every candidate's ``tsvector`` cost tens of microseconds a row) and its
length, with the document frequencies, size and average length of the
collection searched (the session, the project or the scope's layer). Words
common in the searched session give way to rarer ones (:data:`COMMON_ROWS`).
The candidates are then ranked as every search ranks them
(:mod:`tiermem._storage.ranking`).
"""

from __future__ import annotations

import functools
import heapq
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .._core.clock import as_utc
from ..tiers import DEFAULT_POLICY, TierPolicy
from ..types import SearchHit
from . import _fast as _driver
from . import coverage, fts
from .ranking import BM25_B, BM25_K1, MAX_BONUS, Candidate, bm25, epoch, rank
from .rows import EntryRecord
from .schema import entry_table, session_table
from .store import entry_from_row

__all__ = [
    "PG_ENTRY_PARTS",
    "pg_candidates",
    "pg_entry_scope",
    "pg_word_rows",
    "COMMON_FALLBACK",
    "COMMON_ROWS",
    "SESSION_COMMON_ROWS",
    "entry_candidates",
    "entry_hits",
    "search_entries",
    "session_candidates",
    "session_counts",
]

E, S = entry_table.c, session_table.c

#: A word in more entries of the searched session (PostgreSQL: or scope, or project)
#: than this is common. When a query also has rarer words, they alone select and rank
#: the candidates (as Lucene's ``CommonTermsQuery`` does): a common word adds little
#: to BM25, but scoring every row holding it would make a search's cost grow with
#: the session. A query of common words only ranks the newest entries holding them
#: all (or, if none does, any of them).
COMMON_ROWS = 1000
#: Recall's bound on a word's rows in the session, and so its cost; a question of
#: common words only is scored by its rarest few (:func:`_sqlite_session_candidates`;
#: on PostgreSQL :func:`pg_candidates`, the newest rows holding them).
SESSION_COMMON_ROWS, COMMON_FALLBACK = 250, 3

#: Per word, the ids of the rows holding it (at most ``:n``; with ``{order}``, the
#: newest). The rows' words are never read back: a GIN scan answers which rows hold
#: a word without reading their vectors, and the entries' vector is not stored (an
#: expression index), so reading it would mean computing it, row by row.
_PG_IDS = """array(SELECT {id} FROM {source} \
WHERE {fts} @@ to_tsquery('{config}', :w{i}) AND {where}{order} LIMIT :n)"""

_PG_EVERY = """SELECT {id} FROM {source} \
WHERE {fts} @@ to_tsquery('{config}', :every) AND {where} ORDER BY {id} DESC LIMIT :n"""

#: The chosen rows' columns, by id alone: their ids were chosen under the scope (in the
#: same transaction), and with the scope's conditions here too the planner, on stale
#: statistics, scanned the session and tested each row against a thousand ids.
_PG_ROWS = """\
SELECT {id}, extract(epoch FROM {created}), extract(epoch FROM {accessed}), {length}
FROM {source} WHERE {id} = ANY(:ids) ORDER BY {id} DESC"""


@functools.cache
def _pg_ids(count: int, newest: bool, **parts: str) -> sa.TextClause:
    order = f" ORDER BY {parts['id']} DESC" if newest else ""
    arrays = (_PG_IDS.format(config=fts.PG_CONFIG, i=i, order=order, **parts) for i in range(count))
    return sa.text("SELECT " + ", ".join(arrays))


@functools.cache
def _pg_every(**parts: str) -> sa.TextClause:
    return sa.text(_PG_EVERY.format(config=fts.PG_CONFIG, **parts))


@functools.cache
def _pg_rows(**parts: str) -> sa.TextClause:
    return sa.text(_PG_ROWS.format(**parts))


#: The SQL of an entry's columns in :func:`pg_candidates` (with a ``where`` of its own).
PG_ENTRY_PARTS = {
    "id": "e.id",
    "created": "e.timestamp",
    "accessed": "s.last_accessed",
    "length": "e.token_count",
    "fts": fts.pg_vector(fts.ENTRY_INDEX, "e."),
    "source": "tiermem_entry e JOIN tiermem_session s ON s.pk = e.session_pk",
}


def pg_word_rows(
    count: int, where: str, parts: Mapping[str, str] = PG_ENTRY_PARTS
) -> sa.TextClause:
    """The statement of :func:`pg_candidates` reading, for each of ``count`` words
    (``:w0``, ``:w1``...), the ids of at most ``:n`` rows holding it (of entries, by
    default)."""
    return _pg_ids(count, False, where=where, **parts)


def pg_candidates(
    conn: Connection,
    words: Sequence[str],
    params: dict[str, Any],
    total: int,
    average: float,
    common: int = COMMON_ROWS,
    fallback: int | None = None,
    **parts: str,
) -> list[Candidate]:
    """PostgreSQL: the rows of ``parts["source"]`` matching any of ``words``, scored
    with :func:`bm25` in a collection of ``total`` rows of ``average`` length
    (``parts`` name the SQL of each column; ``fts`` is the row's ``tsvector``, a
    column or the expression of an expression index; ``length`` is a row's length
    in the unit of ``average``); a word in more than ``common`` rows is common, and
    common words are handled as :data:`COMMON_ROWS` says. With ``fallback``, a query
    of common words only uses its ``fallback`` rarest (a session's search, as on
    SQLite: :data:`SESSION_COMMON_ROWS`)."""
    # A prepared statement's generic plan cannot see the words: it would AND a GIN
    # scan of every row holding a common word with the scope. Every transaction of a
    # Database plans with the actual parameters (plan_cache_mode), so these do too.
    bound: dict[str, Any] = {f"w{i}": fts.tsquery_any([word]) for i, word in enumerate(words)}
    arrays = conn.execute(_pg_ids(len(words), False, **parts), {**params, **bound, "n": common + 1})
    held: dict[str, list[int]] = dict(zip(words, arrays.one(), strict=True))
    present = [word for word in words if held[word]]
    if not present:
        return []
    rare = [word for word in present if len(held[word]) <= common]
    if rare:  # each rare word's list is whole
        selected = rare
        members = {word: set(held[word]) for word in rare}
        ids: list[int] = sorted(set().union(*members.values()))
    else:  # common words only: the newest rows holding them all, else any
        if fallback is not None:
            present = sorted(present, key=lambda word: len(held[word]))[:fallback]
        selected = present
        every = " & ".join(fts.tsquery_any([word]) for word in selected)
        ids = list(
            conn.execute(_pg_every(**parts), {**params, "every": every, "n": common}).scalars()
        )
        members = {word: set(ids) for word in selected}
        if not ids:
            # The newest rows holding any word are among each word's newest rows, and
            # a row among them holding a word is among that word's newest: so each
            # word's newest ``common`` rows tell both which rows and which words.
            query = {f"w{i}": fts.tsquery_any([word]) for i, word in enumerate(selected)}
            newest = conn.execute(
                _pg_ids(len(selected), True, **parts), {**params, **query, "n": common}
            ).one()
            members = {word: set(found) for word, found in zip(selected, newest, strict=True)}
            ids = sorted(set().union(*members.values()), reverse=True)[:common]
    rows = conn.execute(_pg_rows(**parts), {"ids": ids}).all()
    frequencies = [{word: 1 for word in selected if row[0] in members[word]} for row in rows]
    scores = bm25(frequencies, [float(row[3] or 0) for row in rows], total, average)
    return [
        Candidate(row[0], float(row[1]), _float(row[2]), score)
        for row, score in zip(rows, scores, strict=True)
    ]


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


_ROWID_MAX = (1 << 63) - 1
#: The most best matches read first (a huge limit must not overflow SQL's LIMIT).
_MAX_CAP = 1 << 31


@functools.cache
def _sqlite_entry_statement(capped: bool) -> sa.TextClause:
    """SQLite: the entries of a project in a rowid range that match ``:q``, with
    FTS5's BM25; capped, the ``:cap`` best only."""
    name = fts.ENTRY_INDEX.name
    cap = f" ORDER BY bm25({name}) LIMIT :cap" if capped else ""
    return sa.text(
        f"WITH m AS MATERIALIZED (SELECT rowid, -bm25({name}) AS score FROM {name} "
        f"WHERE {name} MATCH :q AND rowid BETWEEN :low AND :high{cap}) "
        "SELECT e.id, (julianday(e.timestamp) - 2440587.5) * 86400.0, "
        "(julianday(s.last_accessed) - 2440587.5) * 86400.0, m.score "
        f"FROM m JOIN tiermem_entry AS e ON e.id = (m.rowid & {(1 << 32) - 1}) "
        "JOIN tiermem_session AS s ON s.pk = e.session_pk "
        "WHERE s.project = :project AND e.retired_at IS NULL"
    )


_NAME = fts.ENTRY_INDEX.name
_COUNT = sa.text(
    f"SELECT count(*) FROM (SELECT 1 FROM {_NAME} WHERE {_NAME} MATCH :q "
    "AND rowid BETWEEN :low AND :high LIMIT :n)"
)
_NEWEST = sa.text(
    f"SELECT min(rowid) FROM (SELECT rowid FROM {_NAME} WHERE {_NAME} MATCH :q "
    "AND rowid BETWEEN :low AND :high ORDER BY rowid DESC LIMIT :n)"
)


def _sqlite_selection(
    conn: Connection, words: Sequence[str], low: int, high: int, total: int
) -> tuple[str, int] | None:
    """The FTS5 query and the lowest rowid that select the candidates in a rowid
    range of ``total`` rows (see :data:`COMMON_ROWS`); ``None`` when no row holds
    any word."""
    if total <= COMMON_ROWS:  # no word can be common: nothing to count
        return fts.fts5_any(words), low
    limits = {"low": low, "high": high, "n": COMMON_ROWS + 1}
    counts = {
        word: int(conn.execute(_COUNT, {**limits, "q": fts.fts5_query(word)}).scalar_one())
        for word in words
    }
    present = [word for word in words if counts[word]]
    rare = [word for word in present if counts[word] <= COMMON_ROWS]
    if rare:
        return fts.fts5_any(rare), low
    if not present:
        return None
    for query in (" AND ".join(map(fts.fts5_query, present)), fts.fts5_any(present)):
        start = conn.execute(_NEWEST, {**limits, "q": query, "n": COMMON_ROWS}).scalar()
        if start is not None:
            return query, int(start)
    return None  # pragma: no cover - a word counted present is found by the OR


def _sqlite_entry_candidates(
    conn: Connection,
    project: str,
    words: Sequence[str],
    session_pk: int | None,
    cap: int | None,
    total: int,
    last_id: int | None = None,
) -> list[Candidate]:
    low, high = fts.partition_range(session_pk) if session_pk is not None else (0, _ROWID_MAX)
    if session_pk is not None and last_id is not None:
        high = min(high, low + last_id)
    selection = _sqlite_selection(conn, words, low, high, total)
    if selection is None:
        return []
    query, low = selection
    params = {"project": project, "q": query, "low": low, "high": high, "cap": cap}
    rows = conn.execute(_sqlite_entry_statement(cap is not None), params).all()
    return [Candidate(row[0], row[1], row[2], row[3]) for row in rows]


_IN_RANGE_SQL = f"SELECT rowid FROM {_NAME} WHERE {_NAME} MATCH ? AND rowid BETWEEN ? AND ? LIMIT ?"


def _sqlite_session_candidates(
    conn: Connection,
    words: Sequence[str],
    session_pk: int,
    last_id: int | None,
    total: int,
    average: float,
    cap: int,
) -> list[Candidate]:
    """The best ``cap`` or so of a session's entries matching any of ``words``,
    scored by BM25 over the session's own statistics (a word's documents counted
    within the session, each matching word counted once per entry). FTS5's
    ``bm25()`` counts a word's documents over the whole index, reading every row
    that holds it in any session, a cost that grows with the project; here each
    word costs a read of the session's range only, and only the ``cap`` entries
    with the most informative words are read. Words in more than
    :data:`SESSION_COMMON_ROWS` of the session's entries are left out while rarer
    ones match; a question of common words only is scored by its
    :data:`COMMON_FALLBACK` rarest."""
    low, high = fts.partition_range(session_pk)
    if last_id is not None:
        high = min(high, low + last_id)
    found = {word: _rows_holding(conn, word, low, high) for word in words}
    present = sorted((word for word in words if found[word]), key=lambda w: len(found[w]))
    rare = [word for word in present if len(found[word]) <= SESSION_COMMON_ROWS]
    used = rare or present[:COMMON_FALLBACK]
    population = max(total, 1)
    idf = {
        word: math.log(1 + (population - len(found[word]) + 0.5) / (len(found[word]) + 0.5))
        for word in used
    }
    weight: dict[int, float] = {}
    for word in used:
        for rowid in found[word]:
            entry_id = int(rowid) & ((1 << 32) - 1)
            weight[entry_id] = weight.get(entry_id, 0.0) + idf[word]
    if not weight:
        return []
    best = heapq.nlargest(cap, weight, key=lambda entry_id: (weight[entry_id], entry_id))
    rows = conn.execute(
        sa.select(E.id, E.timestamp, E.token_count, S.last_accessed)
        .join(session_table, S.pk == E.session_pk)
        .where(E.id.in_(best), E.retired_at.is_(None))
    ).all()
    average = average if average > 0 else 1.0
    out = []
    for entry_id, created, length, accessed in rows:
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / average)
        score = weight[entry_id] * (BM25_K1 + 1) / (1 + norm)
        out.append(Candidate(entry_id, epoch(created), epoch(accessed), score))
    return out


def _rows_holding(conn: Connection, word: str, low: int, high: int) -> list[int]:
    """Up to :data:`SESSION_COMMON_ROWS` + 1 rowids of ``word`` between ``low`` and
    ``high``: a dozen such statements a read, so straight to the driver."""
    query = (fts.fts5_query(word), low, high, SESSION_COMMON_ROWS + 1)
    return [row[0] for row in _driver.execute_sql(conn, _IN_RANGE_SQL, query)]


def _exact(candidates: Sequence[Candidate], ranked: Sequence[tuple[Candidate, float]]) -> bool:
    """Whether the ranking of the best ``len(candidates)`` matches is the ranking of
    all matches: no match left out can outscore the last one ranked."""
    if not ranked:
        return False
    floor = min(candidate.relevance for candidate in candidates)
    best = max(candidate.relevance for candidate in candidates) or 1.0
    return ranked[-1][1] > floor / best + MAX_BONUS


def pg_entry_scope(
    project: str, session_pk: int | None, last_id: int | None
) -> tuple[str, dict[str, Any]]:
    """PostgreSQL: the ``where`` of :func:`pg_candidates` for a project's entries, or a
    session's up to ``last_id``, with its parameters."""
    where = "s.project = :project AND e.retired_at IS NULL"
    params: dict[str, Any] = {"project": project}
    if session_pk is not None:
        where += " AND e.session_pk = :session_pk"
        params["session_pk"] = session_pk
    if last_id is not None:
        # Not an index condition ("+ 0"): a session's ids are contiguous, so the
        # planner, taking the session and the id bound as independent, expected a
        # few of its rows where there were hundreds, and chose to compute each one's
        # vector (an entry's is not stored) rather than read the word's rows from
        # the full-text index: 40 ms for one recall instead of 1.
        where += " AND e.id + 0 <= :last_id"
        params["last_id"] = last_id
    return where, params


def entry_candidates(
    conn: Connection,
    project: str,
    words: Sequence[str],
    counts: Sequence[Any],
    session_pk: int | None,
    cap: int | None = None,
    last_id: int | None = None,
    *,
    bounded: bool = False,
) -> list[Candidate]:
    """The entries of ``project`` (or of one session) matching any of ``words`` with
    their BM25; with ``cap``, at least the ``cap`` best (SQLite reads only those
    within a session).

    Args:
        counts: the searched sessions' (pk, entry count, entry tokens).
        last_id: within a session, only its entries up to this id (a session's ids
            grow with its seqs).
        bounded: within a session on PostgreSQL, recall's bounds
            (:data:`SESSION_COMMON_ROWS`, :data:`COMMON_FALLBACK`), which SQLite's
            recall has too: a GIN scan reads every row of a word, so a common
            word's cost would grow with the session, on every turn.
    """
    if session_pk is None:
        last_id = None
    if conn.dialect.name == "postgresql":
        where, params = pg_entry_scope(project, session_pk, last_id)
        total = sum(row[1] for row in counts)
        average = sum(row[2] for row in counts) / max(total, 1)
        local = bounded and session_pk is not None
        return pg_candidates(
            conn,
            words,
            params,
            total,
            average,
            common=SESSION_COMMON_ROWS if local else COMMON_ROWS,
            fallback=COMMON_FALLBACK if local else None,
            where=where,
            **PG_ENTRY_PARTS,
        )
    # Which words are common is told within a session's range only: across a project
    # the index holds other projects' rows, whose words say nothing of this one's.
    total = sum(row[1] for row in counts) if session_pk is not None else 0
    # Across a project the index holds other projects' rows too: a capped read of the
    # best matches could be all theirs, so only a session's range is capped.
    cap = cap if session_pk is not None else None
    return _sqlite_entry_candidates(conn, project, words, session_pk, cap, total, last_id)


def _ranked_entries(
    conn: Connection,
    project: str,
    words: Sequence[str],
    counts: Sequence[Any],
    session_pk: int | None,
    limit: int,
    now: datetime,
    policy: TierPolicy,
    last_id: int | None = None,
    local: bool = False,
    floor: float = 0.0,
) -> list[tuple[Candidate, float]]:
    if local and session_pk is not None:
        cap = min(max(4 * limit, 100), _MAX_CAP)
        found = session_candidates(conn, project, words, counts, session_pk, cap, last_id)
        return rank(found, now, policy, limit, floor=floor)
    if conn.dialect.name == "sqlite" and session_pk is not None:
        # Read the session's best matches first: most searches need no more.
        cap = min(max(4 * limit, 100), _MAX_CAP)
        candidates = entry_candidates(conn, project, words, counts, session_pk, cap, last_id)
        ranked = rank(candidates, now, policy, limit, floor=floor)
        if len(candidates) < cap or _exact(candidates, ranked):
            return ranked
    found = entry_candidates(conn, project, words, counts, session_pk, None, last_id)
    return rank(found, now, policy, limit, floor=floor)


def session_candidates(
    conn: Connection,
    project: str,
    words: Sequence[str],
    counts: Sequence[Any],
    session_pk: int,
    cap: int,
    last_id: int | None,
) -> list[Candidate]:
    """Recall's candidates in one session: its entries matching ``words``, scored by
    BM25 over the session's own statistics on SQLite (at least the ``cap`` best, see
    :func:`_sqlite_session_candidates`), with recall's bounds on PostgreSQL (see
    :func:`entry_candidates`). Recall's lexical and hybrid searches both start here,
    so the words half of a fusion is the ranking recall by words alone makes."""
    if conn.dialect.name == "sqlite":
        entries, tokens = counts[0][1], counts[0][2]
        average = tokens / max(entries, 1)
        return _sqlite_session_candidates(conn, words, session_pk, last_id, entries, average, cap)
    return entry_candidates(conn, project, words, counts, session_pk, None, last_id, bounded=True)


def session_counts(conn: Connection, project: str, session_id: str | None) -> list[Any]:
    """The (pk, entry count, entry tokens) of the sessions searched: ``session_id``'s,
    or every session of ``project``."""
    sessions = sa.select(S.pk, S.entry_count, S.entry_tokens).where(S.project == project)
    if session_id is not None:
        sessions = sessions.where(S.session_id == session_id)
    return list(conn.execute(sessions).all())


def entry_hits(conn: Connection, ranked: Sequence[tuple[Candidate, float]]) -> list[SearchHit]:
    """The entries of a ranking as hits, best first, ties newest first."""
    if not ranked:
        return []
    scores = {candidate.id: score for candidate, score in ranked}
    rows = conn.execute(
        sa.select(S.session_id, entry_table)
        .join(session_table, S.pk == E.session_pk)
        .where(E.id.in_(list(scores)))
    )
    read = [(str(sid), EntryRecord(*columns)) for sid, *columns in rows]
    covered = coverage.summary_ids(conn, [record for _, record in read])
    entries = [
        entry_from_row(sid, record, summary_id=summary)
        for (sid, record), summary in zip(read, covered, strict=True)
    ]
    hits = [SearchHit(entry=entry, score=scores[entry.id]) for entry in entries]
    hits.sort(key=lambda hit: (-hit.score, -hit.entry.id))
    return hits


def search_entries(
    conn: Connection,
    project: str,
    query: str,
    session_id: str | None,
    limit: int,
    *,
    now: datetime | None = None,
    policy: TierPolicy = DEFAULT_POLICY,
    last_id: int | None = None,
    local: bool = False,
    floor: float = 0.0,
) -> list[SearchHit]:
    """Entries of ``project`` (or of one session) containing any word of ``query``,
    compressed originals included, retired ones not (``EntryRow.retired_at``), best first.

    Args:
        now: the memory's clock (recency and tiers); the current time by default.
        policy: the tier thresholds of the tier boost.
        last_id: with ``session_id``, only the session's entries up to this id.
        local: with ``session_id``, recall's candidates (:func:`session_candidates`):
            on SQLite scored by the session's own statistics, at a cost flat in the
            project's size; on PostgreSQL within recall's bounds.
        floor: leave out the entries whose BM25 is under this share of the best
            match's (see :func:`rank`).
    """
    found = fts.query_words(query)
    if not found:
        return []
    counts = session_counts(conn, project, session_id)
    if not counts:
        return []
    session_pk = counts[0][0] if session_id is not None else None
    moment = as_utc(now or datetime.now(UTC))
    ranked = _ranked_entries(
        conn, project, found, counts, session_pk, limit, moment, policy, last_id, local, floor
    )
    return entry_hits(conn, ranked)
