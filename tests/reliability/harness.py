"""Process harness for crash and concurrency tests.

Workers are started with the ``spawn`` method (a fresh interpreter that
reads ``TIERMEM_FAILPOINTS`` when it imports tiermem), report through
append-only files (``os.write`` survives SIGKILL; a queue's feeder thread
does not), and are always joined with a deadline: a straggler is SIGKILLed
and the test fails as a deadlock.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from tiermem.doctor import find_violations

__all__ = [
    "CTX",
    "PG_URL",
    "StoreSpec",
    "assert_healthy",
    "join_all",
    "kill",
    "pg_backends",
    "read_log",
    "spawn",
    "store_dump",
    "store_healthy",
    "wait_backends_gone",
    "wait_for",
    "wait_for_hit",
    "write_log",
]

PG_URL = os.environ.get(
    "TIERMEM_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
CTX = multiprocessing.get_context("spawn")
APP_PREFIX = "tiermem-test"


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """Where a test's data lives, in a form a spawned worker can receive.

    Attributes:
        backend: ``"sqlite"`` or ``"postgres"``.
        target: the SQLite file path or the PostgreSQL schema name.
    """

    backend: str
    target: str

    @property
    def app_name(self) -> str:
        """The ``application_name`` every PostgreSQL connection of this test uses."""
        return f"{APP_PREFIX}-{os.path.basename(self.target)[-16:]}"

    @property
    def url(self) -> str:
        """A URL that selects the file or schema (for the CLI and ``url=``)."""
        if self.backend == "sqlite":
            return f"sqlite:///{self.target}"
        return f"{PG_URL}?options=-csearch_path%3D{self.target}&application_name={self.app_name}"

    def engine(self, **kwargs: Any) -> Engine:
        """A new engine on the store (tiermem adds its pragmas and listeners)."""
        if self.backend == "sqlite":
            return sa.create_engine(
                f"sqlite:///{self.target}", connect_args={"check_same_thread": False}, **kwargs
            )
        return sa.create_engine(
            PG_URL,
            pool_pre_ping=True,
            connect_args={
                "options": f"-csearch_path={self.target}",
                "application_name": self.app_name,
            },
            **kwargs,
        )


# --------------------------------------------------------------------------- logs


def write_log(path: str | Path, record: Any) -> None:
    """Append one JSON line with a single ``write`` (complete even if killed right after)."""
    data = (json.dumps(record) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_log(path: str | Path) -> list[Any]:
    """Every complete JSON line of a log (a missing file is an empty log)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.endswith(("}", "]", '"'))]


# --------------------------------------------------------------------------- processes


@contextmanager
def _environment(changes: Mapping[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def spawn(
    target: Callable[..., Any],
    *args: Any,
    failpoints: str | None = None,
    fp_dir: Path | None = None,
) -> BaseProcess:
    """Start ``target(*args)`` in a spawned interpreter with the given failpoints."""
    env = {"TIERMEM_FAILPOINTS": failpoints or ""}
    if fp_dir is not None:
        env["TIERMEM_FAILPOINT_DIR"] = str(fp_dir)
    process = CTX.Process(target=target, args=args, daemon=True)
    # A spawned child copies the environment when it starts, before it imports tiermem.
    with _environment(env):
        process.start()
    return process


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` every 10 ms; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


def wait_for_hit(fp_dir: Path, name: str, process: BaseProcess, timeout: float = 60.0) -> None:
    """Wait until ``process`` reports that it paused at failpoint ``name``."""
    marker = fp_dir / f"{name}.{process.pid}.hit"

    def reached() -> bool:
        if marker.exists():
            return True
        if not process.is_alive():
            raise AssertionError(
                f"worker exited with {process.exitcode} before failpoint {name} was hit"
            )
        return False

    wait_for(reached, timeout, f"failpoint {name}")


def kill(process: BaseProcess) -> None:
    """SIGKILL a worker and reap it."""
    if process.pid is not None and process.is_alive():
        os.kill(process.pid, signal.SIGKILL)
    process.join(10)
    assert not process.is_alive(), "a SIGKILLed worker is still alive"


def join_all(processes: list[BaseProcess], timeout: float) -> None:
    """Join every worker within ``timeout`` seconds overall; SIGKILL stragglers and fail.

    A worker that exits with a non-zero code fails the test too.
    """
    deadline = time.monotonic() + timeout
    stuck = []
    for process in processes:
        process.join(max(deadline - time.monotonic(), 0.0))
        if process.is_alive():
            stuck.append(process)
    for process in stuck:
        kill(process)
    if stuck:
        raise AssertionError(f"{len(stuck)} worker(s) still running after {timeout} s: deadlock")
    failed = [p.exitcode for p in processes if p.exitcode != 0]
    if failed:
        raise AssertionError(f"workers exited with codes {failed}")


# --------------------------------------------------------------------------- checks


def store_dump(store: StoreSpec, **kwargs: Any) -> str:
    """The canonical dump of the store, through a short-lived engine."""
    from .dump import canonical_dump

    engine = store.engine()
    try:
        return canonical_dump(engine, **kwargs)
    finally:
        engine.dispose()


#: Seconds a SIGKILLed worker's PostgreSQL backend may take to end (it ends when it
#: next reads its closed socket, after the statement or commit it was running).
BACKEND_SETTLE_SECONDS = 5.0


def store_healthy(store: StoreSpec) -> None:
    """:func:`assert_healthy` through a short-lived engine, with the leak checks.

    A lock or open transaction of the test's application may belong to a worker
    killed a moment ago whose backend has not ended yet: while those are the only
    problems, they are checked again for up to :data:`BACKEND_SETTLE_SECONDS`. One
    that outlives that is a leak, and fails."""
    engine = store.engine()
    try:
        deadline = time.monotonic() + BACKEND_SETTLE_SECONDS
        problems = find_violations(engine, application_name=store.app_name)
        while problems and all(_leak(p) for p in problems) and time.monotonic() < deadline:
            time.sleep(0.05)
            problems = find_violations(engine, application_name=store.app_name)
        if problems:
            raise AssertionError("tiermem invariants broken:\n" + "\n".join(problems))
    finally:
        engine.dispose()


def _leak(problem: str) -> bool:
    """Whether ``problem`` is a PostgreSQL backend's lock or open transaction."""
    return problem.startswith("I9 ") and (" held by " in problem or " left " in problem)


def wait_backends_gone(store: StoreSpec, timeout: float = 5.0) -> None:
    """On PostgreSQL, wait until no other backend of the test's application is left
    (a killed worker's backend ends when the server sees its socket close)."""
    if store.backend != "postgres":
        return
    engine = store.engine()
    try:
        wait_for(lambda: not pg_backends(engine, store.app_name), timeout, "backends to end")
    finally:
        engine.dispose()


def pg_backends(engine: Engine, app_name: str) -> list[tuple[int, str, str]]:
    """(pid, state, application_name) of the other server backends of ``app_name``."""
    query = sa.text(
        "SELECT pid, coalesce(state, ''), application_name FROM pg_stat_activity "
        "WHERE application_name = :app AND pid <> pg_backend_pid()"
    )
    with engine.connect() as conn:
        rows = [(int(r[0]), str(r[1]), str(r[2])) for r in conn.execute(query, {"app": app_name})]
        conn.rollback()
    return rows


def assert_healthy(engine: Engine, *, application_name: str | None = None) -> None:
    """Fail with every broken invariant (deep checks, PostgreSQL leak checks included)."""
    problems = find_violations(engine, application_name=application_name)
    if problems:
        raise AssertionError("tiermem invariants broken:\n" + "\n".join(problems))
