"""Engines, transactions and error translation for SQLite and PostgreSQL.

Every public operation is one transaction. Writes are serialized per session:
on SQLite every write transaction starts with ``BEGIN IMMEDIATE`` (the file's
write lock, taken up front so a reader never has to upgrade and fail with an
instant SQLITE_BUSY) under a ``busy_timeout``; on PostgreSQL the session row
is locked ``FOR UPDATE`` under the memory's ``lock_timeout``. Driver errors never
escape: they become :mod:`tiermem.errors` types with the original as cause.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event, exc
from sqlalchemy.engine import Connection, Engine

from ..errors import (
    InvalidArgument,
    ReadOnlyMemory,
    StorageBusy,
    StorageCorrupt,
    StorageError,
    StorageFull,
    StorageUnavailable,
)
from . import _fast as _driver
from . import failpoints as _failpoints
from . import fts
from .schema import SessionRow
from .tables import create_tables

__all__ = [
    "DEFAULT_URL",
    "DRIVER_ERRORS",
    "Connection",
    "Database",
    "SUPPORTED_URLS",
    "commit_without_waiting",
    "parse_url",
    "translate_error",
]

T = TypeVar("T")
logger = logging.getLogger(__name__)

DEFAULT_URL = "sqlite:///tiermem.db"
#: What the driver layer raises (translated to ``StorageError`` by :func:`translate_error`).
DRIVER_ERRORS = (exc.SQLAlchemyError,)
#: PostgreSQL SQLSTATEs retried a bounded number of times: serialization failure, deadlock.
_RETRYABLE_PG = {"40001", "40P01"}
_MAX_RETRIES = 5
#: Run first in every PostgreSQL transaction. psycopg prepares a statement on the
#: server after a few runs, and PostgreSQL may then keep one generic plan for it:
#: a plan chosen while a session's tables were tiny (a sequential scan) would stay
#: while they grow, and a read would cost more with every turn. Custom plans are
#: made for the actual parameters every time.
_PG_PLAN_SETTING = "plan_cache_mode = force_custom_plan"
#: Prepended for a snapshot transaction on PostgreSQL: every statement then sees the
#: database as of the first one (READ COMMITTED takes a new snapshot per statement,
#: so a commit landing between two reads would show each a different state). Read-only
#: REPEATABLE READ transactions never fail with serialization errors.
_PG_SNAPSHOT_READ = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY; "
_PG_SNAPSHOT_WRITE = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; "
_READ_ONLY_MESSAGE = "this memory is read-only: it neither stores nor records accesses"


def translate_error(error: BaseException) -> StorageError:
    """Map a driver or SQLAlchemy error to the tiermem error a caller can act on."""
    orig = getattr(error, "orig", None) or error
    text = str(orig).lower()
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return StorageUnavailable(f"database connection lost: {orig}")
    if sqlstate in ("55P03", "57014") or "database is locked" in text or "busy" in text:
        return StorageBusy(f"database busy, retry later: {orig}")
    if sqlstate in _RETRYABLE_PG:
        return StorageBusy(f"transaction kept conflicting, retry later: {orig}")
    if sqlstate in ("53100",) or "disk is full" in text or "database or disk is full" in text:
        return StorageFull(f"database full: {orig}")
    if "malformed" in text or "not a database" in text:
        return StorageCorrupt(f"database damaged: {orig}")
    if (sqlstate or "").startswith("08") or "connection" in text or "terminat" in text:
        return StorageUnavailable(f"database unavailable: {orig}")
    return StorageError(f"database error: {orig}")


def commit_without_waiting(conn: Connection) -> None:
    """Let the current transaction's commit return before its log reaches the disk.

    For transactions that write access records only (when a session or document was
    last read, how often, and the time to live a read refreshes): on PostgreSQL
    their commit then skips the wait for a disk flush, about a millisecond each,
    which a read would otherwise pay. A crash of
    the server can lose the last fraction of a second of such transactions, each
    whole, never a stored entry or document: those commit synchronously, and each of
    their commits flushes every earlier one too. SQLite in WAL mode with
    ``synchronous = NORMAL`` never waits for the disk at commit; nothing to do there.
    """
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL synchronous_commit = off")


def _pg_on_connect(settings: str, dbapi_connection: Any, _record: Any) -> None:
    # Session settings (``SET a = 1; SET b = 2``), outside any transaction so that
    # they stay when the pool's reset rolls a transaction back.
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    try:
        dbapi_connection.execute(settings)
    finally:
        dbapi_connection.autocommit = autocommit


#: Seconds a pooled PostgreSQL connection may sit unused and still serve a transaction
#: without a ping first. A busy service reuses its connections within milliseconds,
#: and a ping before each transaction (SQLAlchemy's ``pool_pre_ping``) would cost it a
#: round trip per transaction. A connection used this recently is alive unless the
#: server went away in that moment: then the transaction fails as
#: ``StorageUnavailable``, as it would had the server gone during it, and the pool
#: replaces every connection it held.
PING_AFTER_IDLE_SECONDS = 1.0


def _pg_on_checkin(_dbapi_connection: Any, record: Any) -> None:
    record.info["tiermem_idle_since"] = time.monotonic()


def _pg_on_checkout(dialect: sa.Dialect, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    # A connection that sat unused (killed by an idle timeout, a firewall, a server
    # restart) is pinged; a dead one makes the pool connect anew.
    since = record.info.get("tiermem_idle_since")
    if since is None or time.monotonic() - since <= PING_AFTER_IDLE_SECONDS:
        return
    try:
        alive = dialect.do_ping(dbapi_connection)
    except dialect.loaded_dbapi.Error as error:
        raise exc.DisconnectionError(f"pooled connection is gone: {error}") from error
    if not alive:
        raise exc.DisconnectionError("pooled connection is gone")


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Manage transactions ourselves so BEGIN IMMEDIATE is possible (pysqlite would
    # otherwise open deferred transactions implicitly).
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout = 30000")
    cursor.execute("PRAGMA foreign_keys = ON")
    # What is deleted or overwritten is zeroed in the file, not left in free space, so
    # ``forget`` can erase a person (many builds, Debian's among them, default to it).
    cursor.execute("PRAGMA secure_delete = ON")
    _switch_to_wal(cursor)
    cursor.execute("PRAGMA synchronous = NORMAL")
    # Reads through a memory map skip a system call and a copy per page: searches of a
    # large file (a store's namespace, a full-text index's segments) take a third of
    # the time. SQLite maps for reading only; writes still go through the WAL.
    cursor.execute(f"PRAGMA mmap_size = {_SQLITE_MMAP_BYTES}")
    cursor.close()


#: How much of a SQLite file is read through a memory map.
_SQLITE_MMAP_BYTES = 1 << 30

#: How long a new connection keeps trying to switch a fresh file to WAL.
_WAL_SWITCH_SECONDS = 30.0


def _switch_to_wal(cursor: Any) -> None:
    """Put the file in WAL mode, waiting out other processes doing the same.

    Changing the journal mode needs an exclusive lock, and SQLite reports a
    conflict there as an instant ``database is locked`` without calling the busy
    handler (several processes opening one fresh file at once hit it), so the
    wait is ours: retry with a short backoff until the mode is WAL or the
    deadline passes.
    """
    deadline = time.monotonic() + _WAL_SWITCH_SECONDS
    pause = 0.005
    while True:
        try:
            mode = cursor.execute("PRAGMA journal_mode").fetchone()[0]
            if mode in ("wal", "memory"):
                return
            # When the mode cannot be changed SQLite answers with the old one.
            if cursor.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal":
                return
            if time.monotonic() > deadline:
                raise sqlite3.OperationalError("database is locked: cannot switch to WAL")
        except sqlite3.OperationalError as error:
            text = str(error).lower()
            if ("locked" not in text and "busy" not in text) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


#: Connections a Database keeps checked out between transactions, per kind.
_IDLE_MAX = 4


def _ended(conn: Connection) -> bool:
    """Whether ``conn``'s last transaction is over for SQLAlchemy and for SQLite too:
    a COMMIT that failed (``database is locked``) leaves SQLite's transaction open
    while SQLAlchemy considers it done, and the next BEGIN on it would fail."""
    if conn.invalidated or conn.in_transaction():
        return False
    return not getattr(conn.connection.driver_connection, "in_transaction", True)


def _close_kept(idle: dict[bool, list[Connection]]) -> None:
    """Return the connections kept between transactions to the pool."""
    for kept in idle.values():
        while kept:
            kept.pop().close()


def _sqlite_on_begin(conn: Connection) -> None:
    options = conn.get_execution_options()
    busy = options.get("tiermem_busy_ms")
    if busy is None and not options.get("tiermem_read") and conn._is_autocommit_isolation():
        # An application's own AUTOCOMMIT connection on an engine it passed in: it
        # wants no transaction (VACUUM and WAL checkpoints refuse to run in one).
        # tiermem's own transactions always carry its options, so they still begin.
        # (_is_autocommit_isolation is SQLAlchemy's own test, per connection or engine;
        # only connections that are not tiermem's reach it.)
        return
    info = conn.connection.info
    if busy is not None and info.get("tiermem_busy_ms") != busy:
        # This memory's lock_timeout; pooled connections may serve memories with others.
        _driver.execute_sql(conn, f"PRAGMA busy_timeout = {int(busy)}").close()
        info["tiermem_busy_ms"] = busy
    begin = "BEGIN" if options.get("tiermem_read") else "BEGIN IMMEDIATE"
    _driver.execute_sql(conn, begin).close()


#: The longest ``lock_timeout`` accepted, in seconds.
MAX_LOCK_TIMEOUT = 86_400


class Database:
    """An engine plus the transaction discipline tiermem needs.

    Args:
        url: a SQLAlchemy URL; ``None`` means ``sqlite:///tiermem.db`` in the
            working directory.
        engine: an existing engine instead of ``url``.
        lock_timeout: seconds a writer waits for a lock before ``StorageBusy``
            (at most ``MAX_LOCK_TIMEOUT``, a day: both databases take it in
            milliseconds as a 32-bit integer).
        server_time: on PostgreSQL, stamp accesses with the server's ``now()``
            instead of the application's clock (ignored on SQLite).
        read_only: never create anything (a SQLite file, tiermem's tables) and refuse
            every write transaction with ``ReadOnlyMemory``.

    Raises:
        StorageUnavailable: ``read_only`` on a SQLite file that does not exist.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        engine: Engine | None = None,
        lock_timeout: float = 30.0,
        server_time: bool = False,
        read_only: bool = False,
    ) -> None:
        if url is not None and engine is not None:
            raise InvalidArgument("pass url= or engine=, not both")
        if (
            isinstance(lock_timeout, bool)
            or not isinstance(lock_timeout, int | float)
            or not 0 < lock_timeout <= MAX_LOCK_TIMEOUT
        ):
            raise InvalidArgument(
                f"lock_timeout must be a number of seconds > 0 and at most "
                f"{MAX_LOCK_TIMEOUT} (a day), got {lock_timeout!r}"
            )
        owned = engine is None
        if engine is None:
            engine = _create_engine(url or DEFAULT_URL, lock_timeout)
        self.engine = engine
        self.dialect = engine.dialect.name
        if self.dialect not in ("sqlite", "postgresql"):
            raise InvalidArgument(
                f"unsupported database {self.dialect!r}: use SQLite or PostgreSQL"
            )
        self.read_only = read_only
        if read_only:
            _require_file(engine.url)  # before any connection: SQLite would create it
        self.lock_timeout_ms = int(lock_timeout * 1000)
        if self.dialect == "sqlite" and not event.contains(engine, "begin", _sqlite_on_begin):
            event.listen(engine, "connect", _sqlite_on_connect)
            event.listen(engine, "begin", _sqlite_on_begin)
            engine.dispose()  # pooled connections predate the connect hook
        self._pid = os.getpid()
        self._schema_ready = False
        self.server_time = server_time and self.dialect == "postgresql"
        # Per-transaction options: _sqlite_on_begin applies tiermem_busy_ms as the
        # busy_timeout and opens a deferred transaction for tiermem_read;
        # sessions.touch reads tiermem_server_time (accesses use the server's now()).
        self._write_options: dict[str, Any] = {}
        if self.dialect == "sqlite":
            self._write_options["tiermem_busy_ms"] = self.lock_timeout_ms
        if self.server_time:
            self._write_options["tiermem_server_time"] = True
        self._read_options = {**self._write_options, "tiermem_read": True}
        # Connections kept checked out between transactions, for writes and reads
        # (their options differ): a pool checkout and checkin cost a SQLite turn more
        # than its BEGIN and COMMIT. Only on an engine this Database made for a SQLite
        # file: nobody else draws on its pool, and there is no server connection to
        # go stale (PostgreSQL's pool pings connections that sat idle).
        self._keep = (
            owned and self.dialect == "sqlite" and not isinstance(engine.pool, sa.pool.StaticPool)
        )
        self._idle: dict[bool, list[Connection]] = {True: [], False: []}
        self._idle_lock = threading.Lock()
        # A Database dropped without dispose() still hands its kept connections back.
        weakref.finalize(self, _close_kept, self._idle)
        # What every PostgreSQL transaction needs: on an engine this Database made,
        # each connection gets it once, when it connects (a round trip less per
        # transaction); on an application's engine each transaction sets it locally,
        # leaving the application's own use of the connections alone.
        write_settings = (f"lock_timeout = {self.lock_timeout_ms}", _PG_PLAN_SETTING)
        self._pg_prologue = {True: "", False: ""}
        if self.is_postgres and owned:
            session = "; ".join(f"SET {setting}" for setting in write_settings)
            event.listen(engine, "connect", functools.partial(_pg_on_connect, session))
            event.listen(engine, "checkin", _pg_on_checkin)
            event.listen(engine, "checkout", functools.partial(_pg_on_checkout, engine.dialect))
        elif self.is_postgres:
            self._pg_prologue = {
                True: "; ".join(f"SET LOCAL {setting}" for setting in write_settings),
                False: f"SET LOCAL {_PG_PLAN_SETTING}",
            }

    @property
    def is_postgres(self) -> bool:
        """True on PostgreSQL."""
        return self.dialect == "postgresql"

    def _check_fork(self) -> None:
        # A forked child must not reuse the parent's sockets or file handles.
        if os.getpid() != self._pid:
            for kept in self._idle.values():
                kept.clear()  # the parent's: dropped unused, as dispose(close=False) does
            self._idle_lock = threading.Lock()
            self.engine.dispose(close=False)
            self._pid = os.getpid()

    def ensure_schema(self) -> None:
        """Create the tables once; safe when several processes start at once."""
        if self._schema_ready:
            return
        self._check_fork()
        if self.read_only:
            if not self.has_tables():
                where = self.engine.url.render_as_string(hide_password=True)
                raise StorageUnavailable(f"no tiermem tables in {where}: nothing stored yet")
            self._schema_ready = True
            return
        try:
            # BEGIN IMMEDIATE on SQLite serializes creators; tiermem's options mark the
            # transaction as its own, also on an engine whose connections autocommit.
            with (
                self.engine.connect().execution_options(**self._write_options) as conn,
                conn.begin(),
            ):
                create_tables(conn)  # on PostgreSQL under the schema's advisory lock
        except exc.SQLAlchemyError as error:
            raise translate_error(error) from error
        self._schema_ready = True

    @contextmanager
    def _transaction(self, *, write: bool, snapshot: bool = False) -> Iterator[Connection]:
        self._check_fork()
        conn = self._checkout(write)
        try:
            with conn.begin():
                prologue = self._pg_prologue[write]
                if snapshot and self.is_postgres:
                    prologue = (_PG_SNAPSHOT_WRITE if write else _PG_SNAPSHOT_READ) + prologue
                if prologue:
                    conn.exec_driver_sql(prologue)
                yield conn
                if write:
                    _failpoints.hit("transaction.before_commit")
        finally:
            self._checkin(conn, write)

    def _checkout(self, write: bool) -> Connection:
        if self._keep:
            with self._idle_lock:
                idle = self._idle[write]
                if idle:
                    return idle.pop()
        conn = self.engine.connect()
        options = self._write_options if write else self._read_options
        if options:  # one call: each one costs a dispatch
            conn = conn.execution_options(**options)
        return conn

    def _checkin(self, conn: Connection, write: bool) -> None:
        # Kept only when its transaction ended cleanly (committed or rolled back);
        # at most a few per kind, the rest go back to the pool (whose reset rolls back).
        if self._keep and _ended(conn):
            with self._idle_lock:
                idle = self._idle[write]
                if len(idle) < _IDLE_MAX:
                    idle.append(conn)
                    return
        conn.close()

    def has_tables(self) -> bool:
        """Whether tiermem's tables exist (without creating anything).

        Raises:
            StorageError: (a subclass) when the database fails.
        """
        self._check_fork()
        try:
            return sa.inspect(self.engine).has_table(SessionRow.__tablename__)
        except exc.SQLAlchemyError as error:
            raise translate_error(error) from error

    @staticmethod
    def server_now() -> sa.ColumnElement[datetime]:
        """The database server's ``now()``, as a SQL expression."""
        return sa.func.now()

    def run(
        self, work: Callable[[Connection], T], *, write: bool = True, snapshot: bool = False
    ) -> T:
        """Run ``work`` in one transaction, retrying PostgreSQL serialization failures.

        Args:
            work: the transaction's body.
            write: open a write transaction (``BEGIN IMMEDIATE`` on SQLite).
            snapshot: every statement of ``work`` sees one snapshot of the database.
                A SQLite transaction always does (WAL keeps the snapshot of its first
                read); on PostgreSQL this runs it at REPEATABLE READ (READ ONLY for a
                read). Reads of several statements that must agree use it.

        Raises:
            StorageError: (a subclass) when the database fails; nothing was committed.
            ReadOnlyMemory: ``work`` changed a row of a read-only database (rolled back).
        """
        if write and self.read_only:
            work = functools.partial(_only_looking, work)
        self.ensure_schema()
        for attempt in range(_MAX_RETRIES):
            try:
                with self._transaction(write=write, snapshot=snapshot) as conn:
                    return work(conn)
            except exc.DBAPIError as error:
                sqlstate = getattr(error.orig, "sqlstate", None)
                if sqlstate in _RETRYABLE_PG and attempt + 1 < _MAX_RETRIES:
                    # Said, so that an operator (and a test) can see conflicts that
                    # the retries hid: each costs a rolled-back transaction.
                    logger.info("retrying a transaction (SQLSTATE %s): %s", sqlstate, error.orig)
                    time.sleep(0.01 * 2**attempt)
                    continue
                raise translate_error(error) from error
            except (exc.CompileError, exc.ArgumentError, exc.InvalidRequestError):
                raise  # programming errors, not storage failures
            except exc.SQLAlchemyError as error:
                raise translate_error(error) from error
        raise AssertionError("unreachable")  # pragma: no cover

    async def arun(
        self, work: Callable[[Connection], T], *, write: bool = True, snapshot: bool = False
    ) -> T:
        """:meth:`run` for an event loop: on a worker thread of the loop's default
        executor, with the engine's pool. (An async engine, awaiting each statement
        of ``work`` through ``AsyncConnection.run_sync`` on psycopg's async mode,
        cost more CPU per turn and gave fewer turns per second under 200 and
        20 concurrent conversations: benchmarks/README.md.)

        A cancelled caller does not stop the transaction: it runs to its end on its
        thread, committing or rolling back as it would have, and then returns its
        connection. So cancellation never leaves a connection checked out or a
        transaction open, and a write whose caller was cancelled may still commit.

        Raises:
            StorageError: (a subclass) when the database fails; nothing was committed.
        """
        return await asyncio.to_thread(self.run, work, write=write, snapshot=snapshot)

    def dispose(self) -> None:
        """Close the pooled connections (and those kept between transactions)."""
        with self._idle_lock:
            _close_kept(self._idle)
        self.engine.dispose()


