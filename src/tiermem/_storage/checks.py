"""The storage invariants as read-only checks (see :mod:`tiermem.doctor`)."""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from .._core.clock import as_utc
from .._core.messages import classify, deserialize, load_text, render_text, stored_message
from .._core.shape import provider_shape_problems
from ..tiers import MemoryTier, TierPolicy, calculate_tier
from . import statements as _sql
from . import structure_checks
from .database import translate_error
from .rows import SessionRecord
from .schema import entry_table, session_table, summary_table
from .tables import TABLES

__all__ = ["find_violations"]

S, E, M = session_table.c, entry_table.c, summary_table.c

_TIER_AGE = {MemoryTier.ACTIVE: 0, MemoryTier.RECENT: 1, MemoryTier.ARCHIVED: 2}


def find_violations(
    engine: Engine | Connection,
    *,
    now: datetime | None = None,
    deep: bool = True,
    application_name: str | None = None,
    claim_ttl: float | None = None,
    policy: TierPolicy | None = None,
) -> list[str]:
    """Check every invariant on a live database; returns the problems found.

    Args:
        engine: the database (tiermem's tables in its default schema), or an open
            connection (checked inside its current transaction, which is left open).
        now: the current time; enables the checks against the future.
        deep: also deserialize every entry and recount every token (I4, I5, I7).
        application_name: on PostgreSQL, also report advisory locks and open
            transactions of backends with this name (I9; call after workers exit).
        claim_ttl: with ``now``, report claims that expire later than ``now + claim_ttl``.
        policy: with ``now``, report stored tiers older than ``last_accessed`` implies.

    Raises:
        StorageError: (a subclass) when the database fails, given an engine.
    """

    def run(conn: Connection) -> list[str]:
        return _violations(
            conn,
            now=now,
            deep=deep,
            application_name=application_name,
            claim_ttl=claim_ttl,
            policy=policy,
        )

    if isinstance(engine, Connection):
        return run(engine)
    # One snapshot for every check, without a write lock: a read transaction (plain
    # BEGIN on SQLite, whose WAL keeps the snapshot of its first read), REPEATABLE READ
    # on PostgreSQL (where READ COMMITTED would show each statement a different state).
    try:
        with engine.connect().execution_options(tiermem_read=True) as conn:
            try:
                if conn.dialect.name == "postgresql":
                    conn.exec_driver_sql(
                        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY"
                    )
                return run(conn)
            finally:
                conn.rollback()
    except sa.exc.SQLAlchemyError as error:
        raise translate_error(error) from error


def _violations(
    conn: Connection,
    *,
    now: datetime | None,
    deep: bool,
    application_name: str | None,
    claim_ttl: float | None,
    policy: TierPolicy | None,
) -> list[str]:
    present = _table_names(conn)
    if session_table.name not in present:
        return []
    statement, messages = _row_checks(present)
    far = datetime(9999, 1, 1, tzinfo=UTC)
    limits = {
        "future_limit": far if now is None else now + timedelta(minutes=5),
        "lease_limit": far if now is None or claim_ttl is None else now + _lease(claim_ttl),
    }
    rows = sorted(tuple(row) for row in conn.execute(statement, limits))
    problems = [messages[row[0]].format(*row[1:]) for row in rows]
    problems += _counters(conn)
    problems += _sequences(conn)
    problems += structure_checks.structure(conn)
    problems += _tiers(conn, now, policy)
    if deep:
        problems += _deep(conn)
    problems += _storage(conn, application_name)
    return problems


#: A row check: every row the query returns is one problem, ``message.format(*row)``.
Check = tuple[sa.Select[Any], str]


def _table_names(conn: Connection) -> frozenset[str]:
    """The tables of the connection's default schema (cheaper than reflection)."""
    if conn.dialect.name == "postgresql":
        query = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
    else:
        query = "SELECT name FROM sqlite_master WHERE type = 'table'"
    return frozenset(str(name) for name in conn.exec_driver_sql(query).scalars())


def _lease(claim_ttl: float) -> timedelta:
    return timedelta(seconds=claim_ttl + 1)


