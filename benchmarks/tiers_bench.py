"""Tier maintenance at scale: recalculation, statistics and pruning over 1,000,000 sessions.

Bulk-loads sessions straight into the tables (multi-row inserts on SQLite,
``COPY`` on PostgreSQL; no API calls): access times grow with the pk as
sessions are created over time, the first 100,000 sessions expired (31-90 days)
with 10 entries each, every fifth of them compressed (one summary over five
entries), the stored tiers those of yesterday's recalculation. Then it times:

* ``get_tier_stats`` over the 1,000,000 sessions;
* ``recalculate_tiers`` as a daily job, an hourly job, and an hourly job with
  a ``tier_changed`` listener (session ids read back with ``RETURNING``);
* ``least_recently_used``, ``prune_expired`` (dry run, the real one, again);
* ``recalculate_tiers`` in the worst case, every stored tier stale (reported,
  not held to a target: it rewrites every row).

Each step reports wall time and the growth of peak RSS while it ran (``VmHWM``
is reset before each step), so loading all rows would show.

Targets: ``get_tier_stats`` and ``recalculate_tiers`` under 5 s at 1,000,000
sessions; ``prune_expired`` of the 100,000 expired sessions with their 1,000,000
entries under 20 s; memory flat.

Usage::

    .venv/bin/python benchmarks/tiers_bench.py                  # both backends
    .venv/bin/python benchmarks/tiers_bench.py --backend sqlite --sessions 100000

Results go to ``benchmarks/results/tiers_bench.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem import ConversationMemory, MemoryConfig, calculate_tier
from tiermem._storage import fts
from tiermem.testing import ManualClock

PG_URL = os.environ.get(
    "TIERMEM_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
PROJECT = "bench"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
#: Seconds each measured step must stay under (the others are reported only).
TARGETS = {
    "get_tier_stats": 5.0,
    "get_tier_stats (after pruning)": 5.0,
    "recalculate_tiers (daily run)": 5.0,
    "recalculate_tiers (hourly run)": 5.0,
    "recalculate_tiers (hourly, with listener)": 5.0,
    "prune_expired": 20.0,
}
SESSION_COLUMNS = (
    "project, session_id, created_at, last_accessed, access_count, memory_tier, last_seq, "
    "entry_count, entry_tokens, active_count, active_tokens, summary_count, summary_tokens, "
    "encoding, pending_calls, failures"
)
ENTRY_COLUMNS = (
    "session_pk, seq, type, role, content, message, message_id, timestamp, token_count, "
    "pinned, meta, summary_id"
)
ENTRY_TOKENS = 12


# --------------------------------------------------------------------------- memory


def rss_kib() -> int:
    """Current resident set size (KiB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def peak_kib() -> int:
    """Peak resident set size since the last :func:`reset_peak` (KiB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def reset_peak() -> None:
    """Reset the kernel's peak-RSS mark (Linux: write 5 to clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:  # not Linux: the peak then covers the whole run
        pass


def measure(name: str, call: Callable[[], Any], results: dict[str, Any]) -> Any:
    """Run ``call`` once, recording seconds and peak-RSS growth under ``name``."""
    reset_peak()
    base = rss_kib()
    start = time.perf_counter()
    value = call()
    seconds = time.perf_counter() - start
    growth = max(peak_kib() - base, 0) / 1024
    results[name] = {"seconds": round(seconds, 3), "peak_rss_growth_mib": round(growth, 1)}
    if isinstance(value, int):
        results[name]["result"] = value
    target = TARGETS.get(name)
    verdict = "" if target is None else (" ok" if seconds < target else f" MISSED (<{target}s)")
    print(f"  {name:<46} {seconds:8.2f} s  +{growth:7.1f} MiB peak  -> {value!r}{verdict}")
    return value


# --------------------------------------------------------------------------- loading

#: Every this-many-th expired session was compressed: one summary over seqs 1-5.
SUMMARY_EVERY = 5
SUMMARY_COLUMNS = (
    "id, session_pk, content, level, first_seq, last_seq, entry_count, token_count, "
    "original_token_count, created_at, start_time, end_time"
)


def last_access(index: int, sessions: int, expired: int, rng: random.Random) -> datetime:
    """Access times grow with the pk, as sessions are created over time: the first
    ``expired`` were last accessed 90 to 31 days ago, the others in the last 30 days."""
    if index < expired:
        return NOW - timedelta(days=90) + timedelta(days=59) * ((index + rng.random()) / expired)
    fresh = sessions - expired
    return (
        NOW - timedelta(days=30) + timedelta(days=30) * ((index - expired + rng.random()) / fresh)
    )


def session_rows(sessions: int, expired: int, entries: int, seed: int) -> Iterator[tuple[Any, ...]]:
    """Session rows (pk = index + 1) with consistent counters; the stored tiers are
    those of yesterday's recalculation, as under a daily maintenance job."""
    rng = random.Random(seed)
    yesterday = NOW - timedelta(days=1)
    for index in range(sessions):
        accessed = last_access(index, sessions, expired, rng)
        count = entries if index < expired else 0
        compressed = 5 if index < expired and index % SUMMARY_EVERY == 0 else 0
        yield (
            PROJECT,
            f"session-{index:07d}",
            accessed,
            accessed,
            1 + count,
            calculate_tier(accessed, yesterday).value,
            count,
            count,
            count * ENTRY_TOKENS,
            count - compressed,
            (count - compressed) * ENTRY_TOKENS,
            1 if compressed else 0,
            3 if compressed else 0,
            "cl100k_base",
            "{}",
            0,
        )


def summary_rows(expired: int) -> Iterator[tuple[Any, ...]]:
    """One summary (of seqs 1-5) for every SUMMARY_EVERY-th expired session."""
    for index in range(0, expired, SUMMARY_EVERY):
        summary_id = index // SUMMARY_EVERY + 1
        yield (summary_id, index + 1, "summary", 1, 1, 5, 5, 3, 5 * ENTRY_TOKENS, NOW, NOW, NOW)


def entry_rows(expired: int, entries: int) -> Iterator[tuple[Any, ...]]:
    """``entries`` user messages for each expired session, seqs 1-5 of every
    SUMMARY_EVERY-th linked to its summary."""
    for index in range(expired):
        summarized = index % SUMMARY_EVERY == 0
        for seq in range(1, entries + 1):
            text = f"message {seq} of session {index + 1}: the tide tables for next week"
            message = json.dumps({"type": "human", "data": {"content": text, "type": "human"}})
            summary_id = index // SUMMARY_EVERY + 1 if summarized and seq <= 5 else None
            yield (
                index + 1,
                seq,
                "message",
                "user",
                text,
                message,
                None,
                NOW,
                ENTRY_TOKENS,
                False,
                "{}",
                summary_id,
            )


def sqlite_time(moment: datetime) -> str:
    """The storage format SQLAlchemy uses for DateTime on SQLite (UTC, no offset)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def load(engine: Engine, sessions: int, expired: int, entries: int, seed: int) -> None:
    """Bulk-load the sessions and the expired sessions' entries (no API calls)."""
    ConversationMemory(engine=engine).database.ensure_schema()  # tables, indexes, FTS
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        if engine.dialect.name == "sqlite":
            _load_sqlite(cursor, sessions, expired, entries, seed)
        else:
            _load_postgres(cursor, sessions, expired, entries, seed)
        raw.commit()
        cursor.close()
    finally:
        raw.close()
    # Expired sessions are old: their entries were indexed for search long ago.
    with engine.begin() as conn:
        fts.flush(conn)
    vacuum(engine)


def vacuum(engine: Engine) -> None:
    """After a bulk write, what the database does by itself in normal operation:
    autovacuum on PostgreSQL, a WAL checkpoint on SQLite (so the next measured step
    does not pay for copying the bulk write back)."""
    if engine.dialect.name == "sqlite":
        raw = engine.raw_connection()  # outside any transaction
        try:
            raw.cursor().execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            raw.close()
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in ("tiermem_session", "tiermem_summary", "tiermem_entry"):
            conn.exec_driver_sql(f"VACUUM ANALYZE {table}")


def _batches(rows: Iterator[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(row)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _load_sqlite(cursor: Any, sessions: int, expired: int, entries: int, seed: int) -> None:
    cursor.execute("BEGIN")  # tiermem's connections autocommit unless told otherwise
    insert = f"INSERT INTO tiermem_session ({SESSION_COLUMNS}) VALUES ({', '.join('?' * 16)})"
    for batch in _batches(session_rows(sessions, expired, entries, seed), 50_000):
        cursor.executemany(
            insert, [(*r[:2], sqlite_time(r[2]), sqlite_time(r[3]), *r[4:]) for r in batch]
        )
    stamp = sqlite_time(NOW)
    insert = f"INSERT INTO tiermem_summary ({SUMMARY_COLUMNS}) VALUES ({', '.join('?' * 12)})"
    cursor.executemany(insert, [(*r[:9], stamp, stamp, stamp) for r in summary_rows(expired)])
    insert = f"INSERT INTO tiermem_entry ({ENTRY_COLUMNS}) VALUES ({', '.join('?' * 12)})"
    for batch in _batches(entry_rows(expired, entries), 50_000):
        cursor.executemany(insert, [(*r[:7], stamp, *r[8:]) for r in batch])


def _load_postgres(cursor: Any, sessions: int, expired: int, entries: int, seed: int) -> None:
    with cursor.copy(f"COPY tiermem_session ({SESSION_COLUMNS}) FROM STDIN") as copy:
        for row in session_rows(sessions, expired, entries, seed):
            copy.write_row(row)
    with cursor.copy(f"COPY tiermem_summary ({SUMMARY_COLUMNS}) FROM STDIN") as copy:
        for row in summary_rows(expired):
            copy.write_row(row)
    cursor.execute(
        "SELECT setval(pg_get_serial_sequence('tiermem_summary', 'id'),"
        " (SELECT coalesce(max(id), 1) FROM tiermem_summary))"
    )
    with cursor.copy(f"COPY tiermem_entry ({ENTRY_COLUMNS}) FROM STDIN") as copy:
        for row in entry_rows(expired, entries):
            copy.write_row(row)


# --------------------------------------------------------------------------- backends


@contextmanager
def database(backend: str) -> Iterator[Engine]:
    """A fresh SQLite file or PostgreSQL schema, removed afterwards."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            engine = sa.create_engine(f"sqlite:///{Path(directory) / 'tiers.db'}")
            yield engine
            engine.dispose()
        return
    schema = f"bench_tiers_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    engine = sa.create_engine(PG_URL, connect_args={"options": f"-csearch_path={schema}"})
    try:
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        admin.dispose()


def run(backend: str, sessions: int, expired: int, entries: int, seed: int) -> dict[str, Any]:
    """Load, then time every tier operation on one backend."""
    results: dict[str, Any] = {}
    print(f"\n{backend}: {sessions:,} sessions, {expired:,} expired with {entries} entries each")
    with database(backend) as engine:
        start = time.perf_counter()
        load(engine, sessions, expired, entries, seed)
        results["load_seconds"] = round(time.perf_counter() - start, 1)
        print(f"  {'bulk load (not an API call)':<46} {results['load_seconds']:8.1f} s")
        clock = ManualClock(NOW)
        memory = ConversationMemory(
            engine=engine, project=PROJECT, clock=clock, config=MemoryConfig()
        )
        measure("get_tier_stats", memory.get_tier_stats, results)
        measure("recalculate_tiers (daily run)", memory.recalculate_tiers, results)
        clock.advance(hours=1)
        measure("recalculate_tiers (hourly run)", memory.recalculate_tiers, results)
        clock.advance(hours=1)
        sizes: list[int] = []
        stop = memory.on("tier_changed", lambda _sender, **kw: sizes.append(len(kw["session_ids"])))
        measure("recalculate_tiers (hourly, with listener)", memory.recalculate_tiers, results)
        stop()
        results["tier_changed_signals"] = len(sizes)
        measure(
            "least_recently_used (expired, 100)",
            lambda: len(memory.least_recently_used("expired", 100)),
            results,
        )
        measure("prune_expired (dry run)", lambda: memory.prune_expired(dry_run=True), results)
        measure("prune_expired", memory.prune_expired, results)
        measure("prune_expired (again: idempotent)", memory.prune_expired, results)
        measure("get_tier_stats (after pruning)", memory.get_tier_stats, results)
        with engine.connect() as conn:
            counts = {
                table: conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one()
                for table in ("tiermem_session", "tiermem_entry", "tiermem_summary")
            }
        results["rows_left"] = counts
        # The worst case: every stored tier stale (e.g. the first run after an upgrade),
        # so every remaining row is rewritten.
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE tiermem_session SET memory_tier = 'active'"))
        vacuum(engine)
        measure("recalculate_tiers (worst case: all stale)", memory.recalculate_tiers, results)
        memory.close()
    return results


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 1 if a target was missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--sessions", type=int, default=1_000_000)
    parser.add_argument("--expired", type=int, default=100_000)
    parser.add_argument("--entries", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results-dir", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    report: dict[str, Any] = {
        "settings": {k: v for k, v in vars(args).items() if k != "results_dir"},
        "targets_seconds": TARGETS,
        "machine": {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "sqlite": sqlite3.sqlite_version,
            "load_average": os.getloadavg(),
        },
    }
    missed = []
    for backend in backends:
        report[backend] = run(backend, args.sessions, args.expired, args.entries, args.seed)
        for name, figures in report[backend].items():
            target = TARGETS.get(name) if isinstance(figures, dict) else None
            if target is not None and figures["seconds"] >= target:
                missed.append(f"{backend}: {name}")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / "tiers_bench.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}" + (f"; missed: {missed}" if missed else "; every target met"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