#: The URLs tiermem opens, as an error names them.
SUPPORTED_URLS = (
    "sqlite:///FILE, or postgresql://USER@HOST/DB (postgres:// and "
    "postgresql+psycopg:// alike, all through psycopg 3)"
)
#: Driver names that mean PostgreSQL through psycopg 3, the one driver tiermem uses.
_PSYCOPG = frozenset({"postgres", "postgresql", "postgres+psycopg", "postgresql+psycopg"})
_SQLITE = frozenset({"sqlite", "sqlite+pysqlite"})


def parse_url(url: str) -> sa.URL:
    """``url`` parsed, a PostgreSQL URL set to the psycopg driver.

    ``postgres://`` (as hosting services hand it out), ``postgresql://`` and
    ``postgresql+psycopg://`` are the same database.

    Raises:
        InvalidArgument: it is not a SQLAlchemy URL, or names a database or a driver
            tiermem does not support (the message lists the supported forms).
    """
    try:
        parsed = sa.make_url(url)
    except (exc.ArgumentError, ValueError) as error:  # ValueError: a port that is no number
        raise InvalidArgument(f"bad database url {url!r}: expected e.g. sqlite:///FILE") from error
    if parsed.drivername in _PSYCOPG:
        return parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername in _SQLITE:
        return parsed
    backend = parsed.drivername.split("+", 1)[0]
    what = (
        f"unsupported driver {parsed.drivername!r}"
        if backend in ("postgres", "postgresql", "sqlite")
        else f"unsupported database {backend!r}"
    )
    shown = parsed.render_as_string(hide_password=True)
    raise InvalidArgument(f"{what} in {shown!r}: use {SUPPORTED_URLS}")