@functools.lru_cache(maxsize=16)
def _row_checks(present: frozenset[str]) -> tuple[sa.CompoundSelect[Any], tuple[str, ...]]:
    """Every row check as one ``UNION ALL`` statement (built once per set of tables),
    and the message of each; ``:future_limit`` and ``:lease_limit`` are parameters."""
    checks: list[Check] = []
    _orphans(present, checks)
    _summaries(checks)
    _session_rows(checks)
    width = max(len(query.selected_columns) for query, _ in checks)
    members = []
    for number, (query, _) in enumerate(checks):
        columns = [sa.cast(column, sa.String) for column in query.selected_columns]
        columns += [sa.cast(sa.null(), sa.String)] * (width - len(columns))
        members.append(
            query.with_only_columns(
                sa.literal(number, sa.Integer), *columns, maintain_column_froms=True
            )
        )
    return sa.union_all(*members), tuple(message for _, message in checks)


def _orphans(present: frozenset[str], checks: list[Check]) -> None:
    """Rows of any tiermem table pointing at a session or summary that does not exist."""
    for table in TABLES:
        if table.name not in present:
            continue
        for fk in table.foreign_keys:
            target = fk.column
            if target.table.name not in present:
                continue
            label = f"{target.table.name}.{target.name}"
            if target.table is table:  # self-reference (summary.parent_id): compare to others
                target = table.alias().c[target.name]
            missing = ~sa.exists().where(target == fk.parent)
            query = sa.select(fk.parent).where(fk.parent.is_not(None), missing)
            checks.append((query, f"I2 a row of {table.name} points at the missing {label} {{0}}"))


def _counters(conn: Connection) -> list[str]:
    active = _sql.ACTIVE
    entries = (
        sa.select(
            E.session_pk.label("pk"),
            sa.func.count().label("n"),
            sa.func.coalesce(sa.func.sum(E.token_count), 0).label("tokens"),
            sa.func.sum(sa.case((active, 1), else_=0)).label("active_n"),
            sa.func.coalesce(sa.func.sum(sa.case((active, E.token_count), else_=0)), 0).label(
                "active_t"
            ),
        )
        .group_by(E.session_pk)
        .subquery()
    )
    tops = (
        sa.select(
            M.session_pk.label("pk"),
            sa.func.count().label("n"),
            sa.func.coalesce(sa.func.sum(M.token_count), 0).label("tokens"),
        )
        .where(M.parent_id.is_(None))
        .group_by(M.session_pk)
        .subquery()
    )
    query = (
        sa.select(
            S.session_id,
            S.entry_count,
            S.entry_tokens,
            S.active_count,
            S.active_tokens,
            S.summary_count,
            S.summary_tokens,
            sa.func.coalesce(entries.c.n, 0),
            sa.func.coalesce(entries.c.tokens, 0),
            sa.func.coalesce(entries.c.active_n, 0),
            sa.func.coalesce(entries.c.active_t, 0),
            sa.func.coalesce(tops.c.n, 0),
            sa.func.coalesce(tops.c.tokens, 0),
        )
        .outerjoin(entries, entries.c.pk == S.pk)
        .outerjoin(tops, tops.c.pk == S.pk)
    )
    problems = []
    for row in conn.execute(query):
        stored, actual = tuple(row[1:7]), tuple(int(v) for v in row[7:13])
        if stored != actual:
            problems.append(f"I4 session {row[0]!r}: counters {stored} != actual {actual}")
        if min(stored) < 0:
            problems.append(f"I4 session {row[0]!r}: negative counter")
    return problems


def _sequences(conn: Connection) -> list[str]:
    query = (
        sa.select(
            S.session_id,
            S.last_seq,
            sa.func.count(E.id),
            sa.func.count(sa.distinct(E.seq)),
            sa.func.min(E.seq),
            sa.func.max(E.seq),
        )
        .outerjoin(entry_table, E.session_pk == S.pk)
        .group_by(S.pk, S.session_id, S.last_seq)
    )
    problems = []
    for sid, last_seq, count, distinct, low, high in conn.execute(query):
        if count and (low != 1 or high != count or distinct != count or last_seq != count):
            problems.append(
                f"I3 session {sid!r}: seqs {low}..{high} for {count} entries "
                f"({distinct} distinct), last_seq {last_seq}"
            )
        if not count and last_seq != 0:
            problems.append(f"I3 session {sid!r}: last_seq {last_seq} without entries")
    return problems


def _summaries(checks: list[Check]) -> None:
    """The recorded entry counts of summaries (the structure itself is checked by
    :func:`_structure`)."""
    # The entries a level-1 summary covers: the unpinned ones of its range that are
    # current and within the compressed prefix, or that name it (see coverage).
    current = sa.and_(E.summary_id.is_(None), _sql.in_prefix(_sql.ENTRY_COMPRESSED_UP_TO))
    linked = (
        sa.select(sa.func.count(E.id))
        .where(
            E.session_pk == M.session_pk,
            E.seq.between(M.first_seq, M.last_seq),
            E.pinned.is_(False),
            sa.or_(E.summary_id == M.id, current),
        )
        .scalar_subquery()
    )
    checks.append(
        (
            sa.select(M.id, M.entry_count, linked).where(M.level == 1, M.entry_count != linked),
            "I2 summary {0} records {1} entries but links {2}",
        )
    )
    # Compression moves a session's compressed_seq to the end of its summary's range.
    ends = _sql.LEVEL_ONE_END
    checks.append(
        (
            sa.select(S.session_id, S.compressed_seq, ends).where(S.compressed_seq != ends),
            "I2 session {0!r}: compressed_seq {1}, but its summaries end at seq {2}",
        )
    )
    # A merged summary records the entries of its children (a merge reads no entry ids).
    child = summary_table.alias("child")
    children = (
        sa.select(sa.func.coalesce(sa.func.sum(child.c.entry_count), 0))
        .where(child.c.parent_id == M.id)
        .scalar_subquery()
    )
    checks.append(
        (
            sa.select(M.id, M.entry_count, children).where(M.level > 1, M.entry_count != children),
            "I2 merged summary {0} records {1} entries but its children hold {2}",
        )
    )


def _session_rows(checks: list[Check]) -> None:
    tiers = [tier.value for tier in MemoryTier]
    stamp = S.last_accessed.type
    checks.append(
        (
            sa.select(E.id, E.token_count).where(E.token_count < 0),
            "I4 entry {0} has a negative token count {1}",
        )
    )
    checks.append(
        (
            sa.select(M.id, M.token_count).where(M.token_count < 0),
            "I4 summary {0} has a negative token count {1}",
        )
    )
    checks.append(
        (
            sa.select(S.session_id, S.memory_tier).where(S.memory_tier.not_in(tiers)),
            "I11 session {0!r} has unknown tier {1!r}",
        )
    )
    checks.append(
        (
            sa.select(S.session_id).where(S.last_accessed < S.created_at),
            "I8 session {0!r} accessed before it was created",
        )
    )
    checks.append(
        (
            sa.select(S.session_id).where(
                sa.or_(
                    sa.and_(S.claim_token.is_(None), S.claim_expires_at.is_not(None)),
                    sa.and_(S.claim_token.is_not(None), S.claim_expires_at.is_(None)),
                )
            ),
            "I12 session {0!r} has a half-recorded compression claim",
        )
    )
    checks.append(
        (
            sa.select(S.session_id).where(sa.func.coalesce(S.encoding, "") == ""),
            "I4 session {0!r} records no token encoding",
        )
    )
    checks.append(
        (
            sa.select(S.session_id).where(
                S.last_accessed > sa.bindparam("future_limit", type_=stamp)
            ),
            "I8 session {0!r} accessed in the future",
        )
    )
    checks.append(
        (
            sa.select(S.session_id).where(
                S.claim_expires_at > sa.bindparam("lease_limit", type_=stamp)
            ),
            "I12 session {0!r} holds a claim that outlives its lease",
        )
    )


def _tiers(conn: Connection, now: datetime | None, policy: TierPolicy | None) -> list[str]:
    """With ``now`` and ``policy``: stored tiers never older than the last access says."""
    if now is None or policy is None:
        return []
    problems = []
    tiers = [tier.value for tier in MemoryTier]
    for sid, tier, accessed in conn.execute(
        sa.select(S.session_id, S.memory_tier, S.last_accessed).where(S.memory_tier.in_(tiers))
    ):
        stored = MemoryTier(tier)
        actual = calculate_tier(as_utc(accessed), now, policy)
        if _TIER_AGE.get(stored, 3) > _TIER_AGE.get(actual, 3):
            problems.append(
                f"I11 session {sid!r} is stored {stored.value} but was accessed "
                f"{accessed.isoformat()} ({actual.value})"
            )
    return problems