def _only_looking(work: Callable[[Connection], T], conn: Connection) -> T:
    """Run ``work``, asked for a write transaction, on a read-only database: it may
    look and may index pending full-text rows (SQLite: upkeep of a derived index,
    done first, not a change of what is stored), and any row it changed or locked,
    an access record included, raises ``ReadOnlyMemory`` and rolls back. (An
    operation that finds nothing to change, a prune of nothing expired, succeeds
    alike on both backends.)"""
    if conn.dialect.name != "sqlite":
        result = work(conn)
        # PostgreSQL gives a transaction an id when it first changes or locks a row.
        if conn.exec_driver_sql("SELECT pg_current_xact_id_if_assigned()").scalar() is not None:
            raise ReadOnlyMemory(_READ_ONLY_MESSAGE)
        return result
    fts.flush(conn)
    driver = conn.connection.driver_connection
    before = driver.total_changes  # type: ignore[union-attr]
    result = work(conn)
    if driver.total_changes != before:  # type: ignore[union-attr]
        raise ReadOnlyMemory(_READ_ONLY_MESSAGE)
    return result


def _require_file(url: sa.URL) -> None:
    """Refuse a SQLite URL naming a file that does not exist."""
    path = url.database
    if url.get_backend_name() == "sqlite" and path not in (None, "", ":memory:"):
        if not path.startswith("file:") and not Path(path).is_file():
            raise StorageUnavailable(f"no database at {path}")


def _create_engine(url: str, lock_timeout: float) -> Engine:
    parsed = parse_url(url)
    kwargs: dict[str, Any] = {}
    if parsed.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"timeout": lock_timeout, "check_same_thread": False}
        if parsed.database in (None, "", ":memory:"):
            # One shared connection, or every checkout would see an empty database.
            kwargs["poolclass"] = sa.pool.StaticPool
    # PostgreSQL connections are pinged when idle a while (_pg_on_checkout), not before
    # every transaction.
    try:
        return sa.create_engine(parsed, **kwargs)
    except ModuleNotFoundError as error:  # only psycopg can be missing
        raise InvalidArgument(
            "PostgreSQL needs psycopg 3, which tiermem's postgres extra installs "
            f"(psycopg[binary]): {error}"
        ) from error
    except exc.ArgumentError as error:
        raise InvalidArgument(f"bad database url: {error}") from error