def _deep(conn: Connection) -> list[str]:
    """I4 recount, I7 message columns and I5 provider shape, session by session."""
    from .._core.render import render_messages
    from ..tokens import TokenCounter
    from . import store

    problems: list[str] = []
    counters: dict[str, TokenCounter | None] = {}
    query = sa.select(session_table).order_by(S.pk)
    sessions = [SessionRecord.from_row(row) for row in conn.execute(query).mappings()]
    for session in sessions:
        sid, name = session.session_id, session.encoding
        if name not in counters:
            try:
                counters[name] = TokenCounter(encoding=name)
            except Exception as exc:  # an unknown encoding is itself the finding
                counters[name] = None
                problems.append(f"I4 session {sid!r}: encoding {name!r} cannot be loaded: {exc}")
        counter = counters[name]
        problems += _deep_entries(conn, session, counter)
        if counter is not None:
            for summary_id, content, tokens in conn.execute(
                sa.select(M.id, M.content, M.token_count).where(M.session_pk == session.pk)
            ):
                recount = counter.count_text(load_text(content))
                if recount != tokens:
                    problems.append(
                        f"I4 summary {summary_id} of {sid!r} stores {tokens} tokens, "
                        f"recounted {recount}"
                    )
        try:
            rendered = render_messages(*store.read_message_window(conn, session)[:2])
        except Exception as exc:  # a row that cannot be read back is reported, not raised
            problems.append(f"I7 session {sid!r}: context cannot be rendered: {exc!r}")
            continue
        # Calls still waiting for their results are the application's business (I5
        # checks elsewhere that they are recorded as pending and never compressed).
        pending = set(json.loads(session.pending_calls or "{}"))
        for provider in ("openai", "anthropic"):
            # A call id may come back once its call was answered (models that number
            # their calls per turn do; the store accepts it).
            found = provider_shape_problems(rendered, provider, pending=pending, unique_ids=False)
            problems += [f"I5 session {sid!r} ({provider}): {problem}" for problem in found]
    return problems


def _deep_entries(conn: Connection, session: SessionRecord, counter: object) -> list[str]:
    from ..tokens import TokenCounter

    problems: list[str] = []
    sid = session.session_id
    query = (
        sa.select(E.seq, E.type, E.role, E.content, E.message, E.message_id, E.token_count)
        .where(E.session_pk == session.pk)
        .order_by(E.seq)
    )
    for seq, kind, role, content, raw, message_id, tokens in conn.execute(query):
        where = f"session {sid!r} seq {seq}"
        try:
            message = deserialize(stored_message(raw, content))
        except Exception as exc:  # corrupt JSON or an unknown message type
            problems.append(f"I7 {where}: stored message does not load: {exc!r}")
            continue
        expected_kind, expected_role = classify(message)
        if role != expected_role or (kind != "context" and kind != expected_kind.value):
            problems.append(
                f"I7 {where}: stored as {kind}/{role}, message is "
                f"{expected_kind.value}/{expected_role}"
            )
        stored_id = None if message_id is None else load_text(message_id)
        if stored_id != message.id:
            problems.append(f"I7 {where}: message_id {stored_id!r} != {message.id!r}")
        if load_text(content) != render_text(message):
            problems.append(f"I7 {where}: content column differs from the message text")
        if isinstance(counter, TokenCounter) and counter.count_message(message) != tokens:
            problems.append(
                f"I4 {where}: stores {tokens} tokens, recounted {counter.count_message(message)}"
            )
    return problems


def _storage(conn: Connection, application_name: str | None) -> list[str]:
    if conn.dialect.name != "sqlite":
        return _pg_leaks(conn, application_name) if application_name else []
    problems = []
    integrity = conn.exec_driver_sql("PRAGMA integrity_check").scalar()
    if integrity != "ok":
        problems.append(f"I9 integrity_check: {integrity}")
    if conn.exec_driver_sql("PRAGMA foreign_key_check").first() is not None:
        problems.append("I9 foreign_key_check reports violations")
    mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    if mode not in ("wal", "memory"):
        problems.append(f"I9 journal_mode is {mode}, not wal")
    return problems


def _pg_leaks(conn: Connection, application_name: str) -> list[str]:
    params = {"app": application_name}
    advisory = conn.execute(
        sa.text(
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
            "WHERE l.locktype = 'advisory' AND a.application_name = :app"
        ),
        params,
    ).scalar_one()
    problems = [f"I9 {advisory} advisory lock(s) held by {application_name!r}"] if advisory else []
    idle = conn.execute(
        sa.text(
            "SELECT pid, state FROM pg_stat_activity WHERE application_name = :app "
            "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'"
        ),
        params,
    )
    problems += [f"I9 backend {pid} of {application_name!r} left {state!r}" for pid, state in idle]
    return problems
